// Online calibration of the cost model: for each algorithm and message-size bucket (powers of
// two), the ratio of the measured time after the last arrival to the model's prediction for the
// same call, over the last samples. The median ratio corrects the model's prediction (robust to
// outliers: a stalled call moves it little); its spread is the model's prediction error. Fed only
// from data every rank shares (the epoch exchange), so every rank holds the same calibration.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/plan.h"
#include "nlohmann/json.hpp"

namespace stragglar {

class Calibration {
 public:
  // Ratios kept per (algorithm, bucket); older ones are forgotten so the model follows drift.
  static constexpr int kSamplesKept = 32;
  // Below this many of its own samples an algorithm uses the ratio pooled over all algorithms.
  static constexpr int kOwnSamples = 4;

  // The bucket of a message: floor(log2(bytes)), 0 for bytes <= 1.
  static int Bucket(int64_t bytes);

  // One call of `algorithm` on `bytes`: the model predicted `predicted_s` after the last arrival,
  // the ranks measured `measured_s`. Ignores non-positive or non-finite values.
  void Add(Algorithm algorithm, int64_t bytes, double predicted_s, double measured_s);
  // The correction to multiply the model's time after the last arrival by: the median of the
  // algorithm's own ratios on this size, the median pooled over all algorithms on this size while
  // it has fewer than kOwnSamples, or 1 with no samples at all.
  double Factor(Algorithm algorithm, int64_t bytes) const;
  int Samples(Algorithm algorithm, int64_t bytes) const;

  // {"<algorithm>": {"<bucket>": {"factor", "error", "samples"}}}: error is the median absolute
  // deviation of the ratios relative to their median (the model's relative prediction error).
  nlohmann::json ToJson() const;
  // Reads what ToJson wrote (the state file); InvalidArgument on any malformed entry, without
  // changing this object.
  absl::Status FromJson(const nlohmann::json& json);

 private:
  std::map<std::pair<Algorithm, int>, std::deque<double>> ratios_;
};

}  // namespace stragglar
