#include "policy/chooser.h"

#include "absl/status/status.h"
#include "kernels/synthesizers.h"

namespace stragglar {

Chooser::Chooser(int num_ranks, std::vector<Algorithm> candidates, double min_gain)
    : num_ranks_(num_ranks), candidates_(std::move(candidates)), min_gain_(min_gain) {}

absl::StatusOr<const Plan*> Chooser::PlanFor(Algorithm algorithm, std::optional<int> straggler) {
  const std::pair<Algorithm, int> key = {algorithm, straggler.value_or(-1)};
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  absl::StatusOr<Plan> plan = SynthesizePlan(algorithm, num_ranks_, straggler);
  if (!plan.ok()) return plan.status();
  return &plans_.emplace(key, *std::move(plan)).first->second;
}

absl::StatusOr<Choice> Chooser::Choose(double bytes, absl::Span<const double> predicted_arrival_s,
                                       std::optional<int> straggler, const LinkModel& link) {
  std::optional<Choice> default_choice;  // the first candidate that applies
  double default_after_last_arrival_s = 0;
  std::optional<Choice> best;
  for (Algorithm algorithm : candidates_) {
    const bool is_stragglar = algorithm == Algorithm::kStragglar;
    if (is_stragglar && !straggler.has_value()) continue;
    const std::optional<int> plan_straggler = is_stragglar ? straggler : std::nullopt;
    absl::StatusOr<const Plan*> plan = PlanFor(algorithm, plan_straggler);
    if (!plan.ok()) return plan.status();
    absl::StatusOr<SimulationResult> result =
        SimulatePlan(**plan, bytes, link, predicted_arrival_s);
    if (!result.ok()) return result.status();
    const Choice choice{algorithm, plan_straggler, result->completion_s, 0};
    if (!default_choice.has_value()) {
      default_choice = choice;
      default_after_last_arrival_s = result->after_last_arrival_s;
    }
    if (!best.has_value() || choice.predicted_s < best->predicted_s) best = choice;
  }
  if (!default_choice.has_value()) {
    return absl::InvalidArgumentError("no candidate algorithm applies");
  }
  // Leave the default only for a predicted gain larger than the model's error, which scales with
  // the collective's own time (after the last arrival), not with the wait for the straggler.
  if (default_choice->predicted_s - best->predicted_s <= min_gain_ * default_after_last_arrival_s) {
    best = default_choice;
  }
  best->baseline_predicted_s = default_choice->predicted_s;
  return *best;
}

}  // namespace stragglar
