// kernels/synth/stragglar_schedule.h
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace stragglar {

// One message of StragglAR's post-arrival phase, for the canonical labelling where the straggler is
// rank n-1 and rank r < n-1 owns chunk r after the pre-arrival ReduceScatter (pipelined: owns
// pieces [r*k, (r+1)*k) of the (n-1)*k).
struct ScheduleMove {
  int32_t src;
  int32_t dst;
  int32_t chunk;  // a chunk, or a piece in a pipelined schedule
  // The receiver adds what it receives (the straggler's raw data meeting a partial sum); every
  // other move copies a final chunk. Synthesizers set it; the schedule tests check it.
  bool reduce = false;
};

// rounds[t] lists the moves of post-arrival round t. The exchange of round r appears as two
// reducing moves {r, n-1, r} and {n-1, r, r}; every other move copies a final chunk.
using PostArrivalSchedule = std::vector<std::vector<ScheduleMove>>;

// ceil(log2 value), 0 for a value of 1 or less: the rounds of a doubling broadcast.
int CeilLog2(int value);

// L(n) = n - 2 + ceil(log2 n): the fewest post-arrival rounds any schedule can have.
int StragglarRoundLowerBound(int num_ranks);

// Synthesizes the post-arrival schedule for num_ranks >= 2 (InvalidArgument otherwise).
// Deterministic.
absl::StatusOr<PostArrivalSchedule> SynthesizeStragglarPostArrival(int num_ranks);

// Pipelined StragglAR (kernels/synth/stragglar_pipelined.cc): every chunk cut into `pieces` pieces,
// so that the straggler's link, the bottleneck after it arrives, never idles. In round t < (n-1)*k
// the straggler sends its raw piece of rank t mod (n-1) (the rank's piece t div (n-1)) and that
// rank adds it; the other ports spread the final pieces. Bandwidth term (n-1)*k + O(log n) rounds
// of s/((n-1)*k): it tends to the s/B lower bound as k grows, where the unpipelined schedule costs
// L(n)/(n-1)*s/B (4/3 at n = 4).
inline constexpr int kMaxPipelinedPieces = 128;  // (n-1)*k, which bounds the plans' size

// (n-1)*k - 1 + ceil(log2 n): the last raw piece cannot leave the straggler before round
// (n-1)*k - 1, and its two holders then double per round at best. L(n) for k = 1.
int PipelinedRoundLowerBound(int num_ranks, int pieces);

// InvalidArgument unless num_ranks >= 2, pieces >= 1 and, for pieces > 1, (n-1)*pieces <=
// kMaxPipelinedPieces. pieces = 1 is SynthesizeStragglarPostArrival. Deterministic.
absl::StatusOr<PostArrivalSchedule> SynthesizePipelinedPostArrival(int num_ranks, int pieces);

}  // namespace stragglar
