// A rank's program split into one queue per link class: the order that policy/queue_simulator.h
// prices and that the executors' link-class drivers run (exec/host/host_link_class_queues.h,
// exec/mpi/mpi_link_class_queues.h). Round by round, a long transfer over a NIC holds up the
// rank's next NVLink transfer even when the two touch different chunks. Here the transfers with
// peers on the rank's node and those with peers on other nodes are two queues, each served in
// round order, and a transfer waits only for its queue and for the chunks it touches:
// - a send lends its chunks once every earlier round's receive has written them;
// - a receive writes its chunks once every earlier round's receive has written them and every
//   send up to its own round has lent them (the executor then keeps them in scratch until those
//   peers are done reading).
// Those are the only orders a plan's result depends on (the verifier's semantics: a round reads
// the values from before it), so the result is bit for bit the one in round order.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/program/program.h"

namespace stragglar {

// What a transfer waits for on one chunk: that many receives into it done, and (receives only)
// that many sends of it lent, counted in the rank's program order.
struct ChunkNeed {
  int32_t chunk = 0;
  int32_t writes = 0;
  int32_t sends = 0;
};

// One send or receive of a step: needs[first_need, first_need + num_needs) (only chunks that
// wait for something).
struct QueuedTransfer {
  int32_t step = 0;
  int32_t first_need = 0;
  int32_t num_needs = 0;
};

// Link class 0: peers on the rank's node; 1: peers on other nodes.
inline constexpr int kNumLinkClasses = 2;

struct LinkClassQueues {
  std::vector<QueuedTransfer> sends[kNumLinkClasses];     // in round order
  std::vector<QueuedTransfer> receives[kNumLinkClasses];  // in round order
  std::vector<ChunkNeed> needs;

  // Whether every transfer is in one class: then round order is the same thing.
  bool OneClass() const;
  // Whether `transfer`'s needs are met, given per chunk the receives applied to it and the sends
  // of it done (lent, or completed: whatever the executor must wait for).
  bool Met(const QueuedTransfer& transfer, absl::Span<const int32_t> writes_done,
           absl::Span<const int32_t> sends_done) const;
};

// Splits `program` by the class of each transfer's peer, ranks [k*ranks_per_node,
// (k+1)*ranks_per_node) being node k. ranks_per_node >= 1.
LinkClassQueues SplitByLinkClass(const RankProgram& program, int ranks_per_node);

}  // namespace stragglar
