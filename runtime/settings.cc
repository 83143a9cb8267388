#include "runtime/settings.h"

#include <arpa/inet.h>

#include <cstdint>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "base/units.h"

namespace stragglar {
namespace {

constexpr int64_t kMaxEpochCalls = 1000000;
constexpr int64_t kMaxCount = 1000000;  // the pipeline's micro-batch counts
constexpr int kMaxForcedPieces = 16;    // the largest depth the model itself considers
constexpr int64_t kMaxMessageBytes = int64_t{1} << 30;
constexpr int64_t kMinIpcBytes = int64_t{1} << 20;
constexpr int64_t kMaxIpcBytes = int64_t{4} << 30;
// The longest wait a setting may ask for: STRAGGLAR_IPC_TIMEOUT, _WARN_AFTER and _TIMEOUT.
constexpr double kMaxWaitS = 86400;
constexpr int kMaxIpcCtas = 64;

constexpr RuntimeMode kModes[] = {RuntimeMode::kAdapt, RuntimeMode::kObserve, RuntimeMode::kOff};
constexpr PreloadConfig::Forced kForcedAlgorithms[] = {
    PreloadConfig::Forced::kAuto,
    PreloadConfig::Forced::kNative,
    PreloadConfig::Forced::kRing,
    PreloadConfig::Forced::kHalvingDoubling,
    PreloadConfig::Forced::kStragglar,
    PreloadConfig::Forced::kStragglarLogDepth,
    PreloadConfig::Forced::kStragglarHierarchical};
constexpr LogLevel kLogLevels[] = {LogLevel::kNone, LogLevel::kWarn, LogLevel::kInfo,
                                   LogLevel::kTrace};

// An integer in [low, high] (64 bits, so that a huge value is out of range rather than
// malformed).
std::optional<int64_t> IntegerIn(absl::string_view value, int64_t low, int64_t high) {
  int64_t number = 0;
  if (!absl::SimpleAtoi(value, &number) || number < low || number > high) return std::nullopt;
  return number;
}

// A size that travels in messages: 0 (no cut) or a multiple of 16 bytes up to 1 GiB.
std::optional<int64_t> MessageBytes(absl::string_view value) {
  absl::StatusOr<int64_t> bytes = ParseByteSize(value);
  if (!bytes.ok() || *bytes % 16 != 0 || *bytes > kMaxMessageBytes) return std::nullopt;
  return *bytes;
}

std::optional<double> WaitSeconds(absl::string_view value) {
  absl::StatusOr<double> seconds = ParseSeconds(value);
  if (!seconds.ok() || *seconds < 0 || *seconds > kMaxWaitS) return std::nullopt;
  return *seconds;
}

// A value of two, case-insensitive: true for `first`, false for `second`.
std::optional<bool> IsFirstOfTwo(absl::string_view value, absl::string_view first,
                                 absl::string_view second) {
  if (absl::EqualsIgnoreCase(value, first)) return true;
  if (absl::EqualsIgnoreCase(value, second)) return false;
  return std::nullopt;
}

std::string Duration(double seconds) { return absl::FormatDuration(absl::Seconds(seconds)); }

std::string Durations(const std::vector<double>& seconds) {
  return absl::StrJoin(
      seconds, ",", [](std::string* out, double value) { absl::StrAppend(out, Duration(value)); });
}

// "" (unset) for 0: PreloadConfig's default where the variable has no "auto".
std::string PositiveOrUnset(int64_t value) { return value == 0 ? "" : absl::StrCat(value); }

// The names of `values` as `name_of` gives them, comma-separated.
template <typename Values, typename NameOf>
std::string Names(const Values& values, NameOf name_of) {
  std::vector<std::string> names;
  for (const auto& value : values) names.emplace_back(name_of(value));
  return absl::StrJoin(names, ", ");
}

std::string Bytes(int64_t bytes) { return FormatBytes(static_cast<double>(bytes)); }

// The rows that choose what runs: the policy and the plan it runs. Rank 0's values.
void AddPolicyRows(std::vector<Setting>& rows) {
  const PreloadConfig defaults;
  rows.push_back({
      .name = "STRAGGLAR_MODE",
      .accepted = Names(kModes, RuntimeModeName),
      .fallback = std::string(RuntimeModeName(defaults.mode)),
      .meaning = "adapt: the policy picks each call's algorithm; observe: profile and name "
                 "stragglers, and always run the default; off: pass every call through untouched",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            for (RuntimeMode mode : kModes) {
              if (absl::EqualsIgnoreCase(value, RuntimeModeName(mode))) {
                config.mode = mode;
                return true;
              }
            }
            return false;
          },
      .write =
          +[](const PreloadConfig& config) { return std::string(RuntimeModeName(config.mode)); },
  });
  rows.push_back({
      .name = "STRAGGLAR_ALGORITHM",
      .accepted = Names(kForcedAlgorithms, ForcedAlgorithmName),
      .fallback = std::string(ForcedAlgorithmName(defaults.algorithm)),
      .meaning = "a testing and benchmark knob: auto lets the policy decide; native always runs "
                 "the library's own collective; the others always run that plan family",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            for (PreloadConfig::Forced algorithm : kForcedAlgorithms) {
              if (absl::EqualsIgnoreCase(value, ForcedAlgorithmName(algorithm))) {
                config.algorithm = algorithm;
                return true;
              }
            }
            return false;
          },
      .write =
          +[](const PreloadConfig& config) {
            return std::string(ForcedAlgorithmName(config.algorithm));
          },
  });
  rows.push_back({
      .name = "STRAGGLAR_STRAGGLER",
      .accepted = "a rank >= 0",
      .fallback = "the last rank",
      .meaning = "the straggler of a forced StragglAR plan (a rank beyond the last is the last)",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<int64_t> rank = IntegerIn(value, 0, INT32_MAX);
            if (rank.has_value()) config.straggler = static_cast<int>(*rank);
            return rank.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return config.straggler ? absl::StrCat(*config.straggler) : std::string();
          },
  });
  rows.push_back({
      .name = "STRAGGLAR_EPOCH_CALLS",
      .accepted = absl::StrCat("an integer from 1 to ", kMaxEpochCalls),
      .fallback = absl::StrCat(defaults.epoch_calls),
      .meaning = "calls per epoch: the ranks exchange their timings, and the policy decides "
                 "again, once an epoch",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<int64_t> calls = IntegerIn(value, 1, kMaxEpochCalls);
            if (calls.has_value()) config.epoch_calls = static_cast<int>(*calls);
            return calls.has_value();
          },
      .write = +[](const PreloadConfig& config) { return absl::StrCat(config.epoch_calls); },
  });
  rows.push_back({
      .name = "STRAGGLAR_MIN_BYTES",
      .accepted = "a size with an optional unit B, KiB, MiB, GiB, TiB, KB, MB, GB, TB, e.g. "
                  "256KiB, 1MB or 0",
      .fallback = Bytes(defaults.min_bytes),
      .meaning = "smaller calls run the library's own collective, unmeasured",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            absl::StatusOr<int64_t> bytes = ParseByteSize(value);
            if (bytes.ok()) config.min_bytes = *bytes;
            return bytes.ok();
          },
      .write = +[](const PreloadConfig& config) { return absl::StrCat(config.min_bytes); },
  });
  rows.push_back({
      .name = "STRAGGLAR_PIECES",
      .accepted = absl::StrCat("auto or an integer from 1 to ", kMaxForcedPieces),
      .fallback = "auto",
      .meaning = "pieces per chunk of StragglAR's plans (a benchmark knob); auto: the model's "
                 "choice per size",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            if (absl::EqualsIgnoreCase(value, "auto")) {
              config.pieces = 0;
              return true;
            }
            std::optional<int64_t> pieces = IntegerIn(value, 1, kMaxForcedPieces);
            if (pieces.has_value()) config.pieces = static_cast<int>(*pieces);
            return pieces.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return config.pieces == 0 ? std::string("auto") : absl::StrCat(config.pieces);
          },
  });
}

