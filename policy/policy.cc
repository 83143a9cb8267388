#include "policy/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "policy/exploration.h"

namespace stragglar {
namespace {

// The shortest duration over the ranks: about the collective's own time (the last rank to arrive
// waits least), needing no shared clock. Infinity when there are no durations.
double ShortestDuration(absl::Span<const CallTiming> timing) {
  double shortest = std::numeric_limits<double>::infinity();
  for (const CallTiming& each : timing) shortest = std::min(shortest, each.duration_s);
  return shortest;
}

// The model's counterpart of ShortestDuration: the shortest time from a rank's arrival to its
// finish when `plan` (one of `plans`) runs on a call of `bytes` with these lags.
absl::StatusOr<double> ModelledShortestDuration(PlanCache& plans, PricedPlan plan, int64_t bytes,
                                                const LinkModel& link,
                                                absl::Span<const double> lag_s) {
  absl::StatusOr<SimulationResult> simulated =
      plans.Simulate(plan, static_cast<double>(bytes), link, lag_s);
  if (!simulated.ok()) return simulated.status();
  double shortest = std::numeric_limits<double>::infinity();
  for (size_t r = 0; r < lag_s.size(); ++r) {
    shortest = std::min(shortest, simulated->finish_s[r] - lag_s[r]);
  }
  return shortest;
}

}  // namespace

absl::StatusOr<Policy> Policy::Create(RuntimeConfig config, int num_ranks, LinkModel link) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(absl::StrCat("need at least 2 ranks, got ", num_ranks));
  }
  if (config.epoch_calls < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch_calls must be at least 1, got ", config.epoch_calls));
  }
  if (config.candidates.empty()) return absl::InvalidArgumentError("no candidate algorithms");
  if (config.topology.has_value() && config.topology->num_ranks() != num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("topology ", TopologyName(*config.topology),
                                                   " has ", config.topology->num_ranks(),
                                                   " ranks, the communicator ", num_ranks));
  }
  if (absl::Status link_ok = ValidateLink(config.inter_node_link); !link_ok.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("inter-node link: ", link_ok.message()));
  }
  if (link.has_slow_rank() || link.slow_factor != 1) {
    // A slow link is priced where every link is of one class, on one of the ranks.
    const NetworkModel network{.topology = config.topology.value_or(Topology::Flat(num_ranks)),
                               .intra_node = link,
                               .inter_node = config.inter_node_link};
    if (absl::Status slow_ok = ValidateNetwork(network); !slow_ok.ok()) return slow_ok;
  }
  return Policy(std::move(config), num_ranks, link);
}

absl::Status Policy::SetLink(const LinkModel& link) {
  const Topology& topology = plans_->machine().topology;
  // On nodes of several ranks the link inside a node and the one between are probed apart.
  if (topology.multi_node() && topology.ranks_per_node > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a link is set again only where every link is of one class, not on ",
                     TopologyName(topology)));
  }
  const NetworkModel network{.topology = topology,
                             .intra_node = link,
                             .inter_node = topology.multi_node() ? link : config_.inter_node_link};
  if (absl::Status ok = ValidateNetwork(network); !ok.ok()) return ok;
  link_ = link;
  // Nodes of one rank: every transfer crosses nodes and is priced on the link between them, which
  // is this link too. The pricer's memos are keyed by the link each question passes (link_), so
  // none priced on the old one is read again.
  if (topology.multi_node()) {
    config_.inter_node_link = link;
    plans_->SetInterNodeLink(link);
  }
  decisions_by_bytes_.clear();
  priced_by_bytes_.clear();
  return absl::OkStatus();
}

Policy::Policy(RuntimeConfig config, int num_ranks, LinkModel link)
    : config_(std::move(config)),
      num_ranks_(num_ranks),
      link_(link),
      detector_(num_ranks, config_.detector),
      plans_(std::make_unique<PlanCache>(
          num_ranks, config_.stragglar_pieces,
          PlanCache::Machine{.topology = config_.topology.value_or(Topology::Flat(num_ranks)),
                             .inter_node_link = config_.inter_node_link,
                             .native_is_nccl = config_.native_is_nccl,
                             .per_class_queues = config_.per_class_queues,
                             .intra_node_link = link})),
      chooser_(*plans_, config_.candidates, config_.min_predicted_gain,
               config_.calibrated_min_predicted_gain),
      predicted_arrival_s_(num_ranks, 0.0) {}

