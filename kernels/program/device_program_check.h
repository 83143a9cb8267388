// Checks the device programs lowered from a set of per-rank programs (LowerForDevice) symbolically,
// as CheckPrograms checks those against their plan: every value is the set of ranks whose
// contributions it holds. The device kernel pulls a received chunk straight out of the sender's
// window when the sender's `ready` signal says it has reached the step, so beyond the values this
// checks the signals that keep the windows from changing under a reader:
//  - each step matches its program's step (peers, op, chunks), and counts its sends and receives
//    per peer as the peer's program counts them from its side;
//  - every read sees the value the plan says: the sender's window holds the sender's value of
//    the chunks at the start of the round (copied in if lent before this rank writes them), and a
//    reduce's own operand (the input at a chunk's first write, else the window) holds the
//    receiver's;
//  - no window changes while a peer may still read it: a write into the window comes after every
//    read of those chunks by a peer since their last write (this step's own loan included) is
//    among the extent's waits, and goes through scratch when this step also lends the chunks
//    (a write to the result too: an averaging call lands it in the window); a write to the
//    result is a chunk's last write, and no later round reads the chunk;
//  - every peer's last read of this rank's window is in the drain;
//  - at the end, where the chunk flags take each chunk's result from (the input, the window, or
//    the result written by the last extent), every rank holds every contribution in every chunk.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/program/device_program.h"
#include "kernels/program/program.h"

namespace stragglar {

// `programs[r]` is rank r's program, lowered in place with its pre-arrival rounds, and
// `device[r]` what LowerForDevice made of it. OK, or InvalidArgument naming the rank, step,
// chunk and what went wrong. The programs themselves should pass CheckPrograms first.
absl::Status CheckDevicePrograms(absl::Span<const RankProgram> programs,
                                 absl::Span<const DeviceProgram> device);

}  // namespace stragglar
