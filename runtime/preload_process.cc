#include "runtime/preload_process.h"

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "exporters/prometheus_exporter.h"
#include "exporters/run_summary.h"
#include "exporters/trace_recorder.h"

namespace stragglar {

void PreloadProcess::Configure(PreloadConfig config, BuildInfo build) {
  config_ = std::move(config);
  build_ = std::move(build);
}

void PreloadProcess::Start(int local_rank, std::function<void(const std::string&)> on_timeout) {
  metrics_ = StartMetricsFromEnv(local_rank);
  if (config_.warn_after_s > 0 || config_.timeout_s > 0) {
    watchdog_ = std::make_unique<CallWatchdog>(
        WatchdogOptions{.warn_after_s = config_.warn_after_s, .timeout_s = config_.timeout_s},
        std::move(on_timeout));
  }
}

void PreloadProcess::StopWatchdog() {
  if (watchdog_ != nullptr) watchdog_->Stop();
}

void PreloadProcess::AddObservers(Communicator& comm, int num_ranks, bool may_trace) {
  if (prometheus::Registry* metrics = registry(); metrics != nullptr) {
    // Each process exports its own rank only.
    comm.observers().Add(std::make_shared<PrometheusObserver>(*metrics, comm.name(), num_ranks,
                                                              std::vector<int>{comm.rank()}));
    ExportBuildInfo(*metrics, build_, comm.name(), {comm.rank()});
  }
  if (may_trace && !traced_.exchange(true)) {
    comm.observers().SetRecorder(std::make_shared<TraceRecorder>(0));
  }
}

void PreloadProcess::WriteOutputs(const Communicator& comm) const {
  const std::shared_ptr<TraceRecorder>& recorder = comm.observers().recorder();
  if (recorder == nullptr || comm.rank() != 0) return;
  if (!config_.trace_file.empty()) {
    if (absl::Status status = recorder->Write(config_.trace_file, process_name_); !status.ok()) {
      Log(LogLevel::kWarn, status.message());
    }
  }
  const LagSummary summary = SummarizeLags(recorder->rows());
  if (summary.calls == 0) return;
  // A log line is one line: the table goes line by line.
  for (absl::string_view line :
       absl::StrSplit(FormatLagSummary(summary), '\n', absl::SkipEmpty())) {
    Log(LogLevel::kInfo, absl::StrCat(comm.name(), ": ", line));
  }
  if (!config_.summary_file.empty()) {
    nlohmann::json json = LagSummaryJson(summary);
    json["comm"] = comm.name();
    json["truncated"] = recorder->truncated();
    std::ofstream file(config_.summary_file);
    file << json.dump(2) << "\n";
    if (!file) Log(LogLevel::kWarn, absl::StrCat("cannot write ", config_.summary_file));
  }
}

}  // namespace stragglar
