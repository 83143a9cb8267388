#include "runtime/runtime_core.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {

namespace {

// The shortest duration over the ranks: about the collective's own time (the last rank to arrive
// waits least), needing no shared clock. Infinity when there are no durations.
double ShortestDuration(absl::Span<const CallTiming> timing) {
  double shortest = std::numeric_limits<double>::infinity();
  for (const CallTiming& each : timing) shortest = std::min(shortest, each.duration_s);
  return shortest;
}

}  // namespace

absl::StatusOr<RuntimeCore> RuntimeCore::Create(RuntimeConfig config, int rank, int num_ranks,
                                                LinkModel link) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(absl::StrCat("need at least 2 ranks, got ", num_ranks));
  }
  if (rank < 0 || rank >= num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside [0, ", num_ranks, ")"));
  }
  if (config.epoch_calls < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch_calls must be at least 1, got ", config.epoch_calls));
  }
  if (config.candidates.empty()) return absl::InvalidArgumentError("no candidate algorithms");
  return RuntimeCore(std::move(config), rank, num_ranks, link);
}

RuntimeCore::RuntimeCore(RuntimeConfig config, int rank, int num_ranks, LinkModel link)
    : config_(std::move(config)),
      rank_(rank),
      num_ranks_(num_ranks),
      link_(link),
      detector_(num_ranks, config_.detector),
      chooser_(num_ranks, config_.candidates, config_.min_predicted_gain,
               config_.calibrated_min_predicted_gain, config_.stragglar_pieces),
      predicted_arrival_s_(num_ranks, 0.0) {
  epoch_.reserve(config_.epoch_calls);
}

// Until the first exchange (or a loaded state) nothing is known, so there is nothing to adapt to.
bool RuntimeCore::Adapting(int64_t bytes) const {
  return config_.mode == RuntimeMode::kAdapt && bytes >= config_.min_bytes &&
         (epochs_ > 0 || warm_);
}

absl::StatusOr<CallDecision> RuntimeCore::Decide(int64_t bytes) {
  absl::StatusOr<CallDecision> decision = Choose(bytes);
  if (decision.ok()) pending_ = {*decision, bytes};
  return decision;
}

absl::StatusOr<CallDecision> RuntimeCore::Choose(int64_t bytes) {
  const int64_t call = next_call_++;
  absl::StatusOr<CallDecision> chosen = Preview(bytes);
  if (!chosen.ok()) return chosen.status();
  chosen->call = call;
  if (Adapting(bytes) && config_.explore_every > 0 &&
      call % config_.explore_every == config_.explore_every / 2) {
    return Explore(*chosen, bytes);
  }
  return chosen;
}

absl::StatusOr<CallDecision> RuntimeCore::Preview(int64_t bytes) {
  CallDecision decision{.call = next_call_, .algorithm = config_.default_algorithm};
  if (!Adapting(bytes)) return decision;
  auto it = decisions_by_bytes_.find(bytes);
  if (it == decisions_by_bytes_.end()) {
    absl::StatusOr<Choice> choice =
        chooser_.Choose(static_cast<double>(bytes), predicted_arrival_s_, detector_.straggler(),
                        link_, &calibration_);
    if (!choice.ok()) return choice.status();
    decision.algorithm = choice->algorithm;
    decision.straggler = choice->straggler;
    decision.predicted_s = choice->predicted_s;
    decision.default_predicted_s = choice->baseline_predicted_s;
    it = decisions_by_bytes_.emplace(bytes, decision).first;
    priced_by_bytes_[bytes] = std::move(choice->priced);
  }
  CallDecision chosen = it->second;
  chosen.call = next_call_;
  return chosen;
}

// The candidate other than `chosen` with the fewest calibration samples on this size, in the
// regime the predicted arrivals put it in (the first in candidate order on ties); StragglAR around
// the named straggler, or else the rank predicted last. Candidates measured too costly to try
// (see RuntimeConfig::explore_max_cost) wait for their slot; with none left, `chosen` runs.
CallDecision RuntimeCore::Explore(const CallDecision& chosen, int64_t bytes) const {
  auto priced = priced_by_bytes_.find(bytes);
  if (priced == priced_by_bytes_.end()) return chosen;
  const int64_t slot = chosen.call / config_.explore_every;
  const bool costly_slot =
      config_.costly_explore_every <= 1 || slot % config_.costly_explore_every == 0;
  CallDecision explored = chosen;
  int fewest = std::numeric_limits<int>::max();
  for (const CandidatePrice& candidate : priced->second) {
    if (candidate.algorithm == chosen.algorithm) continue;
    const bool costly = candidate.samples >= Calibration::kOwnSamples &&
                        candidate.predicted_s > (1 + config_.explore_max_cost) * chosen.predicted_s;
    if ((costly && !costly_slot) || candidate.samples >= fewest) continue;
    fewest = candidate.samples;
    explored.algorithm = candidate.algorithm;
    explored.straggler = candidate.straggler;
    explored.explored = true;
    explored.predicted_s = 0;  // not modelled: the chooser priced the other plan
  }
  return explored;
}

