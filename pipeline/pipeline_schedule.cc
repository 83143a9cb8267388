#include "pipeline/pipeline_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

bool BadTime(double seconds) { return !std::isfinite(seconds) || seconds < 0; }

std::vector<int> Capped(std::vector<int> warmup, const PipelineSpec& spec, int memory) {
  for (int& w : warmup) {
    w = std::min(w, spec.microbatches);
    if (memory > 0) w = std::min(w, memory);
    w = std::max(w, 1);
  }
  return warmup;
}

}  // namespace

std::vector<PipelineOp> StageOrder(int microbatches, int warmup) {
  std::vector<PipelineOp> order;
  order.reserve(2 * microbatches);
  int forwards = 0, backwards = 0;
  while (forwards < warmup) order.push_back({true, forwards++});
  while (forwards < microbatches) {
    order.push_back({false, backwards++});
    order.push_back({true, forwards++});
  }
  while (backwards < microbatches) order.push_back({false, backwards++});
  return order;
}

absl::Status ValidatePipelineSpec(const PipelineSpec& spec) {
  const int stages = spec.stages();
  if (stages < 2) return absl::InvalidArgumentError("a pipeline needs at least 2 stages");
  if (spec.microbatches < 1) return absl::InvalidArgumentError("need at least 1 micro-batch");
  if (static_cast<int>(spec.backward_s.size()) != stages) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.backward_s.size(), " backward times for ", stages, " stages"));
  }
  if (static_cast<int>(spec.link_delay_s.size()) != stages - 1) {
    return absl::InvalidArgumentError(absl::StrCat(spec.link_delay_s.size(), " link delays for ",
                                                   stages, " stages (", stages - 1, " links)"));
  }
  for (int i = 0; i < stages; ++i) {
    if (BadTime(spec.forward_s[i]) || BadTime(spec.backward_s[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", i, "'s times must be finite and >= 0"));
    }
  }
  for (int i = 0; i + 1 < stages; ++i) {
    if (BadTime(spec.link_delay_s[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("link ", i, "-", i + 1, "'s delay must be finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PipelineTiming> SimulatePipeline(const PipelineSpec& spec,
                                                absl::Span<const int> warmup) {
  if (absl::Status valid = ValidatePipelineSpec(spec); !valid.ok()) return valid;
  const int stages = spec.stages();
  const int microbatches = spec.microbatches;
  if (static_cast<int>(warmup.size()) != stages) {
    return absl::InvalidArgumentError(
        absl::StrCat(warmup.size(), " warm-up counts for ", stages, " stages"));
  }
  for (int i = 0; i < stages; ++i) {
    if (warmup[i] < 1 || warmup[i] > microbatches) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", i, "'s warm-up count ", warmup[i],
                                                     " is outside [1, ", microbatches, "]"));
    }
  }
  for (int i = 0; i + 1 < stages; ++i) {
    if (warmup[i + 1] > warmup[i]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "warm-up counts deadlock: stage ", i + 1, " waits for ", warmup[i + 1],
          " forwards but stage ", i, " runs only ", warmup[i], " before its first backward"));
    }
  }
  std::vector<std::vector<PipelineOp>> order(stages);
  for (int i = 0; i < stages; ++i) order[i] = StageOrder(microbatches, warmup[i]);
  // end[i][m]: when F(i, m) (forward_end) or B(i, m) (backward_end) ends; < 0 while not run.
  std::vector<std::vector<double>> forward_end(stages, std::vector<double>(microbatches, -1));
  std::vector<std::vector<double>> backward_end(stages, std::vector<double>(microbatches, -1));
  std::vector<size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0);
  // Sweep the stages, running every op whose input is there, until none is left. With
  // non-increasing counts every sweep runs at least one op, so this ends.
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int i = 0; i < stages; ++i) {
      for (; next[i] < order[i].size(); ++next[i]) {
        const PipelineOp op = order[i][next[i]];
        double ready = 0;
        if (op.forward && i > 0) {
          const double input = forward_end[i - 1][op.microbatch];
          if (input < 0) break;
          ready = input + spec.link_delay_s[i - 1];
        } else if (!op.forward && i + 1 < stages) {
          const double input = backward_end[i + 1][op.microbatch];
          if (input < 0) break;
          ready = input + spec.link_delay_s[i];
        }
        const double start = std::max(free_at[i], ready);
        free_at[i] = start + (op.forward ? spec.forward_s[i] : spec.backward_s[i]);
        (op.forward ? forward_end : backward_end)[i][op.microbatch] = free_at[i];
        // The op's output leaves over link (i, i+1) forward or (i-1, i) backward, if any.
        const int link = op.forward ? (i + 1 < stages ? i : -1) : i - 1;
        if (spec.blocking_sends && link >= 0) free_at[i] += spec.link_delay_s[link];
        progressed = true;
      }
    }
  }
  PipelineTiming timing;
  double busy = 0;
  for (int i = 0; i < stages; ++i) {
    if (next[i] != order[i].size()) {
      return absl::InternalError(absl::StrCat("stage ", i, " stalled at op ", next[i]));
    }
    timing.finish_s.push_back(free_at[i]);
    timing.iteration_s = std::max(timing.iteration_s, free_at[i]);
    busy += microbatches * (spec.forward_s[i] + spec.backward_s[i]);
  }
  timing.bubble_fraction = timing.iteration_s > 0 ? 1 - busy / (stages * timing.iteration_s) : 0;
  return timing;
}

std::vector<int> DefaultWarmup(const PipelineSpec& spec, int memory_microbatches) {
  std::vector<int> warmup(spec.stages());
  for (int i = 0; i < spec.stages(); ++i) warmup[i] = spec.stages() - i;
  return Capped(std::move(warmup), spec, memory_microbatches);
}

std::vector<int> AdaptedWarmup(const PipelineSpec& spec, int memory_microbatches) {
  const int stages = spec.stages();
  std::vector<int> warmup(stages, 1);
  for (int i = stages - 2; i >= 0; --i) {
    const double forward = spec.forward_s[i];
    const int absorb = spec.link_delay_s[i] <= 0 ? 0
                       : forward > 0 ? static_cast<int>(std::ceil(spec.link_delay_s[i] / forward))
                                     : spec.microbatches;
    warmup[i] =
        static_cast<int>(std::min<int64_t>(int64_t{warmup[i + 1]} + absorb + 2, spec.microbatches));
  }
  // The memory cap keeps 1F1B's spacing: stage i holds at most K - i, one more than the stage
  // after it. Capping every stage at K flat would give two neighbours the same count, and a stage
  // whose successor runs as many forwards stalls once per micro-batch in the steady state
  // (docs/pipeline.md measures what that costs).
  if (memory_microbatches > 0) {
    for (int i = 0; i < stages; ++i) warmup[i] = std::min(warmup[i], memory_microbatches - i);
  }
  return Capped(std::move(warmup), spec, memory_microbatches);
}

double PipelineLowerBound(const PipelineSpec& spec) {
  double bound = 0, forward_prefix = 0, backward_prefix = 0;
  for (int i = 0; i < spec.stages(); ++i) {
    const double work = spec.microbatches * (spec.forward_s[i] + spec.backward_s[i]);
    bound = std::max(bound, forward_prefix + work + backward_prefix);
    if (i + 1 < spec.stages()) {
      forward_prefix += spec.forward_s[i] + spec.link_delay_s[i];
      backward_prefix += spec.backward_s[i] + spec.link_delay_s[i];
    }
  }
  return bound;
}

}  // namespace stragglar
