// The per-rank state of one communicator's protocol, without any I/O: the policy that decides
// (policy/policy.h), the call counter, and the ledger of the calls of the current epoch with their
// timings. runtime/communicator.h drives it for every backend; tests and benchmarks drive it
// directly.
//
// Every call: Decide() (identical on every rank), run the plan, Record() this rank's timing, now
// or, for a GPU, later (RecordPending() with the timer's ticket, then Fill()). Every
// `epoch_calls` calls the ranks gather every rank's EpochPayload() at the same call index and
// hand the concatenation to AbsorbEpoch() on every rank. Decisions change only there, from data
// all ranks share, so every rank runs the same algorithm for the same call. A wrong prediction
// may cost time; it can never desynchronise the ranks.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "policy/learned_state.h"
#include "policy/policy.h"
#include "policy/policy_config.h"
#include "policy/reports.h"
#include "profiler/arrival.h"

namespace stragglar {

// A call whose timing a timer will know later: the timer's ticket, and the host's arrival time to
// fall back on when the timer cannot say.
struct PendingTiming {
  uint64_t ticket = 0;
  double host_arrival_s = 0;
};

class RuntimeCore {
 public:
  // InvalidArgument for num_ranks < 2, rank outside [0, num_ranks), epoch_calls < 1, or no
  // candidates.
  static absl::StatusOr<RuntimeCore> Create(RuntimeConfig config, int rank, int num_ranks,
                                            LinkModel link);

  // The algorithm for the next call of `bytes` bytes.
  absl::StatusOr<CallDecision> Decide(int64_t bytes);
  // What the policy would choose for `bytes` now, without exploration and without counting a
  // call (replay's per-size summary).
  absl::StatusOr<CallDecision> Preview(int64_t bytes) { return policy_.Preview(next_call_, bytes); }
  // The plan to execute for `decision` on a call of `bytes` (owned by the policy's plan cache).
  absl::StatusOr<const Plan*> PlanFor(const CallDecision& decision, int64_t bytes) {
    return policy_.PlanFor(decision, bytes);
  }
  // The model's result for that plan on these arrivals, priced as the policy prices (the plan
  // cache's simulation: ring runs and StragglAR's post-arrival rounds in closed form). Replaying a
  // trace of thousands of ranks prices every call this way.
  absl::StatusOr<SimulationResult> Price(const CallDecision& decision, int64_t bytes,
                                         absl::Span<const double> arrival_s) {
    absl::StatusOr<PricedPlan> plan = policy_.PlanToPrice(decision, bytes);
    if (!plan.ok()) return plan.status();
    return policy_.plans().Simulate(*plan, static_cast<double>(bytes), link(), arrival_s);
  }

  // This rank's timing of the call Decide() last returned.
  // `ran_decision` false: the timing is not of the decision's plan (a replayed trace in which
  // something else ran), so the calibration does not credit it to the decision's algorithm.
  void Record(const CallTiming& timing, bool ran_decision = true);
  // The call ran `ran` instead of what Decide() returned (a backend's forced algorithm): the
  // epoch report and the calibration credit `ran` (unless not `measured`, as above).
  void Record(const CallTiming& timing, const CallDecision& ran, bool measured = true);
  // The call that Decide() last returned ran `ran`; its timing comes later, through Fill().
  void RecordPending(const CallDecision& ran, PendingTiming pending);
  // The oldest recorded call still waiting for its timing: (call index, its pending timing).
  std::optional<std::pair<int64_t, PendingTiming>> OldestPending() const;
  // The timing of pending call `call`. FailedPrecondition when that call is not pending.
  absl::Status Fill(int64_t call, const CallTiming& timing);
  // A recorded call of the current or sealed epoch (nullptr when it is in neither), and its
  // timing as recorded so far.
  const RecordedCall* Recorded(int64_t call, CallTiming* timing = nullptr) const;

