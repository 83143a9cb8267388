// Executes a rank's program (kernels/program/program.h) on ranks that are threads of one process,
// over an in-process transport. A rank waits only for the messages it needs: there is no global
// barrier per round.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/exec/all_reduce_args.h"
#include "kernels/exec/host/host_transport.h"
#include "kernels/program/program.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {

// How the host executor runs a call, besides its arguments.
struct HostExecutorOptions {
  absl::Duration timeout = absl::Seconds(60);  // per receive
  // 0: one queue, the steps in round order. > 0: the ranks are in nodes of this many (ranks
  // [k*G, (k+1)*G) are node k) and the rank runs on one queue per link class
  // (host_link_class_queues.h), so a transfer with a peer on another node does not hold up one
  // inside the node that touches other chunks: the executor policy/queue_simulator.h prices. The
  // result is the same bit for bit.
  int ranks_per_node = 0;
};

// Runs `program` (lowered for args' placement: in place exactly when send == recv) as its rank.
// Chunk i covers ChunkElements(count, program.num_chunks, i). Round semantics as the plan
// contract: a rank sends the value it holds at the start of the round and applies what it
// receives afterwards (reduce: ReduceInto; copy: overwrite); kAvg divides once at the end.
// Rank-local errors (null buffers with count > 0, negative count, a program that does not fit the
// transport or the buffers) return InvalidArgument before anything is written. Every message
// carries the sender's count, type and op; a receiver never applies a message that disagrees with
// its own and returns InvalidArgument naming both ("mismatched counts across ranks"). On any
// error the transport is aborted so that the other ranks return instead of hanging. Every transfer
// is one message, even when its chunks are empty (count < num_chunks), so channel order and the
// header check hold for any count. `send` and `recv` must be equal or not overlap.
// Chunks are lent, not copied: the receiver reduces or copies straight from the sender's buffer
// into its own result, and a chunk this rank must change while a peer may still be reading it
// (the extent's waits) goes through scratch memory first. Returns only once no peer can still be
// reading this rank's buffers, on success and on error alike.
namespace host {
absl::Status Run(const RankProgram& program, const AllReduceArgs& args,
                 const HostExecutorOptions& options, HostTransport& transport);
}  // namespace host

}  // namespace stragglar
