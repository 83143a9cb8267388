// kernels/stragglar_schedule.h
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace stragglar {

// One message of StragglAR's post-arrival phase, for the canonical labelling where the straggler is
// rank n-1 and rank r < n-1 owns chunk r after the pre-arrival ReduceScatter.
struct ScheduleMove {
  int32_t src;
  int32_t dst;
  int32_t chunk;
};

// rounds[t] lists the moves of post-arrival round t. The exchange of round r appears as two moves
// {r, n-1, r} and {n-1, r, r}; every other move copies a final chunk.
using PostArrivalSchedule = std::vector<std::vector<ScheduleMove>>;

// L(n) = n - 2 + ceil(log2 n): the fewest post-arrival rounds any schedule can have.
int StragglarRoundLowerBound(int num_ranks);

// Synthesizes the post-arrival schedule for num_ranks >= 2 (InvalidArgument otherwise).
// Deterministic.
absl::StatusOr<PostArrivalSchedule> SynthesizeStragglarPostArrival(int num_ranks);

}  // namespace stragglar
