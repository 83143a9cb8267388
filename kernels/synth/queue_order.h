// Places a serial schedule in rounds for executors with one send and one receive queue per link
// class (docs/scale-model.md, "Per-class queues"). Such an executor serves each queue in round
// order, so a plan's rounds are its queues' order. RoundPacker numbers rounds by dependency depth,
// which is not time: a NIC transfer takes ten NVLink copies' time, so a copy whose data is ready
// early can be numbered after copies whose data is ready late, and wait behind them on its queue.
//
// QueueOrderPlacer orders by time instead. It runs the list on the queues it is written for,
// each queue serving whichever transfer can start first (list scheduling), and places the groups
// in that order, each after the round of the previous transfer on every queue it uses. The
// dependencies are the list's (what a group reads or writes and an earlier group wrote or read),
// so the placed plan means what the list means; only the order among independent groups changes.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "kernels/plan/plan.h"
#include "kernels/synth/round_packer.h"

namespace stragglar {

// The alpha-beta cost of one message on a link class.
struct MessageCost {
  double alpha_s = 0;
  double seconds_per_byte = 0;
};

// What the order is timed for: calls of `bytes` on nodes of `ranks_per_node` ranks (rank r on
// node r / ranks_per_node), every rank arriving at once.
struct QueueTiming {
  double bytes = 0;
  int ranks_per_node = 1;
  MessageCost intra_node;
  MessageCost inter_node;
};

// InvalidArgument unless bytes > 0, ranks_per_node >= 1 and every cost is finite and >= 0.
absl::Status ValidateQueueTiming(const QueueTiming& timing);

class QueueOrderPlacer {
 public:
  QueueOrderPlacer(int num_ranks, int num_chunks)
      : num_ranks_(num_ranks), num_chunks_(num_chunks) {}

  // Appends `group` to the list (RoundPacker::Place's rules for a group); the returned index is
  // its place in the list, not a round.
  int Place(std::vector<Transfer> group, int /*not_before*/ = 0) {
    groups_.push_back(std::move(group));
    return static_cast<int>(groups_.size()) - 1;
  }

  // Places the list into `packer`, no group before round `not_before`, in the order it runs on
  // per-class queues timed by `timing` (valid: ValidateQueueTiming).
  void PlaceInto(RoundPacker& packer, int not_before, const QueueTiming& timing);

 private:
  int num_ranks_;
  int num_chunks_;
  std::vector<std::vector<Transfer>> groups_;
};

}  // namespace stragglar
