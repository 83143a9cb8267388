// The one protocol of a communicator, for every backend: ranks as threads (the host runtime
// behind `stragglar run`), MPI_Allreduce and ncclAllReduce in the preload libraries, and a
// replayed trace. One Communicator per rank; the backend (runtime/comm_backend.h) gives it
// collectives among the ranks, clocks, and each call's own work.
//
// Per call: Decide (identical on every rank; STRAGGLAR_ALGORITHM applied), tell the observers,
// lower the plan for the call's placement once and keep the program, run the call through the
// backend, record this rank's timing (now, or with the GPU timer's ticket and filled once the GPU
// has run the call: observers see OnCall then, in call order), and every `epoch_calls` calls
// exchange the epoch and absorb it at the same call index on every rank. A backend whose calls
// only enqueue work defers the exchange: the full epoch is sealed, half an epoch later its timings
// are read and gathered behind the calls, and an epoch later absorbed; decisions then lag the
// measurements by one epoch, and stay identical on every rank. Around that: the link model
// (given, or probed through the backend), and the learned state (STRAGGLAR_STATE_FILE: read by
// rank 0 and broadcast at creation, saved by rank 0 after exchanges at most every 10 s and when
// closed).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/log.h"
#include "kernels/program/program.h"
#include "policy/reports.h"
#include "profiler/clock_alignment.h"
#include "runtime/comm_backend.h"
#include "runtime/comm_observers.h"
#include "runtime/env_config.h"
#include "runtime/link_probe.h"
#include "runtime/runtime_core.h"

namespace stragglar {

struct CommOptions {
  RuntimeConfig runtime;  // the policy, the epoch cadence, the state file
  // Names the communicator in log lines ("world", "comm0").
  std::string name;
  // The learned state's machine id names the backend too ("host-threads", "mpi", "nccl"): each
  // learns its own costs.
  std::string backend = "host-threads";
  // The library call a failure names in its log line ("MPI_Allreduce", "ncclAllReduce"); empty:
  // failures are only returned (the host runtime, whose caller reports them).
  std::string library_call;
  // The link model to price plans with; nullopt: probed through the backend at creation, and on a
  // machine of several nodes (runtime.topology) the link between nodes too, which then replaces
  // runtime.inter_node_link.
  std::optional<LinkModel> link;
  // With `link`: every rank's link as a probe measured it (by rank; empty: not measured), which
  // the epochs' reports then carry as a probe's would.
  std::vector<RankLinkSpeed> link_speeds;
  LinkProbeSpec probe;
  // A replay's links (runtime/replay/): given each absorbed epoch's report, the link the replayed
  // run priced once it had absorbed that epoch, in place of probing again; nullopt keeps the link.
  std::function<std::optional<LinkModel>(const EpochReport&)> replayed_link;
  // The backend has its library's own AllReduce (MPI, NCCL): Algorithm::kNative runs it, and it
  // runs every call once the protocol is disabled. Without one, native is never decided.
  bool has_native = false;
  // STRAGGLAR_ALGORITHM and STRAGGLAR_STRAGGLER (testing and benchmark knobs).
  PreloadConfig::Forced forced = PreloadConfig::Forced::kAuto;
  std::optional<int> forced_straggler;
  // Programs leave StragglAR's pre-arrival phase to the backend's collectives where the plan
  // allows it (STRAGGLAR_PRE_ARRIVAL=nccl, agreed on by every rank).
  bool native_pre_arrival = false;
  // The ranks' clocks are not one (ranks on several hosts): each epoch exchange also gathers every
  // rank's clock at the last one's end, and puts the epoch's arrivals on rank 0's clock
  // (profiler/clock_alignment.h) before the policy reads them. Immediate exchanges only.
  bool align_clocks = false;
  // The level of the line that says there is no state file yet (a first run): INFO in the
  // preload libraries, WARN where a user asked for the file on a command line.
  LogLevel missing_state_level = LogLevel::kInfo;
};

// The INFO line when a communicator first runs `plan` on calls of `bytes`, e.g. "stragglar around
// rank 3 for 16 MiB: 24 chunks (8 pieces per rank), 2 rounds before the straggler arrives and 25
// after".
std::string DescribePlan(const Plan& plan, int64_t bytes);

class Communicator {
 public:
  // Collective: every rank creates its communicator in the same order (the link probe and the
  // learned state's broadcast are the backend's collectives). `backend` must outlive it.
  // InvalidArgument as RuntimeCore::Create; a failed probe or broadcast, as the backend says.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(int rank, int num_ranks,
                                                              CommOptions options,
                                                              CommBackend& backend);
  // Saves the learned state (Close()).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // One AllReduce of `bytes` (`in_place`: send and receive buffers are the same memory), run by
  // `work`. Returns the decision that ran, or the first failure: the work's, the program's, or
  // the epoch exchange's. A failed exchange disables the protocol on this communicator: from then
  // on every call runs the library's own collective (where there is one) or fails with the same
  // error. `timing`, when given, receives what was recorded now (nothing for a pending timing).
  absl::StatusOr<CallDecision> AllReduce(int64_t bytes, bool in_place, CallWork& work,
                                         CallTiming* timing = nullptr);

