// Online calibration of the cost model: for each algorithm, message-size bucket (powers of two)
// and regime, the ratio of the measured time after the last arrival to the model's prediction for
// the same call, over the last samples. The median ratio corrects the model's prediction (robust to
// outliers: a stalled call moves it little); its spread is the model's prediction error. Fed only
// from data every rank shares (the epoch exchange), so every rank holds the same calibration.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "kernels/plan/plan.h"
#include "nlohmann/json.hpp"

namespace stragglar {

// Which part of a plan a call's measured time covers. StragglAR's pre-arrival phase is hidden when
// its straggler comes last, later than every other rank by at least the model's time for that
// phase: the time after the last arrival is then its post-arrival rounds alone. Otherwise the
// phase is on the critical path, and its model error can differ from the rounds' (with fewer
// cores than ranks, all ranks contend for them). With one factor for both, StragglAR's calls with
// nobody late priced it for a persistent straggler, and kept it from being chosen for one (MPI
// preload, docs/mpi.md). Plans without a pre-arrival phase have only kPhaseExposed.
enum class CalibrationRegime { kPhaseExposed, kPhaseHidden };

class Calibration {
 public:
  // Ratios kept per (algorithm, bucket, regime); older ones are forgotten so the model follows
  // drift.
  static constexpr int kSamplesKept = 32;
  // Below this many of its own samples (in its regime) a plan uses the ratio pooled over all plans
  // and regimes on its size where that is below 1, else 1; native (the library's own AllReduce)
  // its own few, or with none the plans'.
  static constexpr int kOwnSamples = 4;

  // The bucket of a message: floor(log2(bytes)), 0 for bytes <= 1.
  static int Bucket(int64_t bytes);

  // One call of `algorithm` on `bytes`: the model predicted `predicted_s` after the last arrival,
  // the ranks measured `measured_s`. Ignores non-positive or non-finite values.
  void Add(Algorithm algorithm, int64_t bytes, double predicted_s, double measured_s,
           CalibrationRegime regime = CalibrationRegime::kPhaseExposed);
  // The correction to multiply the model's time after the last arrival by: the median of the
  // algorithm's own ratios on this size in this regime; while it has fewer than kOwnSamples, for
  // a plan the median pooled over our plans (every plan algorithm and regime) on this size, at
  // most 1 (an unmeasured plan is never priced slower than the model says, so it gets tried), for
  // native the median of its own on this size if it has any, else the plans'; 1 with nothing to
  // pool.
  double Factor(Algorithm algorithm, int64_t bytes,
                CalibrationRegime regime = CalibrationRegime::kPhaseExposed) const;
  int Samples(Algorithm algorithm, int64_t bytes,
              CalibrationRegime regime = CalibrationRegime::kPhaseExposed) const;

  // {"<algorithm>": {"<bucket>": {"factor", "error", "samples", "ratios"}}}: error is the median
  // absolute deviation of the ratios relative to their median (the model's relative prediction
  // error). kPhaseHidden's entries are under "<algorithm>/phase-hidden".
  nlohmann::json ToJson() const;
  // Reads what ToJson wrote (the state file); InvalidArgument on any malformed entry, without
  // changing this object.
  absl::Status FromJson(const nlohmann::json& json);

 private:
  using Key = std::tuple<Algorithm, int, CalibrationRegime>;  // (algorithm, bucket, regime)
  std::map<Key, std::deque<double>> ratios_;
};

}  // namespace stragglar
