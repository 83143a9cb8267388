// The host runtime: n ranks that are threads of one process. One HostTransport carries both the
// plans' messages and the epoch exchange; each rank owns a RuntimeCore and its plan cache.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "exporters/observer.h"
#include "kernels/host_executor.h"
#include "kernels/plan.h"
#include "runtime/runtime_core.h"
#include "runtime/state_file.h"

namespace stragglar {

// Measures alpha and beta of the in-process transport as the plans see them: every rank sends a
// message to the next and reduces the one from the previous (one ring round, all ranks at once,
// so contention for the cores is included). alpha = time of a round of tiny messages; beta =
// extra time per byte of a round of large ones, scaled to one transfer with a core of its own;
// shared_lanes = the number of cores.
absl::StatusOr<LinkModel> MeasureHostLink(int num_ranks);

class HostCommunicator {
 public:
  // `observers` see every call and every epoch exchange of every rank (exporters).
  static absl::StatusOr<std::unique_ptr<HostCommunicator>> Create(
      int num_ranks, const RuntimeConfig& config, const LinkModel& link,
      std::vector<std::shared_ptr<CollectiveObserver>> observers = {});

  // Saves the learned state (config.state_file) one last time.
  ~HostCommunicator();

  // Called by rank `rank`'s thread; every rank makes the same sequence of calls. Returns the
  // decision that was executed. Arrival is taken on entry, on a clock all ranks share. A failed
  // call aborts the shared transport (so no rank hangs) and, as with an NCCL communicator after an
  // error, every later call fails too: create a new communicator to continue. `timing`, when
  // given, receives what the runtime recorded for this call (what a trace should show).
  absl::StatusOr<CallDecision> AllReduce(int rank, const HostAllReduceArgs& args,
                                         CallTiming* timing = nullptr);

  int num_ranks() const { return static_cast<int>(ranks_.size()); }
  const RuntimeCore& core(int rank) const { return ranks_[rank]->core; }
  // Seconds since the communicator was created: the shared arrival clock.
  double Now() const;

 private:
  struct Rank {
    explicit Rank(RuntimeCore core) : core(std::move(core)) {}
    RuntimeCore core;
  };

  HostCommunicator(std::unique_ptr<HostTransport> transport,
                   std::vector<std::unique_ptr<Rank>> ranks);
  absl::Status ExchangeEpoch(int rank);
  // Rank 0 writes the state file after an exchange, at most every kStateSaveInterval.
  void SaveState(bool force);

  static constexpr absl::Duration kStateSaveInterval = absl::Seconds(10);

  std::unique_ptr<HostTransport> transport_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<std::shared_ptr<CollectiveObserver>> observers_;
  std::chrono::steady_clock::time_point origin_;
  std::string state_file_;
  absl::Time last_save_ = absl::InfinitePast();
  bool save_failed_ = false;  // logged once
};

}  // namespace stragglar