// How plans are shaped for the machine and cut into messages. Rank 0's values.
void AddPlanShapeRows(std::vector<Setting>& rows) {
  const PreloadConfig defaults;
  rows.push_back({
      .name = "STRAGGLAR_TOPOLOGY",
      .accepted = "NxG, N nodes of G ranks, e.g. 4x8",
      .fallback = "what the library learns",
      .meaning = "the machine, ranks numbered node by node, instead of what the library learns "
                 "(for tests and for launchers that number ranks otherwise)",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            absl::StatusOr<Topology> topology = ParseTopology(value);
            if (topology.ok()) config.topology = *topology;
            return topology.ok();
          },
      .write =
          +[](const PreloadConfig& config) {
            return config.topology ? TopologyName(*config.topology) : std::string();
          },
  });
  rows.push_back({
      .name = "STRAGGLAR_MPI_SEGMENT",
      .readers = SettingReaders::kMpi,
      .accepted = "0 or a multiple of 16 bytes up to 1GiB, e.g. 256KiB",
      .fallback = Bytes(defaults.mpi_segment_bytes),
      .meaning = "reduce transfers travel in messages of at most this size, each added while "
                 "still in cache; 0: one message",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<int64_t> bytes = MessageBytes(value);
            if (bytes.has_value()) config.mpi_segment_bytes = *bytes;
            return bytes.has_value();
          },
      .write = +[](const PreloadConfig& config) { return absl::StrCat(config.mpi_segment_bytes); },
  });
  rows.push_back({
      .name = "STRAGGLAR_MPI_NETWORK_MESSAGE",
      .readers = SettingReaders::kMpi,
      .accepted = "auto, 0 or a multiple of 16 bytes up to 1GiB, e.g. 64000",
      .fallback = "auto",
      .meaning = "on nodes, transfers to another node travel as messages of at most this size, "
                 "all posted at once; auto: just below the TCP transport's eager limit",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            if (absl::EqualsIgnoreCase(value, "auto")) {
              config.mpi_network_message_bytes.reset();
              return true;
            }
            std::optional<int64_t> bytes = MessageBytes(value);
            if (bytes.has_value()) config.mpi_network_message_bytes = *bytes;
            return bytes.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return config.mpi_network_message_bytes
                       ? absl::StrCat(*config.mpi_network_message_bytes)
                       : std::string("auto");
          },
  });
  rows.push_back({
      .name = "STRAGGLAR_QUEUES",
      .readers = SettingReaders::kMpi,
      .accepted = "rounds, per-class",
      .fallback = "rounds",
      .meaning = "on nodes, plans run round by round, or on one queue per link class",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<bool> rounds = IsFirstOfTwo(value, "rounds", "per-class");
            if (rounds.has_value()) config.per_class_queues = !*rounds;
            return rounds.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return std::string(config.per_class_queues ? "per-class" : "rounds");
          },
  });
  rows.push_back({
      .name = "STRAGGLAR_PRE_ARRIVAL",
      .readers = SettingReaders::kNccl,
      .accepted = "rounds, nccl",
      .fallback = "rounds",
      .meaning = "StragglAR's pre-arrival ReduceScatter as the plan's rounds, or as NCCL's own "
                 "on a communicator of the ready ranks",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<bool> rounds = IsFirstOfTwo(value, "rounds", "nccl");
            if (rounds.has_value()) config.native_pre_arrival = !*rounds;
            return rounds.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return std::string(config.native_pre_arrival ? "nccl" : "rounds");
          },
  });
}

