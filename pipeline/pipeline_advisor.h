// The online advisor: once the link monitor (pipeline/link_monitor.h) names a persistently slow
// link between adjacent pipeline stages, the warm-up counts a training loop should switch to,
// found by the search (pipeline/pipeline_search.h) on the stages' measured forward and backward
// times with that link's measured delay. The search's counts, not PipeMorph's closed form, since
// the closed form falls short when memory is tight (docs/pipeline.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/link_monitor.h"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/pipeline_search.h"

namespace stragglar {

struct PipelineAdvice {
  Link slow_link;
  double delay_s = 0;               // the slow link's mean delay in the epoch
  std::vector<int> warmup;          // recommended, one per stage (stage = rank)
  std::vector<int> default_warmup;  // 1F1B's
  double iteration_s = 0;           // predicted with `warmup`
  double default_iteration_s = 0;   // predicted with 1F1B's counts
  std::string method;               // how the search found `warmup`
};

// nullopt when `report` names no slow link, or names one between stages that are not adjacent
// (not a pipeline link). `stages`: the measured per-stage forward and backward times and the
// micro-batches (its link delays are ignored: the report's are used). `previous`: the counts
// advised before (empty: none); they stay advised while they are predicted within
// `keep_within` of the best, so that measurement noise does not make the advice flap between
// counts that are as good. InvalidArgument when `stages` is not a valid spec or the report's links
// do not fit it.
absl::StatusOr<std::optional<PipelineAdvice>> AdviseWarmup(const LinkEpochReport& report,
                                                           const PipelineSpec& stages,
                                                           int memory_microbatches,
                                                           const std::vector<int>& previous = {},
                                                           double keep_within = 0.02);

// The advice file's JSON (STRAGGLAR_PIPELINE_ADVICE_FILE): {"slow_link": {"src", "dst"},
// "delay_s", "warmup": [...], "default_warmup": [...], "iteration_s", "default_iteration_s",
// "speedup", "method"}.
std::string AdviceJson(const PipelineAdvice& advice);

}  // namespace stragglar
