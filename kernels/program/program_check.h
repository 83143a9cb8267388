// Checks a set of per-rank programs against the plan they were lowered from, symbolically (every
// value is the set of ranks whose contributions it holds, as the plan verifier tracks them):
//  - every step's send and receive match a transfer of the plan in that round, and the peer's
//    program does the same transfer from its side;
//  - every read sees the value the plan says: a sent extent's buffer holds the sender's value of
//    those chunks at the start of the round, and a reduce's own operand holds the receiver's;
//  - no buffer changes while a peer may still read it: a received extent writes result chunks
//    only after every loan of them out of the result (since their last write, this step's send
//    included) is among the extent's waits, and overlaps_send marks every chunk this step also
//    sends; the input is never written;
//  - at the end, after the finish copies (which must only copy chunks no step wrote), every
//    rank's result holds every contribution in every chunk.
// A program lowered with native_pre_arrival starts after the plan's pre-arrival rounds, its block
// of the result holding what the plan holds there then and its other chunks its own input.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "kernels/program/program.h"

namespace stragglar {

// `programs[r]` is rank r's, all lowered with the same placement. OK, or InvalidArgument naming
// the rank, round, chunk and what went wrong. The plan itself should pass VerifyPlan first.
absl::Status CheckPrograms(const Plan& plan, absl::Span<const RankProgram> programs);

}  // namespace stragglar