// The NCCL library's device executor (docs/nccl.md) and the call watchdog. Rank 0's values.
void AddExecutorRows(std::vector<Setting>& rows) {
  const PreloadConfig defaults;
  rows.push_back({
      .name = "STRAGGLAR_EXECUTOR",
      .readers = SettingReaders::kNccl,
      .accepted = "nccl, device",
      .fallback = "nccl",
      .meaning = "nccl: each round an NCCL group of send/recv; device: one kernel per call over "
                 "peer GPU memory, where every rank is on one host",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<bool> nccl = IsFirstOfTwo(value, "nccl", "device");
            if (nccl.has_value()) config.device_executor = !*nccl;
            return nccl.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return std::string(config.device_executor ? "device" : "nccl");
          },
  });
  rows.push_back({
      .name = "STRAGGLAR_IPC_BYTES",
      .readers = SettingReaders::kNccl,
      .accepted = "a size from 1MiB to 4GiB, e.g. 64MiB",
      .fallback = Bytes(defaults.ipc_bytes),
      .meaning = "the device executor's window per rank, allocated twice; larger calls run in "
                 "slices",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            absl::StatusOr<int64_t> bytes = ParseByteSize(value);
            const bool valid = bytes.ok() && *bytes >= kMinIpcBytes && *bytes <= kMaxIpcBytes;
            if (valid) config.ipc_bytes = *bytes;
            return valid;
          },
      .write = +[](const PreloadConfig& config) { return absl::StrCat(config.ipc_bytes); },
  });
  rows.push_back({
      .name = "STRAGGLAR_IPC_TIMEOUT",
      .readers = SettingReaders::kNccl,
      .accepted = "a duration up to a day, e.g. 300s or 10m, or 0 to wait until aborted",
      .fallback = FormatSeconds(defaults.ipc_timeout_s),
      .meaning = "how long the device executor's kernel waits for a peer before the call fails",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<double> seconds = WaitSeconds(value);
            if (seconds.has_value()) config.ipc_timeout_s = *seconds;
            return seconds.has_value();
          },
      .write = +[](const PreloadConfig& config) { return Duration(config.ipc_timeout_s); },
  });
  rows.push_back({
      .name = "STRAGGLAR_IPC_BLOCKS",
      .readers = SettingReaders::kNccl,
      .accepted = absl::StrCat("an integer from 1 to ", kMaxIpcCtas),
      .fallback = absl::StrCat(defaults.ipc_ctas),
      .meaning = "CTAs per call of the device executor",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<int64_t> ctas = IntegerIn(value, 1, kMaxIpcCtas);
            if (ctas.has_value()) config.ipc_ctas = static_cast<int>(*ctas);
            return ctas.has_value();
          },
      .write = +[](const PreloadConfig& config) { return absl::StrCat(config.ipc_ctas); },
  });
  rows.push_back({
      .name = "STRAGGLAR_DEVICE_SCOPE",
      .readers = SettingReaders::kNccl,
      .accepted = "auto, system",
      .fallback = "auto",
      .meaning = "how far the device executor's signals reach: auto, the narrowest that holds; "
                 "system, always the system's",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<bool> automatic = IsFirstOfTwo(value, "auto", "system");
            if (automatic.has_value()) config.device_system_scope = !*automatic;
            return automatic.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return std::string(config.device_system_scope ? "system" : "auto");
          },
  });
  // Each rank's own would do for the warning; alike, every stuck rank says the same.
  rows.push_back({
      .name = "STRAGGLAR_WARN_AFTER",
      .accepted = "a duration up to a day, e.g. 30s or 5m, or 0 for never",
      .fallback = FormatSeconds(defaults.warn_after_s),
      .meaning = "a call that has waited this long gets one warning naming the rank and round it "
                 "waits for",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<double> seconds = WaitSeconds(value);
            if (seconds.has_value()) config.warn_after_s = *seconds;
            return seconds.has_value();
          },
      .write = +[](const PreloadConfig& config) { return Duration(config.warn_after_s); },
  });
  rows.push_back({
      .name = "STRAGGLAR_TIMEOUT",
      .accepted = "a duration up to a day, e.g. 30s or 5m, or 0 for never",
      .fallback = "never",
      .meaning = "a call that has waited this long ends the job (MPI_Abort) or revokes the NCCL "
                 "communicator, after rank 0 writes its files",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<double> seconds = WaitSeconds(value);
            if (seconds.has_value()) config.timeout_s = *seconds;
            return seconds.has_value();
          },
      .write = +[](const PreloadConfig& config) { return Duration(config.timeout_s); },
  });
}

