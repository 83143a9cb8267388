#include "runtime/env_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <map>
#include <ostream>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/units.h"
#include "kernels/plan/plan.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

constexpr int64_t kMaxEpochCalls = 1000000;
constexpr int kMaxForcedPieces = 16;  // the largest depth the model itself considers
constexpr int64_t kMaxMpiSegmentBytes = int64_t{1} << 30;
constexpr int64_t kMinIpcBytes = int64_t{1} << 20;
constexpr int64_t kMaxIpcBytes = int64_t{4} << 30;
// The longest wait a setting may ask for: STRAGGLAR_IPC_TIMEOUT, _WARN_AFTER and _TIMEOUT.
constexpr double kMaxWaitS = 86400;
constexpr int kMaxIpcCtas = 64;

constexpr std::array<std::pair<absl::string_view, RuntimeMode>, 3> kModes = {{
    {"adapt", RuntimeMode::kAdapt},
    {"observe", RuntimeMode::kObserve},
    {"off", RuntimeMode::kOff},
}};

constexpr std::array<PreloadConfig::Forced, 7> kForcedAlgorithms = {
    PreloadConfig::Forced::kAuto,
    PreloadConfig::Forced::kNative,
    PreloadConfig::Forced::kRing,
    PreloadConfig::Forced::kHalvingDoubling,
    PreloadConfig::Forced::kStragglar,
    PreloadConfig::Forced::kStragglarLogDepth,
    PreloadConfig::Forced::kStragglarHierarchical};

constexpr std::array<LogLevel, 4> kLogLevels = {LogLevel::kNone, LogLevel::kWarn, LogLevel::kInfo,
                                                LogLevel::kTrace};

const char* StdGetenv(const char* name) { return std::getenv(name); }

// Reads variables and reports invalid ones.
class EnvReader {
 public:
  EnvReader(std::function<const char*(const char*)> getenv, std::ostream* log)
      : getenv_(std::move(getenv)), log_(log) {}

