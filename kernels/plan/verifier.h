// Symbolic verification of a plan: tracks, for every rank and chunk, the set of ranks whose
// contributions the current value contains, and executes the plan with the contract's semantics.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/plan/plan.h"

namespace stragglar {

// OK when `plan` is a correct AllReduce:
//  - shape: num_ranks >= 1, num_chunks >= 1, ranks and chunks in range, src != dst, non-empty chunk
//    lists without repeats;
//  - port model: per round, each rank sends at most one transfer and receives at most one;
//  - no double counting: a reduce never adds a contribution the receiver already holds;
//  - completeness: at the end every rank holds every contribution in every chunk;
//  - StragglAR: a straggler in range; rounds before `pre_arrival_rounds` never involve it and its
//  first
//    transfer happens in round `pre_arrival_rounds` (the contract's definition of the phases).
// Otherwise InvalidArgument naming the round, transfer, rank and chunk at fault.
// Cost: O(transfers * chunks per transfer * ranks / 64) time and ranks^2 / 8 bytes of state (2 MiB
// at 4096 ranks): the plan runs chunk by chunk, from an index of each chunk's transfers built for
// as many chunks at a time as fit `max_index_bytes` (12 bytes per chunk per transfer; one pass over
// the plan's chunk runs per batch, so small batches cost little: Halving-Doubling at 4096 ranks
// verifies in 1.9 s either way, peaking at 43 MB with 32 MiB batches and 268 MB with 256 MiB).
// Of several errors, the one met first in execution order is reported, whatever the batching.
// A plan whose chunks x ranks x ranks/64 exceeds 2^34 (every chunk resets ranks x ranks/64 words
// of state, whatever its transfers) is refused as too large to verify.
struct VerifyOptions {
  int64_t max_index_bytes = int64_t{32} << 20;
};
absl::Status VerifyPlan(const Plan& plan, const VerifyOptions& options = {});

}  // namespace stragglar
