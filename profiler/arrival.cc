#include "profiler/arrival.h"

#include <algorithm>
#include <limits>

namespace stragglar {

std::vector<double> LagsFromTimings(absl::Span<const CallTiming> timing, LagSource source) {
  std::vector<double> lags(timing.size(), 0.0);
  if (timing.empty()) return lags;
  if (source == LagSource::kArrivalClock) {
    double first = std::numeric_limits<double>::infinity();
    for (const CallTiming& t : timing) first = std::min(first, t.arrival_s);
    for (size_t r = 0; r < timing.size(); ++r) lags[r] = timing[r].arrival_s - first;
  } else {
    double longest = 0;
    for (const CallTiming& t : timing) longest = std::max(longest, t.duration_s);
    for (size_t r = 0; r < timing.size(); ++r) lags[r] = longest - timing[r].duration_s;
  }
  return lags;
}

}  // namespace stragglar