  // The raw value; nullopt when unset or empty (both keep the default).
  std::optional<std::string> Raw(const char* name) const {
    const char* value = getenv_(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  }

  // The value without surrounding whitespace (a stray space in a job script is no error);
  // nullopt when that leaves nothing.
  std::optional<std::string> Stripped(const char* name) const {
    std::optional<std::string> value = Raw(name);
    if (!value.has_value()) return std::nullopt;
    absl::StripAsciiWhitespace(&*value);
    if (value->empty()) return std::nullopt;
    return value;
  }

  // A variable with two values, e.g. STRAGGLAR_PROFILER=cupti|events (case-insensitive): true
  // for `first`, false for `second`, nullopt when unset or invalid (after the invalid line,
  // which names the default).
  std::optional<bool> IsFirstOfTwo(const char* name, absl::string_view first,
                                   absl::string_view second, bool default_is_first) const {
    std::optional<std::string> value = Stripped(name);
    if (!value.has_value()) return std::nullopt;
    if (absl::EqualsIgnoreCase(*value, first)) return true;
    if (absl::EqualsIgnoreCase(*value, second)) return false;
    Invalid(name, *value, absl::StrCat(first, ", ", second), default_is_first ? first : second);
    return std::nullopt;
  }

  void Invalid(const char* name, absl::string_view value, absl::string_view accepted,
               absl::string_view fallback) const {
    const std::string line =
        absl::StrCat(name, "=\"", absl::CEscape(value), "\" is invalid (accepted: ", accepted,
                     "); using ", fallback);
    if (log_ != nullptr) {
      *log_ << line << '\n';
    } else {
      LogAlways(LogLevel::kWarn, line);
    }
  }

 private:
  std::function<const char*(const char*)> getenv_;
  std::ostream* log_;
};

// STRAGGLAR_LINK_PROFILING and the pipeline's stage times.
void ReadLinkProfiling(const EnvReader& env, PreloadConfig& config) {
  if (std::optional<bool> on = env.IsFirstOfTwo("STRAGGLAR_LINK_PROFILING", "on", "off",
                                                PreloadConfig().link_profiling)) {
    config.link_profiling = *on;
  }
  if (std::optional<std::string> host = env.Stripped("STRAGGLAR_LINK_ADDR")) {
    in_addr parsed;
    if (inet_pton(AF_INET, host->c_str(), &parsed) == 1) {
      config.link_host = *host;
    } else {
      env.Invalid("STRAGGLAR_LINK_ADDR", *host, "an IPv4 address", "the host name's address");
    }
  }
  const auto count = [&env](const char* name, int minimum, int& out) {
    std::optional<std::string> value = env.Stripped(name);
    if (!value.has_value()) return;
    int number = 0;
    if (absl::SimpleAtoi(*value, &number) && number >= minimum && number <= 1000000) {
      out = number;
    } else {
      env.Invalid(name, *value, absl::StrCat("an integer from ", minimum, " to 1000000"), "unset");
    }
  };
  count("STRAGGLAR_PIPELINE_MICROBATCHES", 1, config.pipeline.microbatches);
  count("STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", 0, config.pipeline.memory_microbatches);
  for (auto [name, times] :
       {std::pair{"STRAGGLAR_PIPELINE_FORWARD", &config.pipeline.forward_s},
        std::pair{"STRAGGLAR_PIPELINE_BACKWARD", &config.pipeline.backward_s}}) {
    std::optional<std::string> value = env.Stripped(name);
    if (!value.has_value()) continue;
    if (absl::StatusOr<std::vector<double>> parsed = ParseDurationList(*value); parsed.ok()) {
      *times = *std::move(parsed);
    } else {
      env.Invalid(name, *value,
                  "a positive duration, or one per stage separated by commas, e.g. 10ms or "
                  "10ms,12ms,12ms,9ms",
                  "unset");
    }
  }
}

// STRAGGLAR_EXECUTOR and the device executor's STRAGGLAR_IPC_* settings.
void ReadDeviceExecutor(const EnvReader& env, PreloadConfig& config) {
  const PreloadConfig defaults;
  config.device_stamps = env.Stripped("STRAGGLAR_DEVICE_STAMPS").value_or("");
  if (std::optional<bool> nccl =
          env.IsFirstOfTwo("STRAGGLAR_EXECUTOR", "nccl", "device", !defaults.device_executor)) {
    config.device_executor = !*nccl;
  }
  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_IPC_BYTES")) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(*value);
    if (bytes.ok() && *bytes >= kMinIpcBytes && *bytes <= kMaxIpcBytes) {
      config.ipc_bytes = *bytes;
    } else {
      env.Invalid("STRAGGLAR_IPC_BYTES", *value, "a size from 1MiB to 4GiB, e.g. 64MiB",
                  FormatBytes(static_cast<double>(defaults.ipc_bytes)));
    }
  }
  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_IPC_TIMEOUT")) {
    absl::StatusOr<double> seconds = ParseSeconds(*value);
    if (seconds.ok() && *seconds >= 0 && *seconds <= kMaxWaitS) {
      config.ipc_timeout_s = *seconds;
    } else {
      env.Invalid("STRAGGLAR_IPC_TIMEOUT", *value,
                  "a duration up to a day, e.g. 300s or 10m, or 0 to wait until aborted",
                  FormatSeconds(defaults.ipc_timeout_s));
    }
  }
  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_IPC_BLOCKS")) {
    int ctas = 0;
    if (absl::SimpleAtoi(*value, &ctas) && ctas >= 1 && ctas <= kMaxIpcCtas) {
      config.ipc_ctas = ctas;
    } else {
      env.Invalid("STRAGGLAR_IPC_BLOCKS", *value,
                  absl::StrCat("an integer from 1 to ", kMaxIpcCtas),
                  absl::StrCat(defaults.ipc_ctas));
    }
  }
  if (std::optional<bool> automatic = env.IsFirstOfTwo("STRAGGLAR_DEVICE_SCOPE", "auto", "system",
                                                       !defaults.device_system_scope)) {
    config.device_system_scope = !*automatic;
  }
}

