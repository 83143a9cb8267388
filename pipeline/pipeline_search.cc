#include "pipeline/pipeline_search.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace stragglar {
namespace {

// Relative slack under which two iteration times are equal (they are sums of the same inputs in
// different orders).
constexpr double kTie = 1e-12;

class Search {
 public:
  Search(const PipelineSpec& spec, int cap)
      : spec_(spec), cap_(cap), bound_(PipelineLowerBound(spec)) {}

  // Simulates `warmup`, keeps it when it is the best so far, and returns its iteration time.
  double Try(const std::vector<int>& warmup) {
    absl::StatusOr<PipelineTiming> timing = SimulatePipeline(spec_, warmup);
    ++result_.evaluated;
    // Unreachable for non-increasing counts in range, which are all the search makes.
    if (!timing.ok()) return std::numeric_limits<double>::infinity();
    const double seconds = timing->iteration_s;
    if (result_.warmup.empty() || Better(*timing, warmup)) {
      result_.warmup = warmup;
      result_.timing = *std::move(timing);
    }
    return seconds;
  }

  bool AtBound() const {
    return !result_.warmup.empty() && result_.timing.iteration_s <= bound_ * (1 + kTie);
  }

  // Every non-increasing vector, stage by stage from the first, each stage at most the previous.
  void Exhaustive(std::vector<int>& warmup, int stage) {
    if (AtBound()) return;
    if (stage == spec_.stages()) {
      Try(warmup);
      return;
    }
    const int top = stage == 0 ? cap_ : warmup[stage - 1];
    for (int w = 1; w <= top; ++w) {
      warmup[stage] = w;
      Exhaustive(warmup, stage + 1);
    }
  }

  // From `start`, each stage in turn takes the best count in [next stage's, previous stage's],
  // until a sweep changes nothing.
  void Descend(std::vector<int> warmup) {
    double current_s = Try(warmup);
    for (bool changed = true; changed && !AtBound();) {
      changed = false;
      for (int i = 0; i < spec_.stages(); ++i) {
        const int low = i + 1 < spec_.stages() ? warmup[i + 1] : 1;
        const int high = i > 0 ? warmup[i - 1] : cap_;
        int best = warmup[i];
        double best_s = current_s;
        for (int w = low; w <= high; ++w) {
          if (w == warmup[i]) continue;
          std::vector<int> candidate = warmup;
          candidate[i] = w;
          const double seconds = Try(candidate);
          if (seconds < best_s * (1 - kTie) || (seconds <= best_s * (1 + kTie) && w < best)) {
            best = w;
            best_s = seconds;
          }
        }
        if (best != warmup[i]) {
          warmup[i] = best;
          current_s = best_s;
          changed = true;
        }
      }
    }
  }

  WarmupSearchResult& result() {
    result_.at_bound = AtBound();
    return result_;
  }

 private:
  bool Better(const PipelineTiming& timing, const std::vector<int>& warmup) const {
    const double best = result_.timing.iteration_s;
    if (timing.iteration_s < best * (1 - kTie)) return true;
    if (timing.iteration_s > best * (1 + kTie)) return false;
    return std::accumulate(warmup.begin(), warmup.end(), 0) <
           std::accumulate(result_.warmup.begin(), result_.warmup.end(), 0);
  }

  const PipelineSpec& spec_;
  const int cap_;
  const double bound_;
  WarmupSearchResult result_;
};

}  // namespace

int64_t NonIncreasingCount(int stages, int cap, int64_t limit) {
  // C(cap + stages - 1, stages), computed as a running product that stays an integer.
  int64_t count = 1;
  for (int k = 1; k <= stages; ++k) {
    count = count * (cap - 1 + k) / k;
    if (count > limit) return limit + 1;
  }
  return count;
}

absl::StatusOr<WarmupSearchResult> SearchWarmup(const PipelineSpec& spec, int memory_microbatches,
                                                int64_t exhaustive_limit) {
  if (absl::Status valid = ValidatePipelineSpec(spec); !valid.ok()) return valid;
  if (memory_microbatches < 0) {
    return absl::InvalidArgumentError("the memory limit must be >= 0 micro-batches (0: none)");
  }
  const int cap = memory_microbatches > 0 ? std::min(memory_microbatches, spec.microbatches)
                                          : spec.microbatches;
  Search search(spec, cap);
  if (NonIncreasingCount(spec.stages(), cap, exhaustive_limit) <= exhaustive_limit) {
    std::vector<int> warmup(spec.stages(), 1);
    search.Exhaustive(warmup, 0);
    search.result().method = "exhaustive";
  } else {
    search.Descend(DefaultWarmup(spec, memory_microbatches));
    search.Descend(AdaptedWarmup(spec, memory_microbatches));
    search.Descend(std::vector<int>(spec.stages(), cap));
    search.result().method = "coordinate descent";
  }
  return search.result();
}

}  // namespace stragglar
