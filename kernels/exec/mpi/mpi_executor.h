// Executes a rank's program (kernels/program/program.h) over MPI: nonblocking point-to-point on a
// communicator private to stragglar, and our CPU reduction kernels. The same programs as the host
// executor; only the transport differs.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/exec/all_reduce_args.h"
#include "kernels/exec/call_progress.h"
#include "kernels/exec/mpi/mpi_alarm.h"
#include "kernels/exec/mpi/mpi_wire.h"
#include "kernels/plan/plan.h"
#include "kernels/program/program.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {

// How the executor cuts messages: it must be the same on every rank of a communicator.
struct MpiExecutorOptions {
  // A reduce transfer of more bytes travels as messages of at most this many (a multiple of 16),
  // each added while it is still in cache and while the next one arrives. 0: one message.
  int64_t reduce_segment_bytes = 0;
  // The machine: ranks numbered node by node, this many per node; 0: one node.
  int ranks_per_node = 0;
  // On a machine of nodes, a program whose peers lie on more than one node runs on one queue per
  // link class (mpi_link_class_queues.h), any other round by round; a transfer inside a node is
  // then one message (reduce_segment_bytes is not used), one with another node is cut by
  // network_message_bytes, as round by round.
  bool per_class_queues = false;
  // > 0 (a multiple of 16): on a machine of nodes, every transfer with a peer on another node,
  // copy or reduce, travels as messages of at most this many bytes, all posted at once. Below
  // the network transport's eager limit no message waits for a rendezvous handshake, which
  // otherwise crosses the link behind the other direction's data: exchanges of 88 KiB between
  // two emulated hosts took 2x their link time in one message each over OpenMPI's TCP transport
  // (eager limit 64 KiB), 1.06x in messages of 60 KiB (docs/cluster.md). Transfers inside a
  // node keep reduce_segment_bytes. 0: as inside a node.
  int64_t network_message_bytes = 0;
  // A message larger than this many bytes travels as one element of a derived type
  // (kernels/exec/mpi/mpi_wire.h): an MPI count is an int. Tests set it small; 1 to INT_MAX.
  int64_t max_message_bytes = kLargestPlainMessageBytes;
};

// Internal naming the failed MPI call and MPI's message for `code`, e.g. "MPI_Wait failed: ...",
// carrying `code` (kernels/exec/library_code.h) for the preload to return unchanged.
absl::Status MpiCallFailed(absl::string_view call, int code);
// InvalidArgument "mismatched counts across ranks: rank P sent N bytes in round R, rank Q
// expected M", carrying MPI_ERR_TRUNCATE, MPI's class for a message of another size.
absl::Status MismatchedCounts(int32_t peer, int64_t received, int32_t round, int32_t rank,
                              int64_t expected);

// Runs `program` (lowered for args' placement) as its rank of `comm`, which must have
// program.num_ranks ranks and carry no other traffic (messages are matched by round tags). Round
// semantics as the plan contract: each round a rank posts its receive, sends the chunks as of the
// start of the round, and applies what it received (a segment at a time for segmented reduce
// transfers) once its own send of those chunks has left. A transfer is one MPI message of bytes,
// or consecutive segments of reduce_segment_bytes, or of network_message_bytes with a peer on
// another node; a message of more than max_message_bytes is one element of a derived type.
// With options.per_class_queues the rounds' order is relaxed to one queue per link class
// (mpi_link_class_queues.h), with the same result. InvalidArgument for a program that does not fit
// `comm` or the buffers, or a peer that sent a different amount ("mismatched counts across ranks");
// when an MPI call fails, Internal naming the call and MPI's message, carrying the MPI error code
// (MpiCallFailed), so the caller can return it unchanged. With `progress`,
// each wait first says which rank and round it waits for (a call watchdog reads it).
//
// With `alarm` (posted on `comm`), every wait also waits for it: a call that fails on this rank
// raises it before returning, and one that a peer's alarm interrupts returns
// MpiAlarm::Interrupted(), so that an erroneous call (counts that differ across ranks) returns on
// every rank. A mismatched count is then MPI_ERR_TRUNCATE, MPI's own class for it.
namespace mpi {
absl::Status Run(const RankProgram& program, const AllReduceArgs& args,
                 const MpiExecutorOptions& options, MPI_Comm comm, CallProgress* progress = nullptr,
                 MpiAlarm* alarm = nullptr);
}  // namespace mpi

}  // namespace stragglar
