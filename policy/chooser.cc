#include "policy/chooser.h"

#include "absl/status/status.h"
#include "kernels/synthesizers.h"

namespace stragglar {

Chooser::Chooser(int num_ranks, std::vector<Algorithm> candidates)
    : num_ranks_(num_ranks), candidates_(std::move(candidates)) {}

absl::StatusOr<const Plan*> Chooser::PlanFor(Algorithm algorithm, std::optional<int> straggler) {
  const std::pair<Algorithm, int> key = {algorithm, straggler.value_or(-1)};
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  absl::StatusOr<Plan> plan = SynthesizePlan(algorithm, num_ranks_, straggler);
  if (!plan.ok()) return plan.status();
  return &plans_.emplace(key, *std::move(plan)).first->second;
}

absl::StatusOr<Choice> Chooser::Choose(double bytes, absl::Span<const double> predicted_arrival_s,
                                       std::optional<int> straggler, const LinkModel& link) {
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
    if (!best.has_value()) {
      best = Choice{algorithm, plan_straggler, result->completion_s, result->completion_s};
    } else if (result->completion_s < best->predicted_s) {
      best->algorithm = algorithm;
      best->straggler = plan_straggler;
      best->predicted_s = result->completion_s;
    }
  }
  if (!best.has_value()) return absl::InvalidArgumentError("no candidate algorithm applies");
  return *best;
}

}  // namespace stragglar
