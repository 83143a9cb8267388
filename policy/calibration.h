// Online calibration of the cost model: for each algorithm, message-size bucket (powers of two)
// and regime, the ratio of the measured time after the last arrival to the model's prediction for
// the same call, over the last samples. The median ratio corrects the model's prediction (robust to
// outliers: a stalled call moves it little); its spread is the model's prediction error. Fed only
// from data every rank shares (the epoch exchange), so every rank holds the same calibration.
//
// A change of the machine (a link slowed or sped up) moves every algorithm's ratios at once, but
// only the one that runs measures it. When an epoch's own samples of one algorithm differ from what
// it kept by kShiftFactor or more, that algorithm keeps only the new samples, and every other
// algorithm's ratios on that size are scaled by the same shift and marked as guesses until they
// are measured again (the policy then measures them at once, policy/exploration.h). Without that,
// the algorithms not running looked as cheap as before the change, and the policy went through
// them one by one, each run until its own median moved.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
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

  // An epoch's median ratio of one algorithm this far from the median it kept (either way), with
  // at least kOwnSamples of each, is a change of the machine, not noise.
  static constexpr double kShiftFactor = 2.0;

  // The bucket of a message: floor(log2(bytes)), 0 for bytes <= 1.
  static int Bucket(int64_t bytes);

  // One call of `algorithm` on `bytes`: the model predicted `predicted_s` after the last arrival,
  // the ranks measured `measured_s`. Ignores non-positive or non-finite values.
  void Add(Algorithm algorithm, int64_t bytes, double predicted_s, double measured_s,
           CalibrationRegime regime = CalibrationRegime::kPhaseExposed);
  // The end of an epoch: where the ratios added since the last call show a shift (above), the
  // algorithm that shifted keeps only those; the others' older ratios on its size are scaled, and
  // marked as guesses unless the algorithm is the one that shifted (in another regime) or has
  // kOwnSamples of the epoch's own. At most one shift per size and epoch: of the algorithms that
  // shifted, the one with the most ratios in the epoch (the first in algorithm and regime order on
  // ties). Returns the largest move of an algorithm's median this epoch, either way (>= 1; 1 when
  // none had kOwnSamples to compare with what it kept): a link that slowed or recovered moves the
  // running algorithm's, below a shift too (the runtime probes the links again). A plan measured
  // kOwnSamples times for the first time is compared with the plans' median on its size and
  // regime instead (one with a shift's guesses, with those), and counts only from kShiftFactor
  // either way.
  double CloseEpoch();
  // The correction to multiply the model's time after the last arrival by: the median of the
  // algorithm's own ratios on this size in this regime; while it has fewer than kOwnSamples, for
  // a plan the median pooled over our plans (every plan algorithm and regime) on this size, at
  // most 1 (an unmeasured plan is never priced slower than the model says, so it gets tried), for
  // native the median of its own on this size if it has any, else the plans'; 1 with nothing to
  // pool. Ratios scaled by a shift count as its own here until measured ones replace them.
  double Factor(Algorithm algorithm, int64_t bytes,
                CalibrationRegime regime = CalibrationRegime::kPhaseExposed) const;
  // The ratios measured since the last shift (scaled ones are not counted).
  int Samples(Algorithm algorithm, int64_t bytes,
              CalibrationRegime regime = CalibrationRegime::kPhaseExposed) const;
  // Whether the algorithm's factor on this size in this regime is a shift's guess: its ratios
  // were scaled by another algorithm's shift, and it has not been measured kOwnSamples times
  // since in any regime.
  bool Guessed(Algorithm algorithm, int64_t bytes,
               CalibrationRegime regime = CalibrationRegime::kPhaseExposed) const;

  // {"<algorithm>": {"<bucket>": {"factor", "error", "samples", "ratios"}}}: error is the median
  // absolute deviation of the ratios relative to their median (the model's relative prediction
  // error). kPhaseHidden's entries are under "<algorithm>/phase-hidden". "samples" counts the
  // ratios kept; an entry with a shift's guesses also has "scaled": how many of the first of them
  // are guesses (Samples() counts the others).
  nlohmann::json ToJson() const;
  // Reads what ToJson wrote (the state file); InvalidArgument on any malformed entry, without
  // changing this object.
  absl::Status FromJson(const nlohmann::json& json);

 private:
  using Key = std::tuple<Algorithm, int, CalibrationRegime>;  // (algorithm, bucket, regime)
  struct Ratios {
    std::deque<double> values;  // oldest first, at most kSamplesKept
    int scaled = 0;             // how many of the first are a shift's guesses
    int measured() const { return static_cast<int>(values.size()) - scaled; }
  };
  // Drops `key`'s guesses, and unmarks its algorithm's guesses in its other regimes.
  void UnmarkGuesses(const Key& key);
  // The median ratio of our plans on this size in this regime; none without any.
  std::optional<double> PlanPoolMedian(int bucket, CalibrationRegime regime) const;
  std::map<Key, Ratios> ratios_;
  // Since the last CloseEpoch, per key: the ratios added, and the median of those kept before
  // the first of them (none: too few measured ones to compare with); for a plan without those,
  // what it was expected to take then: the median of its shift's guesses, or of the plans' ratios
  // on its size and regime, its own few included (CloseEpoch).
  struct EpochAdds {
    int added = 0;
    std::optional<double> median_before;
    std::optional<double> expected_before;
  };
  std::map<Key, EpochAdds> added_this_epoch_;
};

}  // namespace stragglar
