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
#include "kernels/program/link_class_queues.h"

namespace stragglar {

// Runs `messages`' program on `queues` (SplitByLinkClass of it) as its rank of `comm`, each
// transfer one MPI message tagged with its round, one element of a derived type when it is larger
// than `max_message_bytes` (kernels/exec/mpi/mpi_wire.h). Errors as mpi::Run's: a
// peer's message of another size is InvalidArgument; a failed MPI call is Internal, carrying its
// code (LibraryCode). Nothing in flight with transfers left is Internal too; SplitByLinkClass
// cannot give that (every wait is for an earlier transfer of the program, and each queue is in
// program order), so it is a check, not a path.
// With `alarm`, every wait waits for it too (kernels/exec/mpi/mpi_alarm.h).
absl::Status RunMpiOnLinkClassQueues(const LinkClassQueues& queues, const MpiMessages& messages,
                                     MPI_Comm comm, int64_t max_message_bytes,
                                     MpiAlarm* alarm = nullptr);

}  // namespace stragglar
