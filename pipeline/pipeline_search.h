// The best warm-up counts for a pipeline under an activation-memory limit, by simulation
// (pipeline/pipeline_schedule.h). Only non-increasing counts can run (others deadlock), so the
// search space is the non-increasing vectors in [1, cap]:
//   - exhaustive when there are at most `exhaustive_limit` of them;
//   - otherwise coordinate descent from the default, the closed-form adapted and the
//     memory-filling counts: each stage in turn takes the best count its neighbours allow, until a
//     sweep improves nothing. It is never worse than its starting points.
// Both stop early at counts that reach the lower bound (PipelineLowerBound), which are optimal.
// Ties go to the counts that hold fewer activations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/pipeline_schedule.h"

namespace stragglar {

struct WarmupSearchResult {
  std::vector<int> warmup;
  PipelineTiming timing;
  std::string method;     // "exhaustive" or "coordinate descent"
  int64_t evaluated = 0;  // schedules simulated
  bool at_bound = false;  // reaches PipelineLowerBound: provably optimal
};

// `memory_microbatches`: activations a stage can hold (0: unlimited).
absl::StatusOr<WarmupSearchResult> SearchWarmup(const PipelineSpec& spec, int memory_microbatches,
                                                int64_t exhaustive_limit = 200000);

// How many non-increasing count vectors of `stages` values in [1, cap] there are, saturating at
// `limit` + 1.
int64_t NonIncreasingCount(int stages, int cap, int64_t limit);

}  // namespace stragglar