// The learned state, the link profiler and the pipeline advisor (docs/pipeline.md): rank 0's
// values, since every rank joins their exchanges.
void AddStateAndPipelineRows(std::vector<Setting>& rows) {
  rows.push_back({
      .name = "STRAGGLAR_STATE_FILE",
      .meaning = "the learned state: read at the start by rank 0 and broadcast, written at the end",
      .verbatim = true,
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            config.state_file = std::string(value);
            return true;
          },
      .write = +[](const PreloadConfig& config) { return config.state_file; },
  });
  rows.push_back({
      .name = "STRAGGLAR_LINK_PROFILING",
      .readers = SettingReaders::kNccl,
      .accepted = "on, off",
      .fallback = "off",
      .meaning = "time ncclSend and ncclRecv per link, name a persistently slow link and advise "
                 "the pipeline's warm-up counts",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<bool> on = IsFirstOfTwo(value, "on", "off");
            if (on.has_value()) config.link_profiling = *on;
            return on.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return std::string(config.link_profiling ? "on" : "off");
          },
  });
  rows.push_back({
      .name = "STRAGGLAR_PIPELINE_MICROBATCHES",
      .readers = SettingReaders::kNccl,
      .accepted = absl::StrCat("an integer from 1 to ", kMaxCount),
      .fallback = "unset",
      .meaning = "the pipeline's micro-batches per iteration, for the link advisor",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<int64_t> count = IntegerIn(value, 1, kMaxCount);
            if (count.has_value()) config.pipeline.microbatches = static_cast<int>(*count);
            return count.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return PositiveOrUnset(config.pipeline.microbatches);
          },
  });
  const std::string times_accepted =
      "a positive duration, or one per stage separated by commas, e.g. 10ms or "
      "10ms,12ms,12ms,9ms";
  rows.push_back({
      .name = "STRAGGLAR_PIPELINE_FORWARD",
      .readers = SettingReaders::kNccl,
      .accepted = times_accepted,
      .fallback = "unset",
      .meaning = "a micro-batch's forward time, for every stage or one per stage",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            absl::StatusOr<std::vector<double>> times = ParseDurationList(value);
            if (times.ok()) config.pipeline.forward_s = *std::move(times);
            return times.ok();
          },
      .write = +[](const PreloadConfig& config) { return Durations(config.pipeline.forward_s); },
  });
  rows.push_back({
      .name = "STRAGGLAR_PIPELINE_BACKWARD",
      .readers = SettingReaders::kNccl,
      .accepted = times_accepted,
      .fallback = "unset",
      .meaning = "a micro-batch's backward time, for every stage or one per stage",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            absl::StatusOr<std::vector<double>> times = ParseDurationList(value);
            if (times.ok()) config.pipeline.backward_s = *std::move(times);
            return times.ok();
          },
      .write = +[](const PreloadConfig& config) { return Durations(config.pipeline.backward_s); },
  });
  rows.push_back({
      .name = "STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES",
      .readers = SettingReaders::kNccl,
      .accepted = absl::StrCat("an integer from 0 to ", kMaxCount),
      .fallback = "unset",
      .meaning = "the most micro-batches a stage may hold in memory; 0: no limit",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<int64_t> count = IntegerIn(value, 0, kMaxCount);
            if (count.has_value()) config.pipeline.memory_microbatches = static_cast<int>(*count);
            return count.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return absl::StrCat(config.pipeline.memory_microbatches);
          },
  });
}

