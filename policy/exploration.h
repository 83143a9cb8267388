// Exploration: now and then a call runs a candidate other than the policy's best guess, so that a
// mis-calibrated model measures what it predicts wrongly and corrects itself. Which calls explore
// and what they run depend only on the call index and on what every rank holds alike (the
// chooser's prices and the calibration's sample counts), so every rank explores the same call.
#pragma once

#include <cstdint>

#include "absl/types/span.h"
#include "policy/chooser.h"
#include "policy/policy_config.h"
#include "policy/reports.h"

namespace stragglar {

// Whether call `call` is an exploration slot: one call in config.explore_every, in the middle of
// its stretch (never, for explore_every 0).
bool IsExplorationCall(int64_t call, const RuntimeConfig& config);

// Whether call `call` is a slot for measuring again a candidate whose factor is a shift's guess
// (Calibration::CloseEpoch): Calibration::kOwnSamples calls in the middle of each epoch, back to
// back, so that one such candidate is measured in one epoch as it would run if chosen (never, for
// explore_every 0). They come before an exploration slot among them. The slots are the
// communicator's calls, whatever their size: in a job that mixes sizes each size gets some of
// them, and is measured over more epochs. Spread over the epoch between calls of another algorithm,
// the library's own AllReduce measured 330 ms where it takes 625 ms back to back (emulated cluster,
// a 40 Mbit/s link): a token-bucket link lends a burst after a quieter call, and a real one drains
// its queues.
bool IsRemeasuringCall(int64_t call, const RuntimeConfig& config);

// What such a slot runs instead of `chosen`: the first candidate priced with a guessed factor,
// whatever it may cost (once per candidate and change of the machine); `chosen` with none.
CallDecision Remeasure(const CallDecision& chosen, absl::Span<const CandidatePrice> priced);

// What exploration call `chosen.call` runs instead of `chosen`: the candidate with the fewest
// calibration samples on this size, in the regime the predicted arrivals put it in (the first in
// candidate order on ties); StragglAR around the named straggler, or else the rank predicted last.
// Candidates measured too costly to try (RuntimeConfig::explore_max_cost) wait for their slot
// (one in costly_explore_every); with none left, `chosen` runs.
CallDecision Explore(const CallDecision& chosen, absl::Span<const CandidatePrice> priced,
                     const RuntimeConfig& config);

}  // namespace stragglar
