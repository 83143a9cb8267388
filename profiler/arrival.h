// Arrival timing: what each rank measures about itself at every collective, and how the lags of
// all ranks are derived once the epoch exchange has shared those measurements.
#pragma once

#include <vector>

#include "absl/types/span.h"

namespace stragglar {

// One rank's view of one call: when it reached the collective and how long the call took it.
struct CallTiming {
  double arrival_s = 0;   // on a clock the ranks share (host runtime), or any local clock
  double duration_s = 0;  // from arrival to completion, on the rank's own clock
};

enum class LagSource {
  // lag_r = arrival_r - min_j arrival_j: exact when the ranks share a clock.
  kArrivalClock,
  // lag_r = max_j duration_j - duration_r: clock-free. In a blocking collective everyone finishes
  // together, so the rank that arrived first waited longest and the last one the least.
  kDuration,
};

// Lags (>= 0, the earliest rank at 0) of every rank for one call; `timing` is indexed by rank.
std::vector<double> LagsFromTimings(absl::Span<const CallTiming> timing, LagSource source);

}  // namespace stragglar
