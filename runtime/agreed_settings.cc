#include "runtime/agreed_settings.h"

#include <map>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/log.h"

namespace stragglar {
namespace {

std::string Durations(const std::vector<double>& seconds) {
  return absl::StrJoin(seconds, ",", [](std::string* out, double value) {
    absl::StrAppend(out, absl::FormatDuration(absl::Seconds(value)));
  });
}

// "" (unset) for 0: PreloadConfig's default where the variable has no "auto".
std::string PositiveOrUnset(int64_t value) { return value == 0 ? "" : absl::StrCat(value); }

}  // namespace

std::vector<std::pair<absl::string_view, std::string>> AgreedValues(const PreloadConfig& config) {
  const PipelineStageTimes& pipeline = config.pipeline;
  return {
      {"STRAGGLAR_MODE", std::string(RuntimeModeName(config.mode))},
      {"STRAGGLAR_ALGORITHM", std::string(ForcedAlgorithmName(config.algorithm))},
      {"STRAGGLAR_STRAGGLER", config.straggler ? absl::StrCat(*config.straggler) : ""},
      {"STRAGGLAR_EPOCH_CALLS", absl::StrCat(config.epoch_calls)},
      {"STRAGGLAR_MIN_BYTES", absl::StrCat(config.min_bytes)},
      {"STRAGGLAR_PIECES", config.pieces == 0 ? "auto" : absl::StrCat(config.pieces)},
      {"STRAGGLAR_TOPOLOGY", config.topology ? TopologyName(*config.topology) : ""},
      {"STRAGGLAR_MPI_SEGMENT", absl::StrCat(config.mpi_segment_bytes)},
      {"STRAGGLAR_MPI_NETWORK_MESSAGE",
       config.mpi_network_message_bytes ? absl::StrCat(*config.mpi_network_message_bytes) : "auto"},
      {"STRAGGLAR_QUEUES", config.per_class_queues ? "per-class" : "rounds"},
      {"STRAGGLAR_PRE_ARRIVAL", config.native_pre_arrival ? "nccl" : "rounds"},
      {"STRAGGLAR_EXECUTOR", config.device_executor ? "device" : "nccl"},
      {"STRAGGLAR_IPC_BYTES", absl::StrCat(config.ipc_bytes)},
      {"STRAGGLAR_IPC_TIMEOUT", absl::FormatDuration(absl::Seconds(config.ipc_timeout_s))},
      {"STRAGGLAR_IPC_BLOCKS", absl::StrCat(config.ipc_ctas)},
      {"STRAGGLAR_DEVICE_SCOPE", config.device_system_scope ? "system" : "auto"},
      // Each rank's own would do for the warning; alike, every stuck rank says the same.
      {"STRAGGLAR_WARN_AFTER", absl::FormatDuration(absl::Seconds(config.warn_after_s))},
      {"STRAGGLAR_TIMEOUT", absl::FormatDuration(absl::Seconds(config.timeout_s))},
      // Only rank 0 reads and writes the file, but every rank joins the broadcast of what it
      // read when a path is set.
      {"STRAGGLAR_STATE_FILE", config.state_file},
      // Every rank of a profiled communicator joins its link report exchange.
      {"STRAGGLAR_LINK_PROFILING", config.link_profiling ? "on" : "off"},
      {"STRAGGLAR_PIPELINE_MICROBATCHES", PositiveOrUnset(pipeline.microbatches)},
      {"STRAGGLAR_PIPELINE_FORWARD", Durations(pipeline.forward_s)},
      {"STRAGGLAR_PIPELINE_BACKWARD", Durations(pipeline.backward_s)},
      {"STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", absl::StrCat(pipeline.memory_microbatches)},
  };
}

std::vector<absl::string_view> AgreedVariableNames() {
  std::vector<absl::string_view> names;
  for (const auto& [name, value] : AgreedValues(PreloadConfig())) names.push_back(name);
  return names;
}

absl::Span<const absl::string_view> PerRankVariableNames() {
  static constexpr absl::string_view kNames[] = {
      "STRAGGLAR_DEBUG",        "STRAGGLAR_PROFILER",
      "STRAGGLAR_METRICS_PORT", "STRAGGLAR_METRICS_ADDR",
      "STRAGGLAR_TRACE_FILE",   "STRAGGLAR_SUMMARY_FILE",
      "STRAGGLAR_LINK_ADDR",    "STRAGGLAR_PIPELINE_ADVICE_FILE",
      "STRAGGLAR_DEVICE_STAMPS"};
  return kNames;
}

std::string AgreedSettingsText(const PreloadConfig& config) {
  std::string text;
  for (const auto& [name, value] : AgreedValues(config)) {
    absl::StrAppend(&text, name, "=", absl::CEscape(value), "\n");
  }
  return text;
}

std::string AgreedSettingsFingerprint(const PreloadConfig& config) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits: the same everywhere
  for (unsigned char byte : AgreedSettingsText(config)) {
    hash = (hash ^ byte) * 0x100000001b3ULL;
  }
  return absl::StrFormat("%016x", hash);
}

absl::StatusOr<PreloadConfig> AgreeWithRankZero(
    const PreloadConfig& mine, int rank, absl::FunctionRef<absl::Status(std::string&)> broadcast) {
  const std::vector<std::pair<absl::string_view, std::string>> my_values = AgreedValues(mine);
  std::string text = AgreedSettingsText(mine);
  if (absl::Status status = broadcast(text); !status.ok()) return status;

  std::map<std::string, std::string> rank_zero;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(line, '=');
    std::string value;
    if (!absl::CUnescape(parts.second, &value)) {
      return absl::InternalError(absl::StrCat("rank 0's settings are unreadable: ", line));
    }
    rank_zero[std::string(parts.first)] = std::move(value);
  }
  for (const auto& [name, value] : my_values) {
    auto theirs = rank_zero.find(std::string(name));
    if (theirs == rank_zero.end()) {
      return absl::InternalError(absl::StrCat("rank 0 sent no ", name, " (another version?)"));
    }
    if (theirs->second == value) continue;
    // Escaped, so that a path with a line break keeps the warning on one line.
    const auto shown = [](const std::string& text) {
      return text.empty() ? std::string("unset") : absl::CEscape(text);
    };
    LogOnce(LogLevel::kWarn, absl::StrCat("differs-", name),
            absl::StrCat(name, " differs across ranks: rank ", rank, " has ", shown(value),
                         ", rank 0 ", shown(theirs->second), "; every rank uses rank 0's"));
  }
  // Rank 0 wrote each value as the variable reads; one that fails here is a bug, said as one.
  std::ostringstream invalid;
  PreloadConfig agreed = PreloadConfigFromValues(rank_zero, &invalid);
  if (!invalid.str().empty()) {
    return absl::InternalError(absl::StrCat("rank 0's settings do not parse: ", invalid.str()));
  }
  agreed.debug = mine.debug;
  agreed.prefer_cupti = mine.prefer_cupti;
  agreed.trace_file = mine.trace_file;
  agreed.summary_file = mine.summary_file;
  agreed.link_host = mine.link_host;
  agreed.pipeline_advice_file = mine.pipeline_advice_file;
  agreed.device_stamps = mine.device_stamps;
  return agreed;
}

}  // namespace stragglar
