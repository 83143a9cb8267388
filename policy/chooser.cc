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
  return RegimeFromPhase(plan, arrival_s, [&]() -> absl::StatusOr<double> {
    absl::StatusOr<SimulationResult> simulated =
        SimulateRounds(plan, {}, 0, plan.pre_arrival_rounds, bytes, link,
                       std::vector<double>(arrival_s.size(), 0.0));
    if (!simulated.ok()) return simulated.status();
    return simulated->completion_s;
  });
}

absl::StatusOr<Choice> Chooser::Choose(double bytes, absl::Span<const double> predicted_arrival_s,
                                       std::optional<int> straggler, const LinkModel& link,
                                       const Calibration* calibration) {
  // StragglAR's straggler: the named one, and the rank predicted to arrive last. With none named,
  // StragglAR around the latest rank is priced for exploration but cannot be chosen.
  std::vector<int> stragglers;
  if (straggler.has_value()) stragglers.push_back(*straggler);
  const bool stragglar_choosable = straggler.has_value();
  if (!predicted_arrival_s.empty()) {
    const int latest =
        static_cast<int>(std::max_element(predicted_arrival_s.begin(), predicted_arrival_s.end()) -
                         predicted_arrival_s.begin());
    if (!straggler.has_value() || latest != *straggler) stragglers.push_back(latest);
  }
  const int64_t size = static_cast<int64_t>(bytes);
  std::optional<Choice> default_choice;  // the first candidate that applies
  double default_after_last_arrival_s = 0;
  int default_samples = 0;
  std::optional<Choice> best;
  int best_samples = 0;  // the calibration's samples of best's algorithm in its regime
  std::vector<CandidatePrice> priced;
  // One candidate priced: its choice, the calibration's samples of it, its time after the last
  // arrival (calibrated).
  struct Priced {
    Choice choice;
    int samples = 0;
    double after_s = 0;
  };
  const auto price = [&](Algorithm algorithm, std::optional<int> plan_straggler,
                         std::optional<StragglarShape> shape) -> absl::StatusOr<Priced> {
    absl::StatusOr<const Plan*> plan = shape.has_value()
                                           ? plans_->WithShape(algorithm, plan_straggler, *shape)
                                           : plans_->For(algorithm, plan_straggler, bytes, link);
    if (!plan.ok()) return plan.status();
    absl::StatusOr<SimulationResult> result =
        plans_->Simulate(**plan, bytes, link, predicted_arrival_s);
    if (!result.ok()) return result.status();
    absl::StatusOr<CalibrationRegime> regime =
        plans_->RegimeOf(**plan, bytes, link, predicted_arrival_s);
    if (!regime.ok()) return regime.status();
    const double factor =
        calibration == nullptr ? 1 : calibration->Factor(algorithm, size, *regime);
    const int samples = calibration == nullptr ? 0 : calibration->Samples(algorithm, size, *regime);
    const double after_s = result->after_last_arrival_s * factor;
    return Priced{
        .choice = {.algorithm = algorithm,
                   .straggler = plan_straggler,
                   .shape = shape,
                   .predicted_s = result->completion_s - result->after_last_arrival_s + after_s},
        .samples = samples,
        .after_s = after_s};
  };
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
      absl::StatusOr<Priced> priced_one =
          price(algorithm, plan_straggler,
                is_stragglar ? std::optional<StragglarShape>(shapes.front()) : std::nullopt);
      if (!priced_one.ok()) return priced_one.status();
      // StragglAR: another shape replaces the flat schedule only for a gain above the model's
      // error.
      const double bar_s = priced_one->choice.predicted_s - kShapeMinGain * priced_one->after_s;
      for (size_t s = 1; is_stragglar && s < shapes.size(); ++s) {
        absl::StatusOr<Priced> other = price(algorithm, plan_straggler, shapes[s]);
        if (!other.ok()) return other.status();
        if (other->choice.predicted_s < std::min(bar_s, priced_one->choice.predicted_s)) {
          priced_one = *std::move(other);
        }
      }
      const Choice& choice = priced_one->choice;
      if (plan_straggler == variants.front()) {
        priced.push_back({.algorithm = algorithm,
                          .straggler = plan_straggler,
                          .shape = choice.shape,
                          .predicted_s = choice.predicted_s,
                          .samples = priced_one->samples});
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