// STRAGGLAR_PIECES, STRAGGLAR_TOPOLOGY, STRAGGLAR_MPI_SEGMENT and STRAGGLAR_MPI_NETWORK_MESSAGE:
// how plans are shaped and cut.
void ReadPlanKnobs(const EnvReader& env, PreloadConfig& config) {
  const PreloadConfig defaults;
  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_PIECES")) {
    int pieces = 0;
    if (absl::EqualsIgnoreCase(*value, "auto")) {
      config.pieces = 0;
    } else if (absl::SimpleAtoi(*value, &pieces) && pieces >= 1 && pieces <= kMaxForcedPieces) {
      config.pieces = pieces;
    } else {
      env.Invalid("STRAGGLAR_PIECES", *value,
                  absl::StrCat("auto or an integer from 1 to ", kMaxForcedPieces), "auto");
    }
  }

  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_TOPOLOGY")) {
    if (absl::StatusOr<Topology> topology = ParseTopology(*value); topology.ok()) {
      config.topology = *topology;
    } else {
      env.Invalid("STRAGGLAR_TOPOLOGY", *value, "NxG, N nodes of G ranks, e.g. 4x8",
                  "what the library learns");
    }
  }

  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_MPI_SEGMENT")) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(*value);
    if (bytes.ok() && *bytes % 16 == 0 && *bytes <= kMaxMpiSegmentBytes) {
      config.mpi_segment_bytes = *bytes;
    } else {
      env.Invalid("STRAGGLAR_MPI_SEGMENT", *value,
                  "0 or a multiple of 16 bytes up to 1GiB, e.g. 256KiB",
                  FormatBytes(static_cast<double>(defaults.mpi_segment_bytes)));
    }
  }

  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_MPI_NETWORK_MESSAGE")) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(*value);
    if (absl::EqualsIgnoreCase(*value, "auto")) {
      config.mpi_network_message_bytes.reset();
    } else if (bytes.ok() && *bytes % 16 == 0 && *bytes <= kMaxMpiSegmentBytes) {
      config.mpi_network_message_bytes = *bytes;
    } else {
      env.Invalid("STRAGGLAR_MPI_NETWORK_MESSAGE", *value,
                  "auto, 0 or a multiple of 16 bytes up to 1GiB, e.g. 64000", "auto");
    }
  }
}

}  // namespace

absl::StatusOr<PipelineSpec> PipelineSpecFor(const PipelineStageTimes& times, int stages) {
  if (!times.complete()) {
    return absl::InvalidArgumentError(
        "STRAGGLAR_PIPELINE_MICROBATCHES, STRAGGLAR_PIPELINE_FORWARD and "
        "STRAGGLAR_PIPELINE_BACKWARD are all needed");
  }
  PipelineSpec spec{.microbatches = times.microbatches};
  for (auto [name, given, out] :
       {std::tuple{"STRAGGLAR_PIPELINE_FORWARD", &times.forward_s, &spec.forward_s},
        std::tuple{"STRAGGLAR_PIPELINE_BACKWARD", &times.backward_s, &spec.backward_s}}) {
    if (given->size() == 1) {
      out->assign(stages, given->front());
    } else if (static_cast<int>(given->size()) == stages) {
      *out = *given;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(name, " has ", given->size(),
                                                     " times for a pipeline of ", stages,
                                                     " stages (give one, or one per stage)"));
    }
  }
  spec.link_delay_s.assign(std::max(stages - 1, 0), 0.0);
  return spec;
}