  // The plan `decision` runs on a call of `bytes` (owned by the communicator).
  absl::StatusOr<const Plan*> PlanFor(const CallDecision& decision, int64_t bytes) {
    return core_.PlanFor(decision, bytes);
  }
  // RuntimeCore::Price.
  absl::StatusOr<SimulationResult> Price(const CallDecision& decision, int64_t bytes,
                                         absl::Span<const double> arrival_s) {
    return core_.Price(decision, bytes, arrival_s);
  }
  // What the policy would choose for `bytes` now, without exploration and without counting a call.
  absl::StatusOr<CallDecision> Preview(int64_t bytes) { return core_.Preview(bytes); }

  // Exchanges the calls of a partial epoch (immediate backends, at the end of a job), so that they
  // reach the observers. Collective.
  absl::Status Flush();
  // Saves the learned state one last time (rank 0). Idempotent.
  void Close();

  int rank() const { return core_.rank(); }
  const std::string& name() const { return options_.name; }
  const LinkModel& link() const { return core_.link(); }
  const RuntimeCore& core() const { return core_; }
  CommObservers& observers() { return observers_; }
  const CommObservers& observers() const { return observers_; }
  // Why the protocol was disabled (OK while it runs).
  const absl::Status& disabled() const { return disabled_; }

 private:
  Communicator(CommOptions options, CommBackend& backend, RuntimeCore core);
  absl::Status LoadLearnedState();
  // The decision for a call of `bytes` with STRAGGLAR_ALGORITHM applied; `native`: run the
  // library's own collective.
  CallDecision Decide(int64_t bytes, bool* native);
  // The decision's plan, and this rank's program of it for the placement.
  // The decision's plan lowered for this rank and `placement`, kept for the communicator's
  // lifetime.
  absl::StatusOr<const RankProgram*> ProgramFor(const CallDecision& decision, int64_t bytes,
                                                Placement placement);
  void Record(const CallDecision& decision, int64_t bytes, double arrival_s,
              const CallOutcome& outcome, CallTiming* timing);
  // Fills the pending timings the backend knows (`wait`: of every call before `until_call`,
  // blocking), telling the observers, in call order.
  void DeliverTimings(bool wait, int64_t until_call);
  absl::Status ExchangeNow();
  // One gather that also carries every rank's clock at the end of the one before, with the
  // alignment; `payload` then without its stamp, with its arrivals on rank 0's clock.
  absl::StatusOr<std::vector<double>> GatherAligned(std::vector<double> payload);
  absl::Status AdvanceDeferredExchange();
  absl::Status GatherSealed();
  absl::Status Absorb(const std::vector<double>& all);
  // After an absorbed epoch whose calibration moved by kReprobeMove, where the first probe looked
  // for a slow rank: probes for it again, at the same call on every rank (the calibration is fed
  // only from the exchange), and prices the link found from the next call. A replay takes the
  // replayed run's link instead (CommOptions::replayed_link).
  absl::Status FollowLinkChange();
  void SaveLearnedState(bool force);
  absl::StatusOr<CallDecision> RunDisabled(CallWork& work);

  CommOptions options_;
  CommBackend& backend_;
  RuntimeCore core_;
  CommObservers observers_;
  // Programs by plan and placement: plans live in the core's plan cache for the communicator's
  // lifetime, so their addresses identify them. A node map: work may keep a program's address
  // (the device executor keys its uploads by it).
  absl::node_hash_map<std::pair<const Plan*, Placement>, RankProgram> programs_;
  // The epoch (core_.epochs() after it) whose absorb changed the link: the next one's calibration
  // moves again as the calls are priced on the new link, and probes nothing for that.
  int64_t link_changed_after_epoch_ = -1;
  absl::flat_hash_set<const Plan*> described_plans_;  // rank 0, at INFO: logged on first use
  bool gathered_ = false;                 // deferred: the sealed epoch's gather has been started
  std::optional<ClockAlignment> clocks_;  // with options_.align_clocks
  double gather_end_s_ = std::nan("");    // this rank's clock when its last gather returned
  int stamp_gathers_ = 0;                 // the gathers of stamps alone before the first epoch's
  absl::Status disabled_;
  std::chrono::steady_clock::time_point last_save_{};
  bool closed_ = false;
};

}  // namespace stragglar