LearnedState RuntimeCore::ExportState() const {
  return {.num_ranks = num_ranks_,
          .calibration = calibration_,
          .predicted_lag_s = predicted_arrival_s_,
          .straggler = detector_.straggler()};
}

absl::Status RuntimeCore::ImportState(const LearnedState& state) {
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

void RuntimeCore::Record(const CallTiming& timing, bool ran_decision) {
  EpochCall call{.timing = timing};
  if (pending_.has_value()) {
    call.decision = pending_->first;
    call.bytes = pending_->second;
    call.measured = ran_decision;
    pending_.reset();
  }
  epoch_.push_back(call);
}

void RuntimeCore::Record(const CallTiming& timing, const CallDecision& ran) {
  if (pending_.has_value()) {
    const int64_t call = pending_->first.call;
    pending_->first = ran;
    pending_->first.call = call;
  }
  Record(timing);
}

std::vector<double> RuntimeCore::EpochPayload() const {
  std::vector<double> payload;
  payload.reserve(2 * epoch_.size());
  for (const EpochCall& call : epoch_) {
    payload.push_back(call.timing.arrival_s);
    payload.push_back(call.timing.duration_s);
  }
  return payload;
}

// The measured cost of a call is its shortest duration: the last rank to arrive waits least, so
// its duration is about the collective's own time, and it needs no shared clock. The model prices
// the same plan on the same call's lags and gives its own shortest duration; their ratio corrects
// the model.
void RuntimeCore::Calibrate(const EpochCall& call, absl::Span<const CallTiming> timing,
                            absl::Span<const double> lag_s) {
  if (call.bytes <= 0 || !call.measured) return;
  const double measured_s = ShortestDuration(timing);
  if (!(measured_s > 0)) return;  // no durations (e.g. a trace without them)
  // Best effort: a call the model cannot price (it ran, so its plan exists) is just not counted,
  // rather than leaving the epoch half absorbed.
  absl::StatusOr<const Plan*> plan = PlanFor(call.decision, call.bytes);
  if (!plan.ok()) return;
  absl::StatusOr<SimulationResult> predicted =
      SimulatePlan(**plan, static_cast<double>(call.bytes), link_, lag_s);
  if (!predicted.ok()) return;
  // Compare like with like: the model's shortest duration, not its time after the last arrival
  // (the last rank to arrive need not be the last to finish, differently per algorithm).
  double predicted_s = std::numeric_limits<double>::infinity();
  for (size_t r = 0; r < lag_s.size(); ++r) {
    predicted_s = std::min(predicted_s, predicted->finish_s[r] - lag_s[r]);
  }
  const absl::StatusOr<CalibrationRegime> regime =
      Chooser::RegimeOf(**plan, static_cast<double>(call.bytes), link_, lag_s);
  if (!regime.ok()) return;
  calibration_.Add(call.decision.algorithm, call.bytes, predicted_s, measured_s, *regime);
}

double RuntimeCore::EstimateSaved(const EpochCall& call, absl::Span<const CallTiming> timing,
                                  absl::Span<const double> lag_s,
                                  absl::flat_hash_map<int64_t, double>& baseline_by_bytes) {
  const Algorithm baseline = config_.default_algorithm;
  if (call.bytes <= 0 || !call.measured || call.decision.algorithm == baseline) return 0;
  const double measured_s = ShortestDuration(timing);
  if (!(measured_s > 0) || !std::isfinite(measured_s)) return 0;
  auto cached = baseline_by_bytes.find(call.bytes);
  if (cached == baseline_by_bytes.end()) {
    double predicted_s = 0;  // 0: cannot be priced, so no estimate
    absl::StatusOr<const Plan*> plan =
        chooser_.PlanFor(baseline, std::nullopt, static_cast<double>(call.bytes), link_);
    if (plan.ok()) {
      absl::StatusOr<SimulationResult> simulated =
          SimulatePlan(**plan, static_cast<double>(call.bytes), link_, lag_s);
      if (simulated.ok()) {
        predicted_s = std::numeric_limits<double>::infinity();
        for (size_t r = 0; r < lag_s.size(); ++r) {
          predicted_s = std::min(predicted_s, simulated->finish_s[r] - lag_s[r]);
        }
        predicted_s *= calibration_.Factor(baseline, call.bytes);
      }
    }
    cached = baseline_by_bytes.emplace(call.bytes, predicted_s).first;
  }
  return cached->second > 0 ? cached->second - measured_s : 0;
}

std::vector<double> RuntimeCore::PayloadFromTimings(absl::Span<const CallTiming> timings) {
  std::vector<double> payload;
  payload.reserve(2 * timings.size());
  for (const CallTiming& timing : timings) {
    payload.push_back(timing.arrival_s);
    payload.push_back(timing.duration_s);
  }
  return payload;
}

absl::Status RuntimeCore::SealEpoch() {
  if (sealed_.has_value()) {
    return absl::FailedPreconditionError("an epoch is already sealed; absorb it first");
  }
  if (!ExchangeDue()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the epoch holds ", epoch_.size(), " of ", config_.epoch_calls, " calls"));
  }
  const int64_t first_call = next_call_ - static_cast<int64_t>(epoch_.size());
  sealed_ = SealedEpoch{.calls = std::move(epoch_), .first_call = first_call};
  epoch_ = {};
  epoch_.reserve(config_.epoch_calls);
  return absl::OkStatus();
}

absl::Status RuntimeCore::AbsorbEpoch(absl::Span<const double> all_payloads) {
  const std::vector<EpochCall>& epoch = sealed_ ? sealed_->calls : epoch_;
  const size_t calls = epoch.size();
  if (all_payloads.size() != 2 * calls * num_ranks_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epoch exchange: expected ", 2 * calls * num_ranks_, " values (", calls, " calls x ",
        num_ranks_, " ranks), got ", all_payloads.size(), "; ranks disagree on the call count"));
  }
  const std::optional<int> before = detector_.straggler();
  std::vector<CallTiming> per_rank(num_ranks_);
  const size_t calibration_stride =
      std::max<size_t>(1, calls / std::max(1, config_.calibration_calls_per_epoch));
  const int64_t first_call =
      sealed_ ? sealed_->first_call : next_call_ - static_cast<int64_t>(calls);
  EpochReport report{.epoch = epochs_, .first_call = first_call};
  report.calls.reserve(calls);
  absl::flat_hash_map<int64_t, double> baseline_by_bytes;
  for (size_t call = 0; call < calls; ++call) {
    for (int r = 0; r < num_ranks_; ++r) {
      const size_t offset = (r * calls + call) * 2;
      per_rank[r] = {all_payloads[offset], all_payloads[offset + 1]};
    }
    const std::vector<double> lags = LagsFromTimings(per_rank, config_.lag_source);
    detector_.Observe(lags);
    // Exploration calls always count: they are what measures the other candidates.
    const bool calibrate =
        config_.calibration_calls_per_epoch > 0 &&
        (epoch[call].decision.explored || call % calibration_stride == calibration_stride / 2);
    if (calibrate) {
      Calibrate(epoch[call], per_rank, lags);
    }
    // Estimated after calibrating, so the factor includes this call when it was a sample.
    const double saved_s = EstimateSaved(epoch[call], per_rank, lags, baseline_by_bytes);
    report.calls.push_back({.bytes = epoch[call].bytes,
                            .decision = epoch[call].decision,
                            .timing = per_rank,
                            .lag_s = lags,
                            .saved_s = saved_s});
  }
  for (int r = 0; r < num_ranks_; ++r) predicted_arrival_s_[r] = detector_.median_lag(r);
  if (detector_.straggler() != before) {
    const int rank = detector_.straggler().value_or(before.value_or(0));
    detections_.push_back({.call = first_call + static_cast<int64_t>(calls) - 1,
                           .straggler = detector_.straggler(),
                           .persistence = detector_.persistence(rank),
                           .mean_lag_s = detector_.mean_lag(rank)});
  }
  report.straggler = detector_.straggler();
  report.persistence.resize(num_ranks_);
  for (int r = 0; r < num_ranks_; ++r) report.persistence[r] = detector_.persistence(r);
  last_epoch_ = std::move(report);
  decisions_by_bytes_.clear();
  priced_by_bytes_.clear();
  if (sealed_) {
    sealed_.reset();
  } else {
    epoch_.clear();
  }
  ++epochs_;
  return absl::OkStatus();
}

}  // namespace stragglar