absl::Span<const absl::string_view> PreloadVariableNames() {
  static constexpr absl::string_view kNames[] = {"STRAGGLAR_ALGORITHM",
                                                 "STRAGGLAR_DEBUG",
                                                 "STRAGGLAR_EPOCH_CALLS",
                                                 "STRAGGLAR_METRICS_ADDR",
                                                 "STRAGGLAR_METRICS_PORT",
                                                 "STRAGGLAR_MIN_BYTES",
                                                 "STRAGGLAR_MODE",
                                                 "STRAGGLAR_MPI_SEGMENT",
                                                 "STRAGGLAR_MPI_NETWORK_MESSAGE",
                                                 "STRAGGLAR_PIECES",
                                                 "STRAGGLAR_TOPOLOGY",
                                                 "STRAGGLAR_PRE_ARRIVAL",
                                                 "STRAGGLAR_QUEUES",
                                                 "STRAGGLAR_PROFILER",
                                                 "STRAGGLAR_STATE_FILE",
                                                 "STRAGGLAR_STRAGGLER",
                                                 "STRAGGLAR_SUMMARY_FILE",
                                                 "STRAGGLAR_TRACE_FILE",
                                                 "STRAGGLAR_PIPELINE_ADVICE_FILE",
                                                 "STRAGGLAR_LINK_PROFILING",
                                                 "STRAGGLAR_LINK_ADDR",
                                                 "STRAGGLAR_PIPELINE_MICROBATCHES",
                                                 "STRAGGLAR_PIPELINE_FORWARD",
                                                 "STRAGGLAR_PIPELINE_BACKWARD",
                                                 "STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES",
                                                 "STRAGGLAR_EXECUTOR",
                                                 "STRAGGLAR_IPC_BYTES",
                                                 "STRAGGLAR_IPC_TIMEOUT",
                                                 "STRAGGLAR_IPC_BLOCKS",
                                                 "STRAGGLAR_DEVICE_SCOPE",
                                                 "STRAGGLAR_DEVICE_STAMPS",
                                                 "STRAGGLAR_WARN_AFTER",
                                                 "STRAGGLAR_TIMEOUT"};
  return kNames;
}

std::optional<PlanFamily> ForcedPlanFamily(PreloadConfig::Forced algorithm) {
  switch (algorithm) {
    case PreloadConfig::Forced::kRing:
      return PlanFamily{Algorithm::kRing};
    case PreloadConfig::Forced::kHalvingDoubling:
      return PlanFamily{Algorithm::kHalvingDoubling};
    case PreloadConfig::Forced::kStragglar:
      return PlanFamily{Algorithm::kStragglar};
    case PreloadConfig::Forced::kStragglarLogDepth:
      return kStragglarLogDepthFamily;
    case PreloadConfig::Forced::kStragglarHierarchical:
      return kStragglarHierarchicalFamily;
    case PreloadConfig::Forced::kAuto:
    case PreloadConfig::Forced::kNative:
      break;
  }
  return std::nullopt;
}

absl::string_view ForcedAlgorithmName(PreloadConfig::Forced algorithm) {
  if (algorithm == PreloadConfig::Forced::kAuto) return "auto";
  if (algorithm == PreloadConfig::Forced::kNative) return AlgorithmName(Algorithm::kNative);
  return PlanFamilyName(*ForcedPlanFamily(algorithm));
}

std::optional<PlanVariant> ForcedPlanVariant(PreloadConfig::Forced algorithm) {
  const std::optional<PlanFamily> family = ForcedPlanFamily(algorithm);
  if (!family.has_value() || family->algorithm != Algorithm::kStragglar) return std::nullopt;
  return family->variant;
}