// Until the first exchange (or a loaded state) nothing is known, so there is nothing to adapt to.
bool Policy::Adapting(int64_t bytes) const {
  return config_.mode == RuntimeMode::kAdapt && bytes >= config_.min_bytes &&
         (epochs_ > 0 || warm_);
}

absl::StatusOr<CallDecision> Policy::Decide(int64_t call, int64_t bytes) {
  absl::StatusOr<CallDecision> chosen = Preview(call, bytes);
  if (!chosen.ok() || !Adapting(bytes)) return chosen;
  auto priced = priced_by_bytes_.find(bytes);
  if (priced == priced_by_bytes_.end()) return chosen;
  // A guessed candidate's slots come first, so that its calls stay back to back.
  if (IsRemeasuringCall(call, config_)) {
    CallDecision measured = Remeasure(*chosen, priced->second);
    if (measured.explored) return measured;
  }
  if (IsExplorationCall(call, config_)) return Explore(*chosen, priced->second, config_);
  return chosen;
}

absl::StatusOr<CallDecision> Policy::Preview(int64_t call, int64_t bytes) {
  CallDecision decision{.call = call, .algorithm = config_.default_algorithm};
  if (!Adapting(bytes)) return decision;
  auto it = decisions_by_bytes_.find(bytes);
  if (it == decisions_by_bytes_.end()) {
    absl::StatusOr<Choice> choice =
        chooser_.Choose(static_cast<double>(bytes), predicted_arrival_s_, detector_.straggler(),
                        link_, &calibration_);
    if (!choice.ok()) return choice.status();
    decision.algorithm = choice->algorithm;
    decision.straggler = choice->straggler;
    decision.shape = choice->shape;
    decision.predicted_s = choice->predicted_s;
    decision.default_predicted_s = choice->baseline_predicted_s;
    it = decisions_by_bytes_.emplace(bytes, decision).first;
    priced_by_bytes_[bytes] = std::move(choice->priced);
  }
  CallDecision chosen = it->second;
  chosen.call = call;
  return chosen;
}

LearnedState Policy::ExportState() const {
  return {.num_ranks = num_ranks_,
          .calibration = calibration_,
          .predicted_lag_s = predicted_arrival_s_,
          .straggler = detector_.straggler()};
}

absl::Status Policy::ImportState(const LearnedState& state) {
  if (state.num_ranks != num_ranks_ ||
      state.predicted_lag_s.size() != static_cast<size_t>(num_ranks_) ||
      (state.straggler.has_value() && (*state.straggler < 0 || *state.straggler >= num_ranks_))) {
    return absl::InvalidArgumentError(absl::StrCat("saved state is for ", state.num_ranks,
                                                   " ranks; this communicator has ", num_ranks_));
  }
  calibration_ = state.calibration;
  predicted_arrival_s_ = state.predicted_lag_s;
  if (state.straggler.has_value()) detector_.Seed(*state.straggler);
  decisions_by_bytes_.clear();
  priced_by_bytes_.clear();
  warm_ = true;
  return absl::OkStatus();
}

// The measured cost of a call is its shortest duration: the last rank to arrive waits least, so
// its duration is about the collective's own time, and it needs no shared clock. The model prices
// the same plan on the same call's lags and gives its own shortest duration (not its time after
// the last arrival: the last rank to arrive need not be the last to finish, differently per
// algorithm); their ratio corrects the model.
void Policy::Calibrate(const RecordedCall& call, absl::Span<const CallTiming> timing,
                       absl::Span<const double> lag_s) {
  if (call.bytes <= 0 || !call.measured) return;
  const double measured_s = ShortestDuration(timing);
  if (!(measured_s > 0)) return;  // no durations (e.g. a trace without them)
  // Best effort: a call the model cannot price (it ran, so its plan exists) is just not counted,
  // rather than leaving the epoch half absorbed.
  absl::StatusOr<PricedPlan> plan = PlanToPrice(call.decision, call.bytes);
  if (!plan.ok()) return;
  absl::StatusOr<double> predicted_s =
      ModelledShortestDuration(*plans_, *plan, call.bytes, link_, lag_s);
  if (!predicted_s.ok()) return;
  const absl::StatusOr<CalibrationRegime> regime =
      plans_->RegimeOf(*plan, static_cast<double>(call.bytes), link_, lag_s);
  if (!regime.ok()) return;
  calibration_.Add(call.decision.algorithm, call.bytes, *predicted_s, measured_s, *regime);
}

