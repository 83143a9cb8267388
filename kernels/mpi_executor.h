// Executes a rank's program (kernels/program.h) over MPI: nonblocking point-to-point on a
// communicator private to stragglar, and our CPU reduction kernels. The same programs as the host
// executor; only the transport differs.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/plan.h"
#include "kernels/program.h"
#include "kernels/reduce.h"

namespace stragglar {

struct MpiAllReduceArgs {
  const void* send = nullptr;  // never modified; may equal `recv` (in place)
  void* recv = nullptr;
  int64_t count = 0;  // elements per rank, the same on every rank
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

// How the executor cuts messages: it must be the same on every rank of a communicator.
struct MpiExecutorOptions {
  // A reduce transfer of more bytes travels as messages of at most this many (a multiple of 16),
  // each added while it is still in cache and while the next one arrives. 0: one message.
  int64_t reduce_segment_bytes = 0;
  // > 0: a program whose peers lie on more than one node of this many ranks (ranks numbered node
  // by node) runs on one queue per link class (mpi_link_class_queues.h), any other round by
  // round, and every transfer is one message (reduce_segment_bytes is not used). 0: round by
  // round.
  int ranks_per_node = 0;
};

// Internal naming the failed MPI call and MPI's message for `code`, e.g. "MPI_Wait failed: ...".
absl::Status MpiCallFailed(absl::string_view call, int code);
// The same, keeping `code` in *mpi_error for the caller to return.
absl::Status MpiCallFailed(absl::string_view call, int code, int* mpi_error);

// Runs `program` (lowered for args' placement) as its rank of `comm`, which must have
// program.num_ranks ranks and carry no other traffic (messages are matched by round tags). Round
// semantics as the plan contract: each round a rank posts its receive, sends the chunks as of the
// start of the round, and applies what it received (a segment at a time for segmented reduce
// transfers) once its own send of those chunks has left. A transfer is one MPI message of bytes,
// or consecutive pieces of reduce_segment_bytes (either way each transfer must stay below 2 GiB).
// With options.ranks_per_node > 0 the rounds' order is relaxed to one queue per link class
// (mpi_link_class_queues.h), with the same result. InvalidArgument for a program that does not fit
// `comm` or the buffers, or a peer that sent a different amount ("mismatched counts across ranks");
// when an MPI call fails, Internal naming the call and MPI's message, with the MPI error code in
// `*mpi_error` (MPI_SUCCESS otherwise), so the caller can return it unchanged.
absl::Status ExecuteProgramWithMpi(const RankProgram& program, const MpiAllReduceArgs& args,
                                   const MpiExecutorOptions& options, MPI_Comm comm,
                                   int* mpi_error);

}  // namespace stragglar
