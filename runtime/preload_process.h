// What a preload library keeps once per process, whichever collective library it serves (the MPI
// preload, runtime/mpi/mpi_preload.cc; the NCCL preload, runtime/nccl/nccl_preload.cc): its
// settings and the build it reports, the metrics endpoint, the watchdog over every call it
// handles, which communicator writes the end-of-run trace and summary, and the writing of them.
//
// What differs stays with each library: how it finds a communicator's state (an MPI attribute,
// which ends with the communicator; an NCCL handle, looked up in a table), how it makes one, and
// how it ends the job on STRAGGLAR_TIMEOUT (MPI_Abort; a revoked NCCL communicator).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "exporters/build_info.h"
#include "runtime/call_watchdog.h"
#include "runtime/communicator.h"
#include "runtime/env_config.h"
#include "runtime/preload_common.h"

namespace stragglar {

class PreloadProcess {
 public:
  // `process_name` names the process in the trace, e.g. "stragglar (MPI)".
  explicit PreloadProcess(std::string process_name) : process_name_(std::move(process_name)) {}
  PreloadProcess(const PreloadProcess&) = delete;
  PreloadProcess& operator=(const PreloadProcess&) = delete;

  // The settings in force and the build reported (stragglar_build_info), set once before Start.
  void Configure(PreloadConfig config, BuildInfo build);
  const PreloadConfig& config() const { return config_; }

  // For an active library (STRAGGLAR_MODE not off), once: the metrics endpoint of node rank
  // `local_rank` (StartMetricsFromEnv), and the watchdog when STRAGGLAR_WARN_AFTER or
  // STRAGGLAR_TIMEOUT is set, which calls `on_timeout` on its thread after its timeout line.
  void Start(int local_rank, std::function<void(const std::string&)> on_timeout);
  prometheus::Registry* registry() const { return metrics_.registry.get(); }
  // Null when neither STRAGGLAR_WARN_AFTER nor STRAGGLAR_TIMEOUT is set, and after EndWatchdog.
  CallWatchdog* watchdog() const { return watchdog_.get(); }
  // Stops the watchdog's thread; no call is checked from then on (at exit, before CUDA goes).
  void StopWatchdog();
  // Stops the watchdog and lets it go: no call is in progress from then on (MPI_Finalize).
  void EndWatchdog() { watchdog_.reset(); }

  // A communicator this process handles, once made: its metrics (where the endpoint runs: this
  // rank's of `num_ranks`, and stragglar_build_info) and, for the first one that `may_trace`, the
  // recorder whose rows make the end-of-run trace and summary. Safe from several threads.
  void AddObservers(Communicator& comm, int num_ranks, bool may_trace);
  // `comm`'s trace (STRAGGLAR_TRACE_FILE), its lag summary table at INFO and the summary's JSON
  // (STRAGGLAR_SUMMARY_FILE), written by rank 0 of the traced communicator, labelled with the
  // communicator's name; nothing for the others. Errors are logged.
  void WriteOutputs(const Communicator& comm) const;

 private:
  const std::string process_name_;
  PreloadConfig config_;
  BuildInfo build_;
  MetricsSetup metrics_;
  std::unique_ptr<CallWatchdog> watchdog_;
  std::atomic<bool> traced_{false};  // the communicator that traces has been chosen
};

}  // namespace stragglar
