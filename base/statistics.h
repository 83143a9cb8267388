// Small robust statistics: the detector's, the calibration's, the clock alignment's and the link
// monitor's.
#pragma once

#include <algorithm>
#include <vector>

namespace stragglar {

// The median (the upper one for an even count), 0 for no values. Reorders `values`.
inline double MedianInPlace(std::vector<double>& values) {
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  return values[middle];
}

// The same on a copy.
inline double Median(std::vector<double> values) { return MedianInPlace(values); }

}  // namespace stragglar
