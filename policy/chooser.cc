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
  for (Algorithm algorithm : candidates_) {
    const bool is_stragglar = algorithm == Algorithm::kStragglar;
    const std::vector<std::optional<int>> variants =
        is_stragglar ? std::vector<std::optional<int>>(stragglers.begin(), stragglers.end())
                     : std::vector<std::optional<int>>{std::nullopt};
    for (const std::optional<int>& plan_straggler : variants) {
      absl::StatusOr<const Plan*> plan = plans_->For(algorithm, plan_straggler, bytes, link);
      if (!plan.ok()) return plan.status();
      absl::StatusOr<SimulationResult> result =
          plans_->Simulate(**plan, bytes, link, predicted_arrival_s);
      if (!result.ok()) return result.status();
      absl::StatusOr<CalibrationRegime> regime =
          plans_->RegimeOf(**plan, bytes, link, predicted_arrival_s);
      if (!regime.ok()) return regime.status();
      const double factor =
          calibration == nullptr ? 1 : calibration->Factor(algorithm, size, *regime);
      const int samples =
          calibration == nullptr ? 0 : calibration->Samples(algorithm, size, *regime);
      const double after_s = result->after_last_arrival_s * factor;
      const Choice choice{
          .algorithm = algorithm,
          .straggler = plan_straggler,
          .predicted_s = result->completion_s - result->after_last_arrival_s + after_s};
      if (plan_straggler == variants.front()) {
        priced.push_back({.algorithm = algorithm,
                          .straggler = plan_straggler,
                          .predicted_s = choice.predicted_s,
                          .samples = samples});
      }
      if (is_stragglar && !stragglar_choosable) continue;
      if (!default_choice.has_value()) {
        default_choice = choice;
        default_after_last_arrival_s = after_s;
        default_samples = samples;
      }
      if (!best.has_value() || choice.predicted_s < best->predicted_s) {
        best = choice;
        best_samples = samples;
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
