#include "policy/chooser.h"

#include <algorithm>

#include "absl/status/status.h"
#include "kernels/synthesizers.h"

namespace stragglar {

Chooser::Chooser(int num_ranks, std::vector<Algorithm> candidates, double min_gain,
                 double calibrated_min_gain)
    : num_ranks_(num_ranks),
      candidates_(std::move(candidates)),
      min_gain_(min_gain),
      calibrated_min_gain_(calibrated_min_gain) {}

absl::StatusOr<const Plan*> Chooser::PlanFor(Algorithm algorithm, std::optional<int> straggler) {
  const std::pair<Algorithm, int> key = {algorithm, straggler.value_or(-1)};
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  absl::StatusOr<Plan> plan = SynthesizePlan(algorithm, num_ranks_, straggler);
  if (!plan.ok()) return plan.status();
  return &plans_.emplace(key, *std::move(plan)).first->second;
}

absl::StatusOr<Choice> Chooser::Choose(double bytes, absl::Span<const double> predicted_arrival_s,
                                       std::optional<int> straggler, const LinkModel& link,
                                       const Calibration* calibration) {
  // StragglAR's straggler: the named one, and the rank predicted to arrive last.
  std::vector<int> stragglers;
  if (straggler.has_value()) stragglers.push_back(*straggler);
  if (!predicted_arrival_s.empty()) {
    const int latest =
        static_cast<int>(std::max_element(predicted_arrival_s.begin(), predicted_arrival_s.end()) -
                         predicted_arrival_s.begin());
    if (straggler.has_value() && latest != *straggler) stragglers.push_back(latest);
  }
  const int64_t size = static_cast<int64_t>(bytes);
  auto samples = [&](Algorithm algorithm) {
    return calibration == nullptr ? 0 : calibration->Samples(algorithm, size);
  };
  std::optional<Choice> default_choice;  // the first candidate that applies
  double default_after_last_arrival_s = 0;
  std::optional<Choice> best;
  for (Algorithm algorithm : candidates_) {
    const bool is_stragglar = algorithm == Algorithm::kStragglar;
    const std::vector<std::optional<int>> variants =
        is_stragglar ? std::vector<std::optional<int>>(stragglers.begin(), stragglers.end())
                     : std::vector<std::optional<int>>{std::nullopt};
    for (const std::optional<int>& plan_straggler : variants) {
      absl::StatusOr<const Plan*> plan = PlanFor(algorithm, plan_straggler);
      if (!plan.ok()) return plan.status();
      absl::StatusOr<SimulationResult> result =
          SimulatePlan(**plan, bytes, link, predicted_arrival_s);
      if (!result.ok()) return result.status();
      const double factor = calibration == nullptr ? 1 : calibration->Factor(algorithm, size);
      const double after_s = result->after_last_arrival_s * factor;
      const Choice choice{
          .algorithm = algorithm,
          .straggler = plan_straggler,
          .predicted_s = result->completion_s - result->after_last_arrival_s + after_s};
      if (!default_choice.has_value()) {
        default_choice = choice;
        default_after_last_arrival_s = after_s;
      }
      if (!best.has_value() || choice.predicted_s < best->predicted_s) best = choice;
    }
  }
  if (!default_choice.has_value()) {
    return absl::InvalidArgumentError("no candidate algorithm applies");
  }
  // Leave the default only for a predicted gain larger than the model's error, which scales with
  // the collective's own time (after the last arrival), not with the wait for the straggler.
  const bool calibrated = samples(default_choice->algorithm) >= Calibration::kOwnSamples &&
                          samples(best->algorithm) >= Calibration::kOwnSamples;
  const double min_gain = calibrated ? calibrated_min_gain_ : min_gain_;
  if (default_choice->predicted_s - best->predicted_s <= min_gain * default_after_last_arrival_s) {
    best = default_choice;
  }
  best->baseline_predicted_s = default_choice->predicted_s;
  return *best;
}

}  // namespace stragglar
