#include "policy/chooser.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"

namespace stragglar {

Chooser::Chooser(PlanCache& plans, std::vector<Algorithm> candidates, double min_gain,
                 double calibrated_min_gain)
    : plans_(&plans),
      candidates_(std::move(candidates)),
      min_gain_(min_gain),
      calibrated_min_gain_(calibrated_min_gain) {}

absl::StatusOr<CalibrationRegime> Chooser::RegimeOf(const Plan& plan, double bytes,
                                                    const LinkModel& link,
                                                    absl::Span<const double> arrival_s) {
  return RegimeFromPhase(HeaderOf(plan), arrival_s, [&](double gap_s) -> absl::StatusOr<bool> {
    absl::StatusOr<SimulationResult> simulated =
        SimulateRounds(plan, {}, 0, plan.pre_arrival_rounds, bytes, link,
                       std::vector<double>(arrival_s.size(), 0.0));
    if (!simulated.ok()) return simulated.status();
    return gap_s >= simulated->completion_s;
  });
}

absl::StatusOr<Chooser::Priced> Chooser::Price(const Call& call, Algorithm algorithm,
                                               std::optional<int> plan_straggler,
                                               std::optional<StragglarShape> shape,
                                               Pricing pricing) {
  absl::StatusOr<PricedPlan> plan =
      shape.has_value() ? plans_->WithShape(algorithm, plan_straggler, *shape)
                        : plans_->For(algorithm, plan_straggler, call.bytes, *call.link);
  if (!plan.ok()) return plan.status();
  double after_last_arrival_s = 0;
  if (pricing == Pricing::kExact) {
    absl::StatusOr<SimulationResult> result =
        plans_->Simulate(*plan, call.bytes, *call.link, call.predicted_arrival_s);
    if (!result.ok()) return result.status();
    after_last_arrival_s = result->after_last_arrival_s;
  } else {
    absl::StatusOr<double> at_least =
        plans_->AfterLastArrivalAtLeast(*plan, call.bytes, *call.link, call.predicted_arrival_s);
    if (!at_least.ok()) return at_least.status();
    after_last_arrival_s = *at_least;
  }
  absl::StatusOr<CalibrationRegime> regime =
      plans_->RegimeOf(*plan, call.bytes, *call.link, call.predicted_arrival_s);
  if (!regime.ok()) return regime.status();
  const int64_t size = static_cast<int64_t>(call.bytes);
  const Calibration* calibration = call.calibration;
  const double factor = calibration == nullptr ? 1 : calibration->Factor(algorithm, size, *regime);
  const double after_s = after_last_arrival_s * factor;
  return Priced{
      .choice = {.algorithm = algorithm,
                 .straggler = plan_straggler,
                 .shape = shape,
                 .predicted_s = call.arrivals_spread_s + after_s},
      .samples = calibration == nullptr ? 0 : calibration->Samples(algorithm, size, *regime),
      .guessed = calibration != nullptr && calibration->Guessed(algorithm, size, *regime),
      .after_s = after_s};
}

absl::StatusOr<Chooser::Priced> Chooser::PriceShapes(const Call& call,
                                                     std::optional<int> plan_straggler,
                                                     absl::Span<const StragglarShape> shapes) {
  // The flat schedule stays unless another shape is faster by kShapeMinGain of its time after the
  // last arrival; then the fastest other runs (the first on ties). The others are priced first:
  // when the fastest is under that bar even at the least the flat schedule can cost, its exact
  // price (a million transfers to simulate at 1024 ranks) cannot change the outcome.
  absl::StatusOr<std::optional<Priced>> fastest_other = FastestOther(call, plan_straggler, shapes);
  if (!fastest_other.ok()) return fastest_other.status();
  return FlatOrFastestOther(call, plan_straggler, shapes.front(), *std::move(fastest_other));
}

absl::StatusOr<std::optional<Chooser::Priced>> Chooser::FastestOther(
    const Call& call, std::optional<int> plan_straggler, absl::Span<const StragglarShape> shapes) {
  // The others' least prices first, when there are several: one whose least is already over the
  // fastest exact price cannot be the fastest (nor tie it), so it is never priced exactly. On
  // nodes that spares log-depth StragglAR's post-arrival profile around each new rank predicted
  // last, which hierarchical StragglAR beats.
  std::vector<std::pair<double, size_t>> by_least;  // (least predicted_s, index in shapes)
  for (size_t s = 1; s < shapes.size(); ++s) {
    double least_s = 0;
    if (shapes.size() > 2) {
      absl::StatusOr<Priced> least =
          Price(call, Algorithm::kStragglar, plan_straggler, shapes[s], Pricing::kAtLeast);
      if (!least.ok()) return least.status();
      least_s = least->choice.predicted_s;
    }
    by_least.emplace_back(least_s, s);
  }
  std::stable_sort(by_least.begin(), by_least.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::optional<Priced> fastest;
  size_t fastest_index = 0;
  for (const auto& [least_s, s] : by_least) {
    if (fastest.has_value() && least_s > fastest->choice.predicted_s) break;
    absl::StatusOr<Priced> other = Price(call, Algorithm::kStragglar, plan_straggler, shapes[s]);
    if (!other.ok()) return other.status();
    // The fastest; of equals, the first in `shapes`.
    if (!fastest.has_value() || other->choice.predicted_s < fastest->choice.predicted_s ||
        (other->choice.predicted_s == fastest->choice.predicted_s && s < fastest_index)) {
      fastest = *std::move(other);
      fastest_index = s;
    }
  }
  return fastest;
}

absl::StatusOr<Chooser::Priced> Chooser::FlatOrFastestOther(const Call& call,
                                                            std::optional<int> plan_straggler,
                                                            const StragglarShape& flat_shape,
                                                            std::optional<Priced> fastest_other) {
  const auto other_wins = [&](const Priced& flat) {
    return fastest_other.has_value() &&
           fastest_other->choice.predicted_s <
               std::min(flat.choice.predicted_s - kShapeMinGain * flat.after_s,
                        flat.choice.predicted_s);
  };
  if (fastest_other.has_value()) {
    absl::StatusOr<Priced> least =
        Price(call, Algorithm::kStragglar, plan_straggler, flat_shape, Pricing::kAtLeast);
    if (!least.ok()) return least.status();
    if (other_wins(*least)) return *fastest_other;
  }
  absl::StatusOr<Priced> flat = Price(call, Algorithm::kStragglar, plan_straggler, flat_shape);
  if (!flat.ok()) return flat.status();
  return other_wins(*flat) ? *fastest_other : *flat;
}

absl::StatusOr<Choice> Chooser::Choose(double bytes, absl::Span<const double> predicted_arrival_s,
                                       std::optional<int> straggler, const LinkModel& link,
                                       const Calibration* calibration) {
  // StragglAR's straggler: the named one, the rank behind a slow link (LinkModel::slow_rank:
  // StragglAR around it moves the least any AllReduce can over that link, its buffer in and the
  // result out), and the rank predicted to arrive last. With neither of the first two, StragglAR
  // around the latest rank is priced for exploration but cannot be chosen.
  std::vector<int> stragglers;
  const auto add_straggler = [&stragglers](int rank) {
    if (std::find(stragglers.begin(), stragglers.end(), rank) == stragglers.end()) {
      stragglers.push_back(rank);
    }
  };
  if (straggler.has_value()) add_straggler(*straggler);
  if (link.has_slow_rank()) add_straggler(link.slow_rank);
  const bool stragglar_choosable = straggler.has_value() || link.has_slow_rank();
  if (!predicted_arrival_s.empty()) {
    add_straggler(
        static_cast<int>(std::max_element(predicted_arrival_s.begin(), predicted_arrival_s.end()) -
                         predicted_arrival_s.begin()));
  }
  std::optional<Choice> default_choice;  // the first candidate that applies
  double default_after_last_arrival_s = 0;
  int default_samples = 0;
  std::optional<Choice> best;
  int best_samples = 0;  // the calibration's samples of best's algorithm in its regime
  std::vector<CandidatePrice> priced;
  const Call call{
      .bytes = bytes,
      .predicted_arrival_s = predicted_arrival_s,
      .link = &link,
      .calibration = calibration,
      .arrivals_spread_s =
          predicted_arrival_s.empty()
              ? 0
              : *std::max_element(predicted_arrival_s.begin(), predicted_arrival_s.end()) -
                    *std::min_element(predicted_arrival_s.begin(), predicted_arrival_s.end())};
  // StragglAR's shapes, asked for only when StragglAR is a candidate (each is a plan to build).
  std::vector<StragglarShape> shapes;
  if (std::find(candidates_.begin(), candidates_.end(), Algorithm::kStragglar) !=
      candidates_.end()) {
    absl::StatusOr<std::vector<StragglarShape>> offered = plans_->StragglarShapes(bytes, link);
    if (!offered.ok()) return offered.status();
    shapes = *std::move(offered);
  }
  for (Algorithm algorithm : candidates_) {
    const bool is_stragglar = algorithm == Algorithm::kStragglar;
    const std::vector<std::optional<int>> variants =
        is_stragglar ? std::vector<std::optional<int>>(stragglers.begin(), stragglers.end())
                     : std::vector<std::optional<int>>{std::nullopt};
    for (const std::optional<int>& plan_straggler : variants) {
      absl::StatusOr<Priced> priced_one = is_stragglar
                                              ? PriceShapes(call, plan_straggler, shapes)
                                              : Price(call, algorithm, std::nullopt, std::nullopt);
      if (!priced_one.ok()) return priced_one.status();
      const Choice& choice = priced_one->choice;
      if (plan_straggler == variants.front()) {
        priced.push_back({.algorithm = algorithm,
                          .straggler = plan_straggler,
                          .shape = choice.shape,
                          .predicted_s = choice.predicted_s,
                          .samples = priced_one->samples,
                          .guessed = priced_one->guessed});
      }
      if (is_stragglar && !stragglar_choosable) continue;
      if (!default_choice.has_value()) {
        default_choice = choice;
        default_after_last_arrival_s = priced_one->after_s;
        default_samples = priced_one->samples;
      }
      if (!best.has_value() || choice.predicted_s < best->predicted_s) {
        best = choice;
        best_samples = priced_one->samples;
      }
    }
  }
  if (!default_choice.has_value()) {
    return absl::InvalidArgumentError("no candidate algorithm applies");
  }
  // Leave the default only for a predicted gain larger than the model's error, which scales with
  // the collective's own time (after the last arrival), not with the wait for the straggler.
  const bool calibrated =
      default_samples >= Calibration::kOwnSamples && best_samples >= Calibration::kOwnSamples;
  const double min_gain = calibrated ? calibrated_min_gain_ : min_gain_;
  if (default_choice->predicted_s - best->predicted_s <= min_gain * default_after_last_arrival_s) {
    best = default_choice;
  }
  best->baseline_predicted_s = default_choice->predicted_s;
  best->priced = std::move(priced);
  return *best;
}

}  // namespace stragglar
