// A plan as one rank executes it: its sends and receives in round order, and where each chunk
// lies in its buffers. Shared by every executor (host threads, MPI), so none walks a plan its own
// way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/plan.h"
#include "kernels/reduce.h"

namespace stragglar {

// What one rank does in one round; rounds where it neither sends nor receives are dropped.
struct RankStep {
  int round = 0;
  const Transfer* send = nullptr;  // point into the plan, which must outlive the steps
  const Transfer* receive = nullptr;
};

// This rank's sends and receives, in round order. Only the transfers this rank takes part in are
// checked (the verifier checks whole plans); that is enough to keep an executor memory-safe:
// InvalidArgument for a transfer with a rank or chunk out of range, to itself, or a rank that
// sends or receives twice in one round.
absl::StatusOr<std::vector<RankStep>> RankSteps(const Plan& plan, int rank);

// Byte offset where each chunk of a buffer of `count` elements of `element_size` bytes starts;
// chunk c spans [offsets[c], offsets[c + 1]) (num_chunks + 1 entries).
std::vector<int64_t> ChunkByteOffsets(int64_t count, int64_t element_size, int num_chunks);

// The end of every executor's run: the chunks this rank never wrote still hold its own input
// there (out of place, they were read from `input` all along), and kAvg divides once.
void FinishAllReduce(const Plan& plan, const std::vector<bool>& written,
                     const std::vector<int64_t>& offsets, const std::byte* input, std::byte* result,
                     int64_t count, DataType type, ReduceOp op);

}  // namespace stragglar
