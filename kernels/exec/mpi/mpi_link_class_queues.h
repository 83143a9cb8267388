// A rank's program run over MPI on one queue per link class: what host_link_class_queues.h does for
// the host executor, on one thread. The transfers with peers on the rank's node and those with
// peers on other nodes are two queues, each in round order, and a transfer waits only for its
// queue and for the chunks it touches (the same waits, ChunkNeed, so the result is bit for bit
// the one in round order):
// - a send is posted (MPI_Isend) once every earlier receive into its chunks has been applied;
// - each queue's next receive is posted (MPI_Irecv into a buffer of its queue) as soon as the
//   one before it is applied, and is applied (added or copied into the chunks) once it has
//   landed, every earlier receive into its chunks has been applied and every earlier send of
//   them has completed. A copy that may land in place when it is posted lands in the result.
// The thread progresses both queues together and blocks in MPI_Waitsome only when nothing is
// ready, so a long transfer over a NIC does not hold up the rank's transfers inside its node.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/exec/mpi/mpi_alarm.h"
#include "kernels/exec/mpi/mpi_messages.h"
#include "kernels/exec/mpi/mpi_wire.h"
#include "kernels/program/link_class_queues.h"

namespace stragglar {

// How a run on the queues cuts its messages; the same on every rank of a communicator.
struct QueueMessages {
  // > 0: a transfer with a peer on another node travels as messages of at most this many bytes,
  // all posted at once, and only once its receiver has said it is ready (mpi_network.h), as
  // round by round (MpiExecutorOptions::network_message_bytes). 0: one message, sent at once.
  int64_t network_message_bytes = 0;
  // A message larger than this travels as one element of a derived type (mpi_wire.h).
  int64_t max_message_bytes = kLargestPlainMessageBytes;
};

// Runs `messages`' program on `queues` (SplitByLinkClass of it) as its rank of `comm`, each
// transfer inside the node one MPI message tagged with its round, and each with another node one
// or more (`cut`). Errors as mpi::Run's: a peer's message of another size is InvalidArgument; a
// failed MPI call is Internal, carrying its code (LibraryCode). Nothing in flight with transfers
// left is Internal too; SplitByLinkClass cannot give that (every wait is for an earlier transfer
// of the program, and each queue is in program order; a send's wait for its receiver's ready
// message is for the receiver's earlier receives, which round order has too), so it is a check,
// not a path. With `alarm`, every wait waits for it too (kernels/exec/mpi/mpi_alarm.h).
absl::Status RunMpiOnLinkClassQueues(const LinkClassQueues& queues, const MpiMessages& messages,
                                     MPI_Comm comm, const QueueMessages& cut,
                                     MpiAlarm* alarm = nullptr);

}  // namespace stragglar
