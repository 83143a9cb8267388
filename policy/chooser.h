// Chooser v1: simulates each candidate plan with the discrete-event model on the predicted arrival
// vector and the message size, and picks the fastest. Deterministic: the same inputs give the same
// choice on every rank. The first candidate is the default: another one is chosen only when it is
// predicted to save more than `min_gain` times the default's time after the last arrival, because
// a smaller predicted gain is within the model's error and switching for it can lose (seen on hosts
// where Halving-Doubling's larger messages run slower than the alpha-beta model says). Once the
// calibration has measured both the default and the candidate on this message size, the model's
// error is known to be small and the bar drops to `calibrated_min_gain`. Among the others, ties
// keep the earlier. StragglAR is tried around the named straggler and around the rank predicted
// to arrive last (with several late ranks, the one that pays most wins). Each candidate takes the
// calibration factor of the regime the predicted arrivals put it in.
#pragma once

#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/plan.h"
#include "policy/calibration.h"
#include "policy/simulator.h"

namespace stragglar {

// One candidate as the chooser priced it: what exploration needs to weigh running it instead.
struct CandidatePrice {
  Algorithm algorithm = Algorithm::kRing;
  std::optional<int> straggler;  // StragglAR's: the named straggler, else the rank predicted last
  double predicted_s = 0;        // completion from the first arrival (calibrated)
  int samples = 0;               // the calibration's samples of it on this size, in its regime
};

struct Choice {
  Algorithm algorithm = Algorithm::kRing;
  std::optional<int> straggler;     // set when algorithm == kStragglar
  double predicted_s = 0;           // completion from the first arrival (calibrated)
  double baseline_predicted_s = 0;  // the first candidate's prediction (what choosing saves)
  // Every candidate that applies, in candidate order (StragglAR around its first straggler).
  std::vector<CandidatePrice> priced;
};

class Chooser {
 public:
  // `candidates` in tie-break order, the default first; StragglAR is considered only when a
  // straggler is given. `forced_pieces` > 0 fixes StragglarPieces (a benchmark knob).
  Chooser(int num_ranks, std::vector<Algorithm> candidates, double min_gain = 0.05,
          double calibrated_min_gain = 0.01, int forced_pieces = 0);

  // `calibration` (optional) corrects each candidate's predicted time after the last arrival.
  absl::StatusOr<Choice> Choose(double bytes, absl::Span<const double> predicted_arrival_s,
                                std::optional<int> straggler, const LinkModel& link,
                                const Calibration* calibration = nullptr);

  const std::vector<Algorithm>& candidates() const { return candidates_; }

  // The plan the chooser simulates for (algorithm, straggler) and a call of `bytes` on `link`,
  // built once and kept: executors run exactly the plan that was priced. StragglAR's plan is
  // pipelined with StragglarPieces(bytes, link) pieces per chunk.
  absl::StatusOr<const Plan*> PlanFor(Algorithm algorithm, std::optional<int> straggler,
                                      double bytes, const LinkModel& link);

  // Pieces per chunk of StragglAR's plans for `bytes` on `link`: of 1, 2, 4, 8 and 16 (at most
  // kMaxPipelinedPieces pieces in all), the one whose post-arrival rounds the model prices fastest
  // (more pieces keep the straggler's link busier but cost alpha per round); ties keep fewer
  // pieces. A function of its inputs alone, so every rank picks the same. With forced pieces:
  // those, lowered to fit kMaxPipelinedPieces.
  absl::StatusOr<int> StragglarPieces(double bytes, const LinkModel& link);

  // The calibration regime of `plan` on a call of `bytes` with these arrivals: kPhaseHidden when
  // its straggler arrives later than every other rank by at least the model's time for the plan's
  // pre-arrival rounds (ranks arriving together), else kPhaseExposed. InvalidArgument as
  // SimulatePlan.
  static absl::StatusOr<CalibrationRegime> RegimeOf(const Plan& plan, double bytes,
                                                    const LinkModel& link,
                                                    absl::Span<const double> arrival_s);

 private:
  absl::StatusOr<const Plan*> PlanWithPieces(Algorithm algorithm, std::optional<int> straggler,
                                             int pieces);

  int num_ranks_;
  std::vector<Algorithm> candidates_;
  double min_gain_;
  double calibrated_min_gain_;
  int forced_pieces_;
  // (algorithm, straggler or -1, pieces) -> plan; plans are immutable once built.
  std::map<std::tuple<Algorithm, int, int>, Plan> plans_;
  // (bytes, alpha, bandwidth, lanes) -> StragglarPieces, which simulates every depth once.
  std::map<std::tuple<int64_t, double, double, double>, int> pieces_;
};

}  // namespace stragglar
