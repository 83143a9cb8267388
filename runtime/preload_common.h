// What both preload libraries (libstragglar.so for NCCL, libstragglar_mpi.so for MPI) do the same
// way around their backend: the metrics endpoint, the learned-state file, and the end-of-run
// trace and lag summary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "exporters/observer.h"
#include "exporters/prometheus_exporter.h"
#include "exporters/trace_recorder.h"
#include "runtime/env_config.h"
#include "runtime/runtime_core.h"

namespace stragglar {

// The endpoint STRAGGLAR_METRICS_PORT / STRAGGLAR_METRICS_ADDR configure for the process of node
// rank `local_rank`, started; both null when it is not configured or cannot bind (said in one
// line: the job goes on without metrics).
struct MetricsSetup {
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<MetricsServer> server;
};
MetricsSetup StartMetricsFromEnv(int local_rank);

// The observers of one communicator (metrics, trace), and the recorder among them whose rows make
// the end-of-run trace and summary.
class CommObservers {
 public:
  void Add(std::shared_ptr<CollectiveObserver> observer) {
    observers_.push_back(std::move(observer));
  }
  void SetRecorder(std::shared_ptr<TraceRecorder> recorder) {
    recorder_ = recorder;
    if (recorder != nullptr) observers_.push_back(std::move(recorder));
  }
  const std::shared_ptr<TraceRecorder>& recorder() const { return recorder_; }
  const std::vector<std::shared_ptr<CollectiveObserver>>& all() const { return observers_; }

 private:
  std::vector<std::shared_ptr<CollectiveObserver>> observers_;
  std::shared_ptr<TraceRecorder> recorder_;
};

// The start of every call a preload library handles: the core's decision for `bytes` (identical
// on every rank) with STRAGGLAR_ALGORITHM applied, announced to the observers. `native`: run the
// library's own collective (`library` names it in the log line of a failed decision, which
// cannot happen with a valid core: the call then runs the library's own, and the call counts stay
// aligned).
struct CallStart {
  CallDecision decision;
  bool native = true;
};
CallStart StartCall(RuntimeCore& core, const PreloadConfig& config, int64_t bytes,
                    const CommObservers& observers, absl::string_view library);

// One line for the log when a communicator first runs `plan` on calls of `bytes`, e.g.
// "stragglar around rank 3 for 16 MiB: 24 chunks (8 pieces per rank), 2 rounds before the
// straggler arrives and 25 after".
std::string DescribePlan(const Plan& plan, int64_t bytes);

// The link model a communicator measured, e.g. "link: 12.5 us + 1.52 GB/s per message".
std::string DescribeLink(const LinkModel& link);

// Saves what `core` learned to STRAGGLAR_STATE_FILE (the core's config().state_file), tagged with
// this machine and `backend`; a failure is logged once per process. No-op without a path or with
// nothing learned.
void SaveLearnedState(const RuntimeCore& core, absl::string_view backend);

// The recorded trace (STRAGGLAR_TRACE_FILE), the lag summary table at INFO and its JSON
// (STRAGGLAR_SUMMARY_FILE), labelled with the communicator's name. Errors are logged.
void WriteRunOutputs(const TraceRecorder& recorder, const PreloadConfig& config,
                     absl::string_view comm_name, absl::string_view process_name);

}  // namespace stragglar