namespace {

// Every variable through `env` (PreloadConfigFromEnv, PreloadConfigFromValues).
PreloadConfig ReadConfig(const EnvReader& env) {
  const PreloadConfig defaults;
  PreloadConfig config;

  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_MODE")) {
    bool found = false;
    for (const auto& [name, mode] : kModes) {
      if (absl::EqualsIgnoreCase(*value, name)) {
        config.mode = mode;
        found = true;
      }
    }
    if (!found) {
      env.Invalid("STRAGGLAR_MODE", *value, "adapt, observe, off", RuntimeModeName(defaults.mode));
    }
  }

  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_DEBUG")) {
    if (std::optional<LogLevel> level = ParseLogLevel(*value)) {
      config.debug = *level;
    } else {
      std::vector<absl::string_view> names;
      for (LogLevel level : kLogLevels) names.push_back(LogLevelName(level));
      env.Invalid("STRAGGLAR_DEBUG", *value, absl::StrJoin(names, ", "),
                  LogLevelName(defaults.debug));
    }
  }

  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_EPOCH_CALLS")) {
    int64_t calls = 0;  // 64 bits, so a huge value is out of range rather than malformed
    if (absl::SimpleAtoi(*value, &calls) && calls >= 1 && calls <= kMaxEpochCalls) {
      config.epoch_calls = static_cast<int>(calls);
    } else {
      env.Invalid("STRAGGLAR_EPOCH_CALLS", *value,
                  absl::StrCat("an integer from 1 to ", kMaxEpochCalls),
                  absl::StrCat(defaults.epoch_calls));
    }
  }

  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_MIN_BYTES")) {
    if (absl::StatusOr<int64_t> bytes = ParseByteSize(*value); bytes.ok()) {
      config.min_bytes = *bytes;
    } else {
      env.Invalid("STRAGGLAR_MIN_BYTES", *value,
                  "a size with an optional unit B, KiB, MiB, GiB, TiB, KB, MB, GB, TB, e.g. "
                  "256KiB, 1MB or 0",
                  FormatBytes(static_cast<double>(defaults.min_bytes)));
    }
  }

  // Paths are taken verbatim: whitespace may be part of a file name.
  config.state_file = env.Raw("STRAGGLAR_STATE_FILE").value_or("");
  config.trace_file = env.Raw("STRAGGLAR_TRACE_FILE").value_or("");
  config.summary_file = env.Raw("STRAGGLAR_SUMMARY_FILE").value_or("");
  config.pipeline_advice_file = env.Raw("STRAGGLAR_PIPELINE_ADVICE_FILE").value_or("");

  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_ALGORITHM")) {
    bool found = false;
    std::vector<absl::string_view> names;
    for (PreloadConfig::Forced algorithm : kForcedAlgorithms) {
      names.push_back(ForcedAlgorithmName(algorithm));
      if (absl::EqualsIgnoreCase(*value, ForcedAlgorithmName(algorithm))) {
        config.algorithm = algorithm;
        found = true;
      }
    }
    if (!found) {
      env.Invalid("STRAGGLAR_ALGORITHM", *value, absl::StrJoin(names, ", "),
                  ForcedAlgorithmName(defaults.algorithm));
    }
  }

  if (std::optional<bool> cupti =
          env.IsFirstOfTwo("STRAGGLAR_PROFILER", "cupti", "events", defaults.prefer_cupti)) {
    config.prefer_cupti = *cupti;
  }
  if (std::optional<bool> rounds = env.IsFirstOfTwo("STRAGGLAR_PRE_ARRIVAL", "rounds", "nccl",
                                                    !defaults.native_pre_arrival)) {
    config.native_pre_arrival = !*rounds;
  }
  if (std::optional<bool> rounds =
          env.IsFirstOfTwo("STRAGGLAR_QUEUES", "rounds", "per-class", !defaults.per_class_queues)) {
    config.per_class_queues = !*rounds;
  }

  ReadPlanKnobs(env, config);

  if (std::optional<std::string> value = env.Stripped("STRAGGLAR_STRAGGLER")) {
    int rank = 0;
    if (absl::SimpleAtoi(*value, &rank) && rank >= 0) {
      config.straggler = rank;
    } else {
      env.Invalid("STRAGGLAR_STRAGGLER", *value, "a rank >= 0", "the last rank");
    }
  }

  for (auto [name, seconds] : {std::pair{"STRAGGLAR_WARN_AFTER", &config.warn_after_s},
                               std::pair{"STRAGGLAR_TIMEOUT", &config.timeout_s}}) {
    std::optional<std::string> value = env.Stripped(name);
    if (!value.has_value()) continue;
    absl::StatusOr<double> parsed = ParseSeconds(*value);
    if (parsed.ok() && *parsed >= 0 && *parsed <= kMaxWaitS) {
      *seconds = *parsed;
    } else {
      env.Invalid(name, *value, "a duration up to a day, e.g. 30s or 5m, or 0 for never",
                  *seconds > 0 ? FormatSeconds(*seconds) : "never");
    }
  }
  ReadLinkProfiling(env, config);
  ReadDeviceExecutor(env, config);
  return config;
}

}  // namespace

