// The policy of one rank of a communicator: what to run for each call, and what to learn from
// each epoch. Decisions come only from data every rank holds alike (the epoch exchanges, or a
// saved state loaded by all), so every rank takes the same decision for the same call.
//
// Per call, Decide() prices the candidates with the discrete-event model on the predicted
// arrivals (once per message size per epoch), keeps the default unless another is predicted
// clearly faster, and now and then explores (policy/exploration.h). Per epoch, Absorb() takes
// every rank's timing of every call: the detector names or clears a persistent straggler, a few
// calls per epoch calibrate the model (measured against modelled time on the same arrivals), and
// each call's time saved against the default algorithm is estimated for the report.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "policy/calibration.h"
#include "policy/chooser.h"
#include "policy/detector.h"
#include "policy/learned_state.h"
#include "policy/model/simulator.h"
#include "policy/plan_cache.h"
#include "policy/policy_config.h"
#include "policy/reports.h"

namespace stragglar {

// One call of an epoch as the rank that made it recorded it: what ran, on how many bytes, and
// whether the timing is of that plan (a replayed trace may have run something else).
struct RecordedCall {
  CallDecision decision;
  int64_t bytes = 0;
  bool measured = true;
};

class Policy {
 public:
  // InvalidArgument for num_ranks < 2, epoch_calls < 1, or no candidates.
  static absl::StatusOr<Policy> Create(RuntimeConfig config, int num_ranks, LinkModel link);

  // The algorithm for call `call` (0-based on the communicator) of `bytes` bytes, exploration
  // included.
  absl::StatusOr<CallDecision> Decide(int64_t call, int64_t bytes);
  // What the policy would choose for `bytes` now, without exploration (replay's per-size
  // summary).
  absl::StatusOr<CallDecision> Preview(int64_t call, int64_t bytes);
  // The plan to execute for `decision` on a call of `bytes` (owned by plans(); StragglAR's is
  // pipelined as the model prefers for that size), with its transfers.
  absl::StatusOr<const Plan*> PlanFor(const CallDecision& decision, int64_t bytes) {
    absl::StatusOr<PricedPlan> plan = PlanToPrice(decision, bytes);
    if (!plan.ok()) return plan.status();
    return plans_->Materialized(*plan);
  }
  // The same plan for pricing through plans() (PlanCache::For).
  absl::StatusOr<PricedPlan> PlanToPrice(const CallDecision& decision, int64_t bytes) {
    if (decision.algorithm == Algorithm::kStragglar && decision.shape.has_value()) {
      return plans_->WithShape(decision.algorithm, decision.straggler, *decision.shape);
    }
    return plans_->For(decision.algorithm, decision.straggler, static_cast<double>(bytes), link_);
  }

  // One epoch: `calls` as this rank recorded them, starting at call `first_call`, and every
  // rank's [arrival_s, duration_s] per call, rank after rank (the same values on every rank).
  // Feeds the detector and the calibration and prepares the next epoch's decisions.
  // InvalidArgument, changing nothing, when the payloads do not hold calls.size() calls of every
  // rank.
  absl::StatusOr<EpochReport> Absorb(int64_t first_call, absl::Span<const RecordedCall> calls,
                                     absl::Span<const double> all_payloads);

  int num_ranks() const { return num_ranks_; }
  int64_t epochs() const { return epochs_; }
  const RuntimeConfig& config() const { return config_; }
  const LinkModel& link() const { return link_; }
  // The link measured again (Communicator::FollowLinkChange: a slow link found or gone), priced
  // from the next decision on, the same on every rank. Only where every link is of one class (one
  // node, or nodes of one rank, whose links between nodes are this link); InvalidArgument,
  // changing nothing, on nodes of several ranks or for a link ValidateNetwork refuses.
  absl::Status SetLink(const LinkModel& link);
  const StragglerDetector& detector() const { return detector_; }
  // Every change of the detector's verdict so far, in order.
  const std::vector<DetectionEvent>& detections() const { return detections_; }
  const Calibration& calibration() const { return calibration_; }
  PlanCache& plans() { return *plans_; }

  // What this policy has learned, for the state file (machine left empty for the caller).
  LearnedState ExportState() const;
  // Whether there is anything worth saving: an epoch was absorbed or a state was imported.
  bool HasLearned() const { return epochs_ > 0 || warm_; }
  // Starts from a saved state (the same on every rank): calibration, predicted lags and the
  // named straggler, and adapts from the first call. InvalidArgument, changing nothing, when the
  // state is for another world size.
  absl::Status ImportState(const LearnedState& state);

 private:
  Policy(RuntimeConfig config, int num_ranks, LinkModel link);
  bool Adapting(int64_t bytes) const;
  void Calibrate(const RecordedCall& call, absl::Span<const CallTiming> timing,
                 absl::Span<const double> lag_s);
  // EpochCallReport::saved_s of `call`; `baseline_by_bytes` caches the model's default-algorithm
  // time per message size within the epoch (it hardly depends on the lags: the default is
  // bulk-synchronous), so an epoch costs one simulation per size, not one per call.
  double EstimateSaved(const RecordedCall& call, absl::Span<const CallTiming> timing,
                       absl::Span<const double> lag_s,
                       absl::flat_hash_map<int64_t, double>& baseline_by_bytes);

  RuntimeConfig config_;
  int num_ranks_;
  LinkModel link_;
  StragglerDetector detector_;
  std::unique_ptr<PlanCache> plans_;  // by pointer: the chooser keeps its address across moves
  Chooser chooser_;
  int64_t epochs_ = 0;
  bool warm_ = false;  // started from a saved state: adapt before the first exchange
  Calibration calibration_;
  std::vector<double> predicted_arrival_s_;
  // The epoch's decision and priced candidates per message size: each size is priced once per
  // epoch, since nothing it depends on changes within one.
  absl::flat_hash_map<int64_t, CallDecision> decisions_by_bytes_;
  absl::flat_hash_map<int64_t, std::vector<CandidatePrice>> priced_by_bytes_;
  std::vector<DetectionEvent> detections_;
};

}  // namespace stragglar