// Each rank's own settings: what it logs, how it times, what it serves and the files rank 0
// writes.
void AddPerRankRows(std::vector<Setting>& rows) {
  const PreloadConfig defaults;
  rows.push_back({
      .name = "STRAGGLAR_DEBUG",
      .scope = SettingScope::kPerRank,
      .accepted = Names(kLogLevels, LogLevelName),
      .fallback = std::string(LogLevelName(defaults.debug)),
      .meaning = "the log level; INFO adds a banner, each plan's first use and the lag summary",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<LogLevel> level = ParseLogLevel(value);
            if (level.has_value()) config.debug = *level;
            return level.has_value();
          },
      .write = +[](const PreloadConfig& config) { return std::string(LogLevelName(config.debug)); },
  });
  rows.push_back({
      .name = "STRAGGLAR_PROFILER",
      .scope = SettingScope::kPerRank,
      .readers = SettingReaders::kNccl,
      .accepted = "cupti, events",
      .fallback = "cupti",
      .meaning = "how GPU calls are timed; events leaves the process's one CUPTI subscription to "
                 "a profiler",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            std::optional<bool> cupti = IsFirstOfTwo(value, "cupti", "events");
            if (cupti.has_value()) config.prefer_cupti = *cupti;
            return cupti.has_value();
          },
      .write =
          +[](const PreloadConfig& config) {
            return std::string(config.prefer_cupti ? "cupti" : "events");
          },
  });
  rows.push_back({.name = "STRAGGLAR_METRICS_PORT",
                  .scope = SettingScope::kPerRank,
                  .accepted = "a port number; a rank's port is this plus its local rank",
                  .fallback = "no metrics",
                  .meaning = "serve Prometheus metrics (docs/monitoring.md)"});
  rows.push_back({.name = "STRAGGLAR_METRICS_ADDR",
                  .scope = SettingScope::kPerRank,
                  .accepted = "an IPv4 or IPv6 address (0.0.0.0 for every interface)",
                  .fallback = "127.0.0.1",
                  .meaning = "the address the metrics endpoint binds"});
  rows.push_back({
      .name = "STRAGGLAR_TRACE_FILE",
      .scope = SettingScope::kPerRank,
      .meaning = "rank 0 writes the calls' trace: the contract's CSV, or Perfetto JSON for a "
                 "name ending in .json",
      .verbatim = true,
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            config.trace_file = std::string(value);
            return true;
          },
      .write = +[](const PreloadConfig& config) { return config.trace_file; },
  });
  rows.push_back({
      .name = "STRAGGLAR_SUMMARY_FILE",
      .scope = SettingScope::kPerRank,
      .meaning = "rank 0 writes the end-of-run lag summary (JSON)",
      .verbatim = true,
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            config.summary_file = std::string(value);
            return true;
          },
      .write = +[](const PreloadConfig& config) { return config.summary_file; },
  });
  rows.push_back({
      .name = "STRAGGLAR_LINK_ADDR",
      .scope = SettingScope::kPerRank,
      .readers = SettingReaders::kNccl,
      .accepted = "an IPv4 address",
      .fallback = "the host name's address",
      .meaning = "the address rank 0 gives the other ranks for the link reports",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            in_addr parsed;
            const std::string host(value);
            if (inet_pton(AF_INET, host.c_str(), &parsed) != 1) return false;
            config.link_host = host;
            return true;
          },
      .write = +[](const PreloadConfig& config) { return config.link_host; },
  });
  rows.push_back({
      .name = "STRAGGLAR_PIPELINE_ADVICE_FILE",
      .scope = SettingScope::kPerRank,
      .readers = SettingReaders::kNccl,
      .meaning = "where the pipeline advisor writes its warm-up counts, rewritten atomically",
      .verbatim = true,
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            config.pipeline_advice_file = std::string(value);
            return true;
          },
      .write = +[](const PreloadConfig& config) { return config.pipeline_advice_file; },
  });
  rows.push_back({
      .name = "STRAGGLAR_DEVICE_STAMPS",
      .scope = SettingScope::kPerRank,
      .readers = SettingReaders::kNccl,
      .meaning = "a path prefix: the device executor's timeline of the last 1024 calls, "
                 "written to <prefix>-rank<R>.csv when the communicator is destroyed",
      .parse =
          +[](absl::string_view value, PreloadConfig& config) {
            config.device_stamps = std::string(value);
            return true;
          },
      .write = +[](const PreloadConfig& config) { return config.device_stamps; },
  });
}

