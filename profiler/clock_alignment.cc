#include "profiler/clock_alignment.h"

#include <cmath>

#include "base/statistics.h"

namespace stragglar {

void ClockAlignment::Add(absl::Span<const double> stamps) {
  if (static_cast<int>(stamps.size()) != num_ranks_ || !std::isfinite(stamps[0])) return;
  std::vector<double> differences(num_ranks_);
  for (int rank = 0; rank < num_ranks_; ++rank) differences[rank] = stamps[rank] - stamps[0];
  differences_.push_back(std::move(differences));
  if (differences_.size() > kStampsKept) differences_.pop_front();
}

double ClockAlignment::offset(int rank) const {
  std::vector<double> finite;
  for (const std::vector<double>& each : differences_) {
    if (std::isfinite(each[rank])) finite.push_back(each[rank]);
  }
  return MedianInPlace(finite);  // 0 for none
}

}  // namespace stragglar