  // True when the epoch is full: it must be absorbed (or sealed) before the next Decide().
  bool ExchangeDue() const { return static_cast<int>(epoch_.calls.size()) >= config().epoch_calls; }
  // [arrival_s, duration_s] per call of the epoch AbsorbEpoch() absorbs next (the sealed one when
  // there is one, else the current one), in call order. Pending timings count as zeros: fill them
  // first.
  std::vector<double> EpochPayload() const;
  // Every rank's EpochPayload(), rank after rank: the same values on every rank. Feeds the policy
  // and prepares the next epoch's decisions. Absorbs the sealed epoch when there is one (see
  // SealEpoch), else the current one. InvalidArgument on a size mismatch.
  absl::Status AbsorbEpoch(absl::Span<const double> all_payloads);

  // Deferred exchange, for backends whose timings arrive after the call has returned (the GPU's:
  // a call is only enqueued on a stream). SealEpoch() closes the full epoch so that calls go on
  // into the next one while the ranks gather the sealed epoch's timings; AbsorbEpoch() later
  // absorbs it, at the same call index on every rank. Decisions meanwhile come from the epochs
  // absorbed before: they lag by one epoch, and stay identical on every rank. FailedPrecondition
  // when the current epoch is not full or an epoch is already sealed.
  absl::Status SealEpoch();
  bool HasSealedEpoch() const { return sealed_.has_value(); }
  // Calls in the sealed epoch (0 when none), and the index of its first call.
  int sealed_calls() const { return sealed_ ? static_cast<int>(sealed_->calls.size()) : 0; }
  int64_t sealed_first_call() const { return sealed_ ? sealed_->first_call : 0; }

  int rank() const { return rank_; }
  int num_ranks() const { return policy_.num_ranks(); }
  int64_t calls() const { return next_call_; }
  int64_t epochs() const { return policy_.epochs(); }
  const RuntimeConfig& config() const { return policy_.config(); }
  const LinkModel& link() const { return policy_.link(); }
  const StragglerDetector& detector() const { return policy_.detector(); }
  // Every change of the detector's verdict so far, in order.
  const std::vector<DetectionEvent>& detections() const { return policy_.detections(); }
  const Calibration& calibration() const { return policy_.calibration(); }
  Policy& policy() { return policy_; }
  // Policy::SetLink, and the last epoch's report says it (what its observers are given next).
  absl::Status SetLink(const LinkModel& link) {
    if (absl::Status status = policy_.SetLink(link); !status.ok()) return status;
    last_epoch_.link = link;
    return absl::OkStatus();
  }
  // Every rank's link as the slow-link probe measured it, which each epoch's report says from now.
  void SetLinkSpeeds(std::vector<RankLinkSpeed> speeds) {
    link_speeds_ = std::move(speeds);
    last_epoch_.link_speeds = link_speeds_;
  }
  const std::vector<RankLinkSpeed>& link_speeds() const { return link_speeds_; }
  // The last AbsorbEpoch()'s report (empty before the first).
  const EpochReport& last_epoch() const { return last_epoch_; }

  // See Policy.
  LearnedState ExportState() const { return policy_.ExportState(); }
  bool HasLearned() const { return policy_.HasLearned(); }
  absl::Status ImportState(const LearnedState& state) { return policy_.ImportState(state); }

 private:
  // The calls of one epoch, in call order, and this rank's timing of each.
  struct Epoch {
    int64_t first_call = 0;
    std::vector<RecordedCall> calls;
    std::vector<CallTiming> timings;
  };

  RuntimeCore(Policy policy, int rank);
  void Append(const RecordedCall& call, const CallTiming& timing);
  Epoch* EpochOf(int64_t call);
  const Epoch* EpochOf(int64_t call) const;

  Policy policy_;
  int rank_;
  int64_t next_call_ = 0;
  Epoch epoch_;
  std::optional<Epoch> sealed_;
  std::optional<std::pair<CallDecision, int64_t>> pending_;  // Decide() awaiting its Record()
  // Calls recorded without a timing, oldest first (they fill in call order, or nearly).
  std::deque<std::pair<int64_t, PendingTiming>> pending_timings_;
  EpochReport last_epoch_;
  std::vector<RankLinkSpeed> link_speeds_;
};

}  // namespace stragglar