absl::string_view RuntimeModeName(RuntimeMode mode) {
  for (const auto& [name, value] : kModes) {
    if (value == mode) return name;
  }
  return "unknown";
}

PreloadConfig PreloadConfigFromEnv(const char* (*getenv)(const char*), std::ostream* log) {
  return ReadConfig(EnvReader(getenv != nullptr ? getenv : &StdGetenv, log));
}

PreloadConfig PreloadConfigFromValues(const std::map<std::string, std::string>& values,
                                      std::ostream* log) {
  return ReadConfig(EnvReader(
      [&values](const char* name) -> const char* {
        auto it = values.find(name);
        return it == values.end() ? nullptr : it->second.c_str();
      },
      log));
}

std::string StateFileFromEnv(const char* (*getenv)(const char*)) {
  return EnvReader(getenv != nullptr ? getenv : &StdGetenv, nullptr)
      .Raw("STRAGGLAR_STATE_FILE")
      .value_or("");
}

RuntimeConfig ToRuntimeConfig(const PreloadConfig& config) {
  RuntimeConfig runtime;
  runtime.mode = config.mode;
  runtime.epoch_calls = config.epoch_calls;
  runtime.min_bytes = config.min_bytes;
  runtime.state_file = config.state_file;
  runtime.stragglar_pieces = config.pieces;
  return runtime;
}

bool ApplyForcedAlgorithm(const PreloadConfig& config, int num_ranks, CallDecision& decision) {
  return ApplyForcedAlgorithm(config.algorithm, config.straggler, num_ranks, decision);
}

bool ApplyForcedAlgorithm(PreloadConfig::Forced forced, std::optional<int> straggler, int num_ranks,
                          CallDecision& decision) {
  if (forced == PreloadConfig::Forced::kNative) {
    decision.algorithm = Algorithm::kNative;
  } else if (const std::optional<PlanFamily> family = ForcedPlanFamily(forced)) {
    decision.algorithm = family->algorithm;
    if (family->algorithm == Algorithm::kStragglar) {
      if (straggler.has_value() && *straggler >= num_ranks) {
        // Once per process: this runs on every call.
        LogOnce(LogLevel::kWarn, "forced-straggler-outside",
                absl::StrCat("STRAGGLAR_STRAGGLER=", *straggler, " is outside [0, ", num_ranks - 1,
                             "] for ", num_ranks, " ranks: StragglAR runs around the last rank, ",
                             num_ranks - 1));
      }
      decision.straggler = std::min(straggler.value_or(num_ranks - 1), num_ranks - 1);
      decision.shape.reset();
    }
  }
  if (decision.algorithm != Algorithm::kStragglar) decision.straggler.reset();
  return decision.algorithm == Algorithm::kNative;
}

bool TraceFileIsJson(absl::string_view path) { return absl::EndsWithIgnoreCase(path, ".json"); }

