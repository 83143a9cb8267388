// What a backend (ranks as threads, MPI, NCCL, a replayed trace) gives the communicator protocol
// (runtime/communicator.h): collectives among the communicator's ranks for the protocol's own
// traffic, its clocks, and per call, the call's own work. Everything else (deciding, recording,
// the epoch exchange and its cadence, observers, the learned state, the link model) is the
// protocol's, the same for every backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/program/program.h"
#include "policy/reports.h"
#include "profiler/arrival.h"

namespace stragglar {

// What a call's work reports, and how its timing becomes known: by the protocol's host clock
// around the work (neither `timing` nor `ticket`), from the backend at once (`timing`: a
// replayed trace), or later (`ticket`: a GPU timer's, read through CommBackend::PollTiming).
struct CallOutcome {
  absl::Status status;
  std::optional<CallTiming> timing;
  std::optional<uint64_t> ticket;
  // With neither: whether the host clock's duration means anything. A call that only enqueues
  // work (the GPU's, when its timer is unavailable) reports its arrival with duration 0.
  bool host_duration = true;
  // False when the timing is not of the decision's plan (a trace in which something else ran):
  // the calibration then does not credit it to the decision's algorithm.
  bool measured = true;
};

// One call's own work, which only its backend knows how to do.
class CallWork {
 public:
  virtual ~CallWork() = default;
  // Runs the call as `decision` says: the library's own collective when `program` is null (the
  // default algorithm on a backend that has one), else this rank's program of the decision's
  // plan, lowered for the call's placement (owned by the communicator for its lifetime).
  virtual CallOutcome Run(const CallDecision& decision, const RankProgram* program) = 0;
  // False for work that runs no plan whatever the decision (a replayed call only reads its
  // timings): the communicator then lowers nothing, so no plan is built whole for it (Ring's is
  // 1.35 GB at 4096 ranks), and Run gets null.
  virtual bool RunsPlans() const { return true; }
  // True for work that runs every program on buffers of its own whatever the caller's (the
  // device executor's windows): the communicator then lowers programs in place and with their
  // pre-arrival rounds.
  virtual bool RunsInPlace() const { return false; }
};

// Seconds on CLOCK_MONOTONIC (std::chrono::steady_clock): one clock for every process of a host,
// so that arrivals compare across the ranks there.
inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The ranks one rank sends to and receives from in a ring round of the link probe.
struct RingPeers {
  int next = 0;
  int previous = 0;
  friend bool operator==(const RingPeers&, const RingPeers&) = default;
};

class CommBackend {
 public:
  virtual ~CommBackend() = default;

  // Seconds on a clock the ranks of one host share (CLOCK_MONOTONIC), for arrivals.
  virtual double Now() = 0;

  // Gathers every rank's `mine` (the same length on every rank), rank after rank: started here,
  // completed by FinishGather. Backends whose calls only enqueue work (the GPU) say so with
  // DefersExchange(): their gather runs behind later calls, and the protocol finishes it an
  // epoch later. The others may do all of it in StartGather.
  virtual absl::Status StartGather(absl::Span<const double> mine) = 0;
  virtual absl::StatusOr<std::vector<double>> FinishGather() = 0;
  virtual bool DefersExchange() const { return false; }

  // `text` as rank 0 has it, on every rank (collective).
  virtual absl::Status BroadcastFromRankZero(std::string& text) = 0;

  // The timing of a call whose work returned a ticket: nullopt while the timer does not know it
  // yet (never blocks), or blocking until it does. Release forgets the ticket.
  virtual absl::StatusOr<std::optional<CallTiming>> PollTiming(uint64_t ticket) {
    return absl::UnimplementedError("this backend issues no timing tickets");
  }
  virtual absl::StatusOr<CallTiming> WaitTiming(uint64_t ticket) {
    return absl::UnimplementedError("this backend issues no timing tickets");
  }
  virtual void ReleaseTiming(uint64_t ticket) {}

  // The link probe's primitives (runtime/link_probe.h), for backends whose link the protocol
  // measures: seconds per ring round (every rank sends `bytes` to its `peers.next` and receives
  // from its `peers.previous`, `repeats` rounds, averaged) on this rank, and the element-wise
  // maximum over the ranks (collective), so that every rank holds the same model.
  virtual absl::StatusOr<double> RingRoundSeconds(int64_t bytes, int repeats, RingPeers peers) {
    return absl::UnimplementedError("this backend does not probe its link");
  }
  virtual absl::Status MaxOverRanks(absl::Span<double> values) {
    return absl::UnimplementedError("this backend does not probe its link");
  }
};

}  // namespace stragglar
