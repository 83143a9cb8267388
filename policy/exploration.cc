#include "policy/exploration.h"

#include <algorithm>
#include <limits>

#include "policy/calibration.h"

namespace stragglar {

bool IsExplorationCall(int64_t call, const RuntimeConfig& config) {
  return config.explore_every > 0 && call % config.explore_every == config.explore_every / 2;
}

bool IsRemeasuringCall(int64_t call, const RuntimeConfig& config) {
  const int64_t first = std::max(0, config.epoch_calls - Calibration::kOwnSamples) / 2;
  const int64_t in_epoch = call % config.epoch_calls;
  return config.explore_every > 0 && in_epoch >= first &&
         in_epoch < first + Calibration::kOwnSamples;
}

namespace {

// `chosen`'s call running `candidate` instead, as an exploration.
CallDecision Explored(const CallDecision& chosen, const CandidatePrice& candidate) {
  CallDecision explored = chosen;
  explored.algorithm = candidate.algorithm;
  explored.straggler = candidate.straggler;
  explored.shape = candidate.shape;
  explored.explored = true;
  explored.predicted_s = 0;  // not modelled: the chooser priced the other plan
  return explored;
}

}  // namespace

CallDecision Remeasure(const CallDecision& chosen, absl::Span<const CandidatePrice> priced) {
  for (const CandidatePrice& candidate : priced) {
    if (candidate.guessed && candidate.algorithm != chosen.algorithm) {
      return Explored(chosen, candidate);
    }
  }
  return chosen;
}

CallDecision Explore(const CallDecision& chosen, absl::Span<const CandidatePrice> priced,
                     const RuntimeConfig& config) {
  const int64_t slot = chosen.call / config.explore_every;
  const bool costly_slot =
      config.costly_explore_every <= 1 || slot % config.costly_explore_every == 0;
  CallDecision explored = chosen;
  int fewest = std::numeric_limits<int>::max();
  for (const CandidatePrice& candidate : priced) {
    if (candidate.algorithm == chosen.algorithm) continue;
    const bool costly = candidate.samples >= Calibration::kOwnSamples &&
                        candidate.predicted_s > (1 + config.explore_max_cost) * chosen.predicted_s;
    if ((costly && !costly_slot) || candidate.samples >= fewest) continue;
    fewest = candidate.samples;
    explored = Explored(chosen, candidate);
  }
  return explored;
}

}  // namespace stragglar