std::string DescribeConfig(const PreloadConfig& config) {
  const PreloadConfig defaults;
  std::string text = absl::StrCat(
      "mode ", RuntimeModeName(config.mode), ", epoch ", config.epoch_calls, " calls, min ",
      FormatBytes(static_cast<double>(config.min_bytes)), ", debug ", LogLevelName(config.debug),
      ", algorithm ", ForcedAlgorithmName(config.algorithm));
  if (ForcedPlanVariant(config.algorithm).has_value()) {
    absl::StrAppend(&text, " (straggler ",
                    config.straggler.has_value() ? absl::StrCat(*config.straggler) : "last rank",
                    ")");
  } else if (config.straggler.has_value()) {
    // Say so rather than let the user believe the setting did something.
    absl::StrAppend(&text, ", straggler ", *config.straggler,
                    " ignored (algorithm is not stragglar)");
  }
  if (config.pieces > 0) absl::StrAppend(&text, ", stragglar pieces ", config.pieces);
  if (!config.prefer_cupti) absl::StrAppend(&text, ", profiler events");
  if (config.native_pre_arrival != defaults.native_pre_arrival) {
    absl::StrAppend(&text, ", pre-arrival ", config.native_pre_arrival ? "nccl" : "rounds");
  }
  if (config.device_executor) {
    absl::StrAppend(&text, ", executor device (window ",
                    FormatBytes(static_cast<double>(config.ipc_bytes)), ", ", config.ipc_ctas,
                    " CTAs, timeout ",
                    config.ipc_timeout_s > 0 ? FormatSeconds(config.ipc_timeout_s) : "none",
                    config.device_system_scope ? ", system scope" : "", ")");
  }
  if (config.per_class_queues) absl::StrAppend(&text, ", queues per-class");
  if (config.mpi_segment_bytes != defaults.mpi_segment_bytes) {
    absl::StrAppend(&text, ", mpi segment ",
                    config.mpi_segment_bytes == 0
                        ? std::string("off")
                        : FormatBytes(static_cast<double>(config.mpi_segment_bytes)));
  }
  if (config.mpi_network_message_bytes.has_value()) {
    absl::StrAppend(&text, ", mpi network messages ",
                    *config.mpi_network_message_bytes == 0
                        ? std::string("whole")
                        : FormatBytes(static_cast<double>(*config.mpi_network_message_bytes)));
  }
  if (!config.state_file.empty()) absl::StrAppend(&text, ", state ", config.state_file);
  if (!config.trace_file.empty()) {
    absl::StrAppend(&text, ", trace ", config.trace_file,
                    TraceFileIsJson(config.trace_file) ? " (Perfetto JSON)" : " (CSV)");
  }
  if (!config.summary_file.empty()) absl::StrAppend(&text, ", summary ", config.summary_file);
  if (config.link_profiling) absl::StrAppend(&text, ", link profiling on");
  if (!config.pipeline_advice_file.empty()) {
    absl::StrAppend(&text, ", pipeline advice ", config.pipeline_advice_file);
  }
  return text;
}

std::optional<MetricsEndpoint> MetricsEndpointFromEnv(int local_rank, std::ostream& log,
                                                      const char* (*getenv)(const char*)) {
  if (getenv == nullptr) getenv = [](const char* name) -> const char* { return std::getenv(name); };
  const char* port_text = getenv("STRAGGLAR_METRICS_PORT");
  if (port_text == nullptr || *port_text == '\0') return std::nullopt;
  MetricsEndpoint endpoint;
  int base = 0;
  if (!absl::SimpleAtoi(port_text, &base) || base < 1 || base + local_rank > 65535) {
    log << "stragglar: STRAGGLAR_METRICS_PORT=\"" << port_text
        << "\" is invalid: it accepts a port number in [1, " << 65535 - local_rank
        << "] (rank's port = base + local rank); serving no metrics" << std::endl;
    return std::nullopt;
  }
  endpoint.port = base + local_rank;
  if (const char* address = getenv("STRAGGLAR_METRICS_ADDR"); address != nullptr && *address) {
    in6_addr parsed;
    if (inet_pton(AF_INET, address, &parsed) == 1 || inet_pton(AF_INET6, address, &parsed) == 1) {
      endpoint.address = address;
    } else {
      log << "stragglar: STRAGGLAR_METRICS_ADDR=\"" << address
          << "\" is invalid: it accepts an IPv4 or IPv6 address (0.0.0.0 for every interface); "
             "using 127.0.0.1"
          << std::endl;
    }
  }
  return endpoint;
}

}  // namespace stragglar
