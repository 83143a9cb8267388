#include "runtime/preload_common.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "exporters/run_summary.h"
#include "runtime/log.h"
#include "runtime/state_file.h"
#include "runtime/units.h"

namespace stragglar {

MetricsSetup StartMetricsFromEnv(int local_rank) {
  MetricsSetup setup;
  std::ostringstream config_log;
  if (std::optional<MetricsEndpoint> endpoint = MetricsEndpointFromEnv(local_rank, config_log)) {
    auto registry = std::make_shared<prometheus::Registry>();
    absl::StatusOr<std::unique_ptr<MetricsServer>> server =
        MetricsServer::Start(endpoint->address, endpoint->port, registry);
    if (server.ok()) {
      setup.registry = std::move(registry);
      setup.server = *std::move(server);
      Log(LogLevel::kInfo,
          absl::StrCat("metrics on http://", setup.server->endpoint(), "/metrics"));
    } else {
      Log(LogLevel::kWarn, absl::StrCat(server.status().message(), "; running without metrics"));
    }
  }
  // A bad STRAGGLAR_METRICS_* value is printed whatever the log level, like every setting.
  if (std::string line = config_log.str(); !line.empty()) {
    if (line.back() == '\n') line.pop_back();
    LogAlways(LogLevel::kWarn, line);
  }
  return setup;
}

std::string DescribePlan(const Plan& plan, int64_t bytes) {
  std::string text = absl::StrCat(AlgorithmName(plan.algorithm));
  if (plan.straggler.has_value()) absl::StrAppend(&text, " around rank ", *plan.straggler);
  absl::StrAppend(&text, " for ", FormatBytes(static_cast<double>(bytes)), ": ", plan.num_chunks,
                  " chunks");
  if (plan.straggler.has_value() && plan.num_ranks > 1 && plan.num_chunks > plan.num_ranks - 1) {
    absl::StrAppend(&text, " (", plan.num_chunks / (plan.num_ranks - 1), " pieces per rank)");
  }
  if (plan.straggler.has_value()) {
    absl::StrAppend(&text, ", ", plan.pre_arrival_rounds,
                    " rounds before the straggler arrives and ", plan.post_arrival_rounds(),
                    " after");
  } else {
    absl::StrAppend(&text, ", ", plan.num_rounds(), " rounds");
  }
  return text;
}

std::string DescribeLink(const LinkModel& link) {
  return absl::StrCat("link: ", FormatSeconds(link.alpha_s), " + ",
                      absl::StrFormat("%.3g", link.bandwidth_bytes_per_s / 1e9),
                      " GB/s per message");
}

CallStart StartCall(RuntimeCore& core, const PreloadConfig& config, int64_t bytes,
                    const CommObservers& observers, absl::string_view library) {
  absl::StatusOr<CallDecision> decided = core.Decide(bytes);
  CallStart start;
  if (decided.ok()) {
    start.decision = *decided;
  } else {
    LogOnce(LogLevel::kWarn, "decide",
            absl::StrCat("policy failed: ", decided.status().message(), "; using ", library));
    start.decision = CallDecision{.algorithm = Algorithm::kRing};
  }
  start.native = ApplyForcedAlgorithm(config, core.num_ranks(), start.decision);
  for (const auto& observer : observers.all())
    observer->OnStart(core.rank(), start.decision, bytes);
  return start;
}

void SaveLearnedState(const RuntimeCore& core, absl::string_view backend) {
  const std::string& path = core.config().state_file;
  if (path.empty() || !core.HasLearned()) return;
  LearnedState state = core.ExportState();
  state.machine = MachineId(backend);
  if (absl::Status status = SaveState(path, state); !status.ok()) {
    LogOnce(LogLevel::kWarn, "save-state",
            absl::StrCat(status.message(), "; not saving the learned state"));
  }
}

void WriteRunOutputs(const TraceRecorder& recorder, const PreloadConfig& config,
                     absl::string_view comm_name, absl::string_view process_name) {
  if (!config.trace_file.empty()) {
    if (absl::Status status = recorder.Write(config.trace_file, process_name); !status.ok()) {
      Log(LogLevel::kWarn, status.message());
    }
  }
  const LagSummary summary = SummarizeLags(recorder.rows());
  if (summary.calls == 0) return;
  // A log line is one line: the table goes line by line.
  for (absl::string_view line :
       absl::StrSplit(FormatLagSummary(summary), '\n', absl::SkipEmpty())) {
    Log(LogLevel::kInfo, absl::StrCat(comm_name, ": ", line));
  }
  if (!config.summary_file.empty()) {
    nlohmann::json json = LagSummaryJson(summary);
    json["comm"] = std::string(comm_name);
    json["truncated"] = recorder.truncated();
    std::ofstream file(config.summary_file);
    file << json.dump(2) << "\n";
    if (!file) Log(LogLevel::kWarn, absl::StrCat("cannot write ", config.summary_file));
  }
}

}  // namespace stragglar
