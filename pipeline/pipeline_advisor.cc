#include "pipeline/pipeline_advisor.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace stragglar {

absl::StatusOr<std::optional<PipelineAdvice>> AdviseWarmup(const LinkEpochReport& report,
                                                           const PipelineSpec& stages,
                                                           int memory_microbatches,
                                                           const std::vector<int>& previous,
                                                           double keep_within) {
  PipelineSpec spec = stages;
  spec.link_delay_s.assign(std::max(spec.stages() - 1, 0), 0);
  if (absl::Status valid = ValidatePipelineSpec(spec); !valid.ok()) return valid;
  if (!report.slow_link.has_value()) return std::nullopt;
  const Link slow = *report.slow_link;
  if (std::abs(slow.src - slow.dst) != 1) return std::nullopt;
  if (std::max(slow.src, slow.dst) >= spec.stages() || std::min(slow.src, slow.dst) < 0) {
    return absl::InvalidArgumentError(absl::StrCat("slow link ", slow.src, "->", slow.dst,
                                                   " is outside ", spec.stages(), " stages"));
  }
  PipelineAdvice advice{.slow_link = slow};
  for (const LinkSummary& summary : report.links) {
    if (summary.link == slow) advice.delay_s = summary.mean_delay_s;
  }
  spec.link_delay_s[std::min(slow.src, slow.dst)] = advice.delay_s;
  absl::StatusOr<WarmupSearchResult> best = SearchWarmup(spec, memory_microbatches);
  if (!best.ok()) return best.status();
  advice.warmup = best->warmup;
  advice.iteration_s = best->timing.iteration_s;
  advice.method = best->method;
  if (static_cast<int>(previous.size()) == spec.stages() && previous != best->warmup) {
    absl::StatusOr<PipelineTiming> kept = SimulatePipeline(spec, previous);
    if (kept.ok() && kept->iteration_s <= best->timing.iteration_s * (1 + keep_within)) {
      advice.warmup = previous;
      advice.iteration_s = kept->iteration_s;
      advice.method =
          absl::StrFormat("kept: within %g%% of the best (%s)", 100 * keep_within, best->method);
    }
  }
  advice.default_warmup = DefaultWarmup(spec, memory_microbatches);
  absl::StatusOr<PipelineTiming> baseline = SimulatePipeline(spec, advice.default_warmup);
  if (!baseline.ok()) return baseline.status();
  advice.default_iteration_s = baseline->iteration_s;
  return advice;
}

std::string AdviceJson(const PipelineAdvice& advice) {
  const nlohmann::json json = {
      {"slow_link", {{"src", advice.slow_link.src}, {"dst", advice.slow_link.dst}}},
      {"delay_s", advice.delay_s},
      {"warmup", advice.warmup},
      {"default_warmup", advice.default_warmup},
      {"iteration_s", advice.iteration_s},
      {"default_iteration_s", advice.default_iteration_s},
      {"speedup", advice.iteration_s > 0 ? advice.default_iteration_s / advice.iteration_s : 1.0},
      {"method", advice.method},
  };
  return json.dump(1) + "\n";
}

}  // namespace stragglar