double Policy::EstimateSaved(const RecordedCall& call, absl::Span<const CallTiming> timing,
                             absl::Span<const double> lag_s,
                             absl::flat_hash_map<int64_t, double>& baseline_by_bytes) {
  const Algorithm baseline = config_.default_algorithm;
  if (call.bytes <= 0 || !call.measured || call.decision.algorithm == baseline) return 0;
  const double measured_s = ShortestDuration(timing);
  if (!(measured_s > 0) || !std::isfinite(measured_s)) return 0;
  auto cached = baseline_by_bytes.find(call.bytes);
  if (cached == baseline_by_bytes.end()) {
    double predicted_s = 0;  // 0: cannot be priced, so no estimate
    absl::StatusOr<PricedPlan> plan =
        plans_->For(baseline, std::nullopt, static_cast<double>(call.bytes), link_);
    if (plan.ok()) {
      absl::StatusOr<double> modelled =
          ModelledShortestDuration(*plans_, *plan, call.bytes, link_, lag_s);
      if (modelled.ok()) predicted_s = *modelled * calibration_.Factor(baseline, call.bytes);
    }
    cached = baseline_by_bytes.emplace(call.bytes, predicted_s).first;
  }
  return cached->second > 0 ? cached->second - measured_s : 0;
}

absl::StatusOr<EpochReport> Policy::Absorb(int64_t first_call, absl::Span<const RecordedCall> calls,
                                           absl::Span<const double> all_payloads) {
  const size_t count = calls.size();
  if (all_payloads.size() != 2 * count * num_ranks_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epoch exchange: expected ", 2 * count * num_ranks_, " values (", count, " calls x ",
        num_ranks_, " ranks), got ", all_payloads.size(), "; ranks disagree on the call count"));
  }
  const std::optional<int> before = detector_.straggler();
  std::vector<CallTiming> per_rank(num_ranks_);
  const size_t calibration_stride =
      std::max<size_t>(1, count / std::max(1, config_.calibration_calls_per_epoch));
  EpochReport report{.epoch = epochs_, .first_call = first_call};
  report.calls.reserve(count);
  absl::flat_hash_map<int64_t, double> baseline_by_bytes;
  for (size_t call = 0; call < count; ++call) {
    for (int r = 0; r < num_ranks_; ++r) {
      const size_t offset = (r * count + call) * 2;
      per_rank[r] = {all_payloads[offset], all_payloads[offset + 1]};
    }
    const std::vector<double> lags = LagsFromTimings(per_rank, config_.lag_source);
    detector_.Observe(lags);
    // Exploration calls always count: they are what measures the other candidates.
    const bool calibrate =
        config_.calibration_calls_per_epoch > 0 &&
        (calls[call].decision.explored || call % calibration_stride == calibration_stride / 2);
    if (calibrate) Calibrate(calls[call], per_rank, lags);
    // Estimated after calibrating, so the factor includes this call when it was a sample.
    const double saved_s = EstimateSaved(calls[call], per_rank, lags, baseline_by_bytes);
    report.calls.push_back({.bytes = calls[call].bytes,
                            .decision = calls[call].decision,
                            .timing = per_rank,
                            .lag_s = lags,
                            .saved_s = saved_s});
  }
  report.calibration_move = calibration_.CloseEpoch();
  detector_.MedianLags(predicted_arrival_s_);
  if (detector_.straggler() != before) {
    const int rank = detector_.straggler().value_or(before.value_or(0));
    detections_.push_back({.call = first_call + static_cast<int64_t>(count) - 1,
                           .straggler = detector_.straggler(),
                           .persistence = detector_.persistence(rank),
                           .mean_lag_s = detector_.mean_lag(rank)});
  }
  report.straggler = detector_.straggler();
  report.link = link_;
  report.persistence.resize(num_ranks_);
  for (int r = 0; r < num_ranks_; ++r) report.persistence[r] = detector_.persistence(r);
  decisions_by_bytes_.clear();
  priced_by_bytes_.clear();
  ++epochs_;
  return report;
}

}  // namespace stragglar
