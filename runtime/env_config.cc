#include "runtime/env_config.h"

#include <arpa/inet.h>

#include <algorithm>
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
#include "runtime/settings.h"

namespace stragglar {
namespace {

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
  static const std::vector<absl::string_view>* const names = [] {
    auto* names = new std::vector<absl::string_view>();
    for (const Setting& setting : Settings()) names->push_back(setting.name);
    return names;
  }();
  return *names;
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

// Every setting through `env` (PreloadConfigFromEnv, PreloadConfigFromValues), row by row.
PreloadConfig ReadConfig(const EnvReader& env) {
  PreloadConfig config;
  for (const Setting& setting : Settings()) {
    if (setting.parse == nullptr) continue;
    const char* name = setting.name.c_str();
    const std::optional<std::string> value = setting.verbatim ? env.Raw(name) : env.Stripped(name);
    if (value.has_value() && !setting.parse(*value, config)) {
      env.Invalid(name, *value, setting.accepted, setting.fallback);
    }
  }
  return config;
}

}  // namespace

absl::string_view RuntimeModeName(RuntimeMode mode) {
  switch (mode) {
    case RuntimeMode::kAdapt:
      return "adapt";
    case RuntimeMode::kObserve:
      return "observe";
    case RuntimeMode::kOff:
      return "off";
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
