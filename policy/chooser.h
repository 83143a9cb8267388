// Chooser v1: simulates each candidate plan with the discrete-event model on the predicted arrival
// vector and the message size, and picks the fastest. Deterministic: the same inputs give the same
// choice on every rank. The first candidate is the default: another one is chosen only when it is
// predicted to save more than `min_gain` times the default's time after the last arrival, because
// a smaller predicted gain is within the model's error and switching for it can lose (seen on hosts
// where Halving-Doubling's larger messages run slower than the alpha-beta model says). Once the
// calibration has measured both the default and the candidate on this message size, the model's
// error is known to be small and the bar drops to `calibrated_min_gain`. Among the others, ties
// keep the earlier. StragglAR is tried around the named straggler and around the rank predicted
// to arrive last (with several late ranks, the one that pays most wins), in each of the shapes the
// plan cache offers for the size (kShapeMinGain). Each candidate takes the calibration factor of
// the regime the predicted arrivals put it in.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "policy/calibration.h"
#include "policy/model/simulator.h"
#include "policy/plan_cache.h"
#include "policy/stragglar_shape.h"

namespace stragglar {

// One candidate as the chooser priced it: what exploration needs to weigh running it instead.
struct CandidatePrice {
  Algorithm algorithm = Algorithm::kRing;
  std::optional<int> straggler;  // StragglAR's: the named straggler, else the rank predicted last
  std::optional<StragglarShape> shape;  // StragglAR's: the shape priced
  double predicted_s = 0;               // completion from the first arrival (calibrated)
  int samples = 0;       // the calibration's samples of it on this size, in its regime
  bool guessed = false;  // its factor is a guess from another algorithm's shift (Calibration)
};

struct Choice {
  Algorithm algorithm = Algorithm::kRing;
  std::optional<int> straggler;         // set when algorithm == kStragglar
  std::optional<StragglarShape> shape;  // set when algorithm == kStragglar
  double predicted_s = 0;               // completion from the first arrival (calibrated)
  double baseline_predicted_s = 0;      // the first candidate's prediction (what choosing saves)
  // Every candidate that applies, in candidate order (StragglAR around its first straggler).
  std::vector<CandidatePrice> priced;
};

class Chooser {
 public:
  // StragglAR's shapes (PlanCache::StragglarShapes) other than the flat schedule are chosen only
  // when predicted faster than it by more than this fraction of its time after the last arrival:
  // within the model's error, the flat plans the executors were measured on stay.
  static constexpr double kShapeMinGain = 0.05;

  // `candidates` in tie-break order, the default first; StragglAR is considered only when a
  // straggler is given. Plans come from `plans`, which must outlive the chooser.
  Chooser(PlanCache& plans, std::vector<Algorithm> candidates, double min_gain = 0.05,
          double calibrated_min_gain = 0.01);

  // `calibration` (optional) corrects each candidate's predicted time after the last arrival.
  absl::StatusOr<Choice> Choose(double bytes, absl::Span<const double> predicted_arrival_s,
                                std::optional<int> straggler, const LinkModel& link,
                                const Calibration* calibration = nullptr);

  const std::vector<Algorithm>& candidates() const { return candidates_; }

  // The calibration regime of `plan` on a call of `bytes` with these arrivals: kPhaseHidden when
  // its straggler arrives later than every other rank by at least the model's time for the plan's
  // pre-arrival rounds (ranks arriving together), else kPhaseExposed. InvalidArgument as
  // SimulatePlan. (PlanCache::RegimeOf is the same with the phase's time memoized.)
  static absl::StatusOr<CalibrationRegime> RegimeOf(const Plan& plan, double bytes,
                                                    const LinkModel& link,
                                                    absl::Span<const double> arrival_s);

 private:
  // One call's inputs, on which every candidate is priced.
  struct Call {
    double bytes = 0;
    absl::Span<const double> predicted_arrival_s;
    const LinkModel* link = nullptr;
    const Calibration* calibration = nullptr;
    double arrivals_spread_s = 0;  // last predicted arrival - first
  };
  // One candidate priced: its choice, the calibration's samples of it and whether its factor is a
  // guess, and its time after the last arrival (calibrated).
  struct Priced {
    Choice choice;
    int samples = 0;
    bool guessed = false;
    double after_s = 0;
  };
  // How exactly a candidate is priced: simulated, or at least (PlanCache::AfterLastArrivalAtLeast).
  enum class Pricing { kExact, kAtLeast };
  absl::StatusOr<Priced> Price(const Call& call, Algorithm algorithm,
                               std::optional<int> plan_straggler,
                               std::optional<StragglarShape> shape,
                               Pricing pricing = Pricing::kExact);
  // StragglAR around `plan_straggler` in the shape it would run among `shapes` (kShapeMinGain).
  absl::StatusOr<Priced> PriceShapes(const Call& call, std::optional<int> plan_straggler,
                                     absl::Span<const StragglarShape> shapes);
  // Of `shapes` after the first, the fastest exactly priced (the first of equals); none if there
  // are no others.
  absl::StatusOr<std::optional<Priced>> FastestOther(const Call& call,
                                                     std::optional<int> plan_straggler,
                                                     absl::Span<const StragglarShape> shapes);
  // The flat schedule unless `fastest_other` is faster by kShapeMinGain.
  absl::StatusOr<Priced> FlatOrFastestOther(const Call& call, std::optional<int> plan_straggler,
                                            const StragglarShape& flat_shape,
                                            std::optional<Priced> fastest_other);

  PlanCache* plans_;
  std::vector<Algorithm> candidates_;
  double min_gain_;
  double calibrated_min_gain_;
};

}  // namespace stragglar