std::vector<Setting> AllRows() {
  std::vector<Setting> rows;
  AddPolicyRows(rows);
  AddPlanShapeRows(rows);
  AddExecutorRows(rows);
  AddStateAndPipelineRows(rows);
  AddPerRankRows(rows);
  return rows;
}

absl::string_view ScopeName(SettingScope scope) {
  return scope == SettingScope::kAgreed ? "rank 0's" : "each rank's";
}

absl::string_view ReadersName(SettingReaders readers) {
  switch (readers) {
    case SettingReaders::kMpi:
      return "MPI";
    case SettingReaders::kNccl:
      return "NCCL";
    case SettingReaders::kBoth:
      break;
  }
  return "MPI, NCCL";
}

// A Markdown cell: a '|' would end it early.
std::string Cell(absl::string_view text) { return absl::StrReplaceAll(text, {{"|", "\\|"}}); }

}  // namespace

const std::vector<Setting>& Settings() {
  static const std::vector<Setting>* const rows = new std::vector<Setting>(AllRows());
  return *rows;
}

const Setting* FindSetting(absl::string_view name) {
  for (const Setting& setting : Settings()) {
    if (setting.name == name) return &setting;
  }
  return nullptr;
}

std::string SettingsMarkdownTable() {
  std::string table =
      "| variable | default | accepted | whose value | read by | what it does |\n"
      "|---|---|---|---|---|---|\n";
  for (const Setting& setting : Settings()) {
    const std::string fallback = setting.fallback.empty() ? "unset" : setting.fallback;
    const std::string accepted = setting.accepted.empty()
                                     ? (setting.verbatim ? "a path, as given" : "any text")
                                     : setting.accepted;
    absl::StrAppend(&table, "| `", setting.name, "` | ", Cell(fallback), " | ", Cell(accepted),
                    " | ", ScopeName(setting.scope), " | ", ReadersName(setting.readers), " | ",
                    Cell(setting.meaning), " |\n");
  }
  return table;
}

}  // namespace stragglar
