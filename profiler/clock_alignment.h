// Arrivals of ranks on different hosts, on one clock. CLOCK_MONOTONIC is one clock per kernel: on
// two hosts it starts at each one's boot, so their arrivals compare only once each rank's offset
// from rank 0's clock is known. The other way, lags from durations (LagSource::kDuration), assumes
// that every rank finishes a call together; on a slow link Ring's ranks finish 20-50 ms apart and
// the library's own up to 170 ms (docs/policy.md), which read as lags, so the policy named a
// straggler that was not late and priced every plan for it.
//
// The ranks leave a gather (the epoch exchange) within about one message's latency of each other.
// Each stamps its clock then, and the next gather carries the stamps. A rank's offset is the
// median, over the last kStampsKept gathers, of its stamp minus rank 0's: a rank descheduled
// between the gather and its stamp moves no offset, and the clocks' drift counts only over a few
// epochs. Every rank receives the same stamps, so every rank holds the same offsets.
#pragma once

#include <deque>
#include <vector>

#include "absl/types/span.h"

namespace stragglar {

class ClockAlignment {
 public:
  static constexpr int kStampsKept = 5;
  // Gathers of stamps alone before the first epoch's, so that its arrivals are aligned by a
  // median too.
  static constexpr int kFirstGathers = 3;

  explicit ClockAlignment(int num_ranks) : num_ranks_(num_ranks) {}

  // One gather's stamps, by rank: each rank's clock when the gather before it returned. Ignored
  // when rank 0's is missing (NaN: before the first gather); a rank's own missing stamp leaves
  // its offset on the stamps it has.
  void Add(absl::Span<const double> stamps);
  // What to subtract from `rank`'s clock to read rank 0's (0 while it has no stamp).
  double offset(int rank) const;

 private:
  int num_ranks_;
  // Per gather, oldest first: each rank's stamp minus rank 0's (NaN where missing).
  std::deque<std::vector<double>> differences_;
};

}  // namespace stragglar
