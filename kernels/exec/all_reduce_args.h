// One AllReduce call's arguments, the same for every executor (host, MPI, NCCL, device), which
// runs them with its rank's program (kernels/program/program.h): where the data lies (host or
// device memory, as the executor runs), how much of it, and how it reduces. What only one
// executor needs (a receive timeout, message sizes, a stream) is that executor's own parameter.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/program/program.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {

struct AllReduceArgs {
  const void* send = nullptr;  // never modified; may equal `recv` (in place)
  void* recv = nullptr;
  int64_t count = 0;  // elements per rank, the same on every rank
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

// What any executor checks of a call before it touches anything, for `program` of this rank:
// the element type and op are known, the count is >= 0 and its bytes fit an int64, the buffers
// are not null when there is data, and the program was lowered for these buffers (in place
// exactly when send == recv). InvalidArgument naming the rank and what is wrong.
absl::Status CheckAllReduceArgs(const RankProgram& program, const AllReduceArgs& args);

}  // namespace stragglar
