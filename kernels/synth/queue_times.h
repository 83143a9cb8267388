// The state of a run on one send and one receive queue per link class (docs/scale-model.md,
// "Per-class queues"): when each queue of each rank is next free, and when each (rank, chunk) was
// last written and read. A transfer starts once its two queues are free, what it reads at the
// sender has been written, and what it writes at the receiver has been written and read. One
// state for the queue simulator (policy/model/queue_simulator.h), which prices plans, and for
// QueueOrderPlacer (kernels/synth/queue_order.h), which orders them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kernels/plan/plan.h"

namespace stragglar {

class QueueTimes {
 public:
  // Rank r's queues and chunks are its own from `arrival_s[r]`: nothing touches them earlier.
  QueueTimes(int num_chunks, absl::Span<const double> arrival_s)
      : num_chunks_(num_chunks),
        send_free_s_(2 * arrival_s.size()),
        receive_free_s_(2 * arrival_s.size()),
        written_s_(arrival_s.size() * num_chunks),
        read_s_(arrival_s.size() * num_chunks) {
    for (size_t rank = 0; rank < arrival_s.size(); ++rank) {
      for (int link = 0; link < 2; ++link) {
        send_free_s_[2 * rank + link] = arrival_s[rank];
        receive_free_s_[2 * rank + link] = arrival_s[rank];
      }
      std::fill_n(written_s_.begin() + rank * num_chunks_, num_chunks_, arrival_s[rank]);
      std::fill_n(read_s_.begin() + rank * num_chunks_, num_chunks_, arrival_s[rank]);
    }
  }

  // The earliest start of `transfer` on link class `link` (0 inside a node, 1 between).
  double Start(const Transfer& transfer, int link) const {
    double start =
        std::max(send_free_s_[2 * transfer.src + link], receive_free_s_[2 * transfer.dst + link]);
    for (int32_t chunk : transfer.chunks) {
      start = std::max({start, written_s_[Cell(transfer.src, chunk)],
                        written_s_[Cell(transfer.dst, chunk)], read_s_[Cell(transfer.dst, chunk)]});
    }
    return start;
  }

  // `transfer` ran on `link` until `end_s`.
  void Finish(const Transfer& transfer, int link, double end_s) {
    send_free_s_[2 * transfer.src + link] = end_s;
    receive_free_s_[2 * transfer.dst + link] = end_s;
    for (int32_t chunk : transfer.chunks) {
      double& read = read_s_[Cell(transfer.src, chunk)];
      read = std::max(read, end_s);
      written_s_[Cell(transfer.dst, chunk)] = end_s;
    }
  }

 private:
  size_t Cell(int rank, int32_t chunk) const {
    return static_cast<size_t>(rank) * num_chunks_ + chunk;
  }

  int num_chunks_;
  std::vector<double> send_free_s_, receive_free_s_;  // [2 * rank + link class]
  std::vector<double> written_s_, read_s_;            // [rank * num_chunks + chunk]
};

}  // namespace stragglar
