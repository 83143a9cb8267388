// What the policy decides per call and reveals per epoch: the values every rank of a communicator
// holds alike, and what observers (metrics, traces) are given. Plain data, so that exporters can
// watch a communicator without depending on the runtime that drives it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/plan/plan.h"
#include "policy/model/network_model.h"
#include "policy/stragglar_shape.h"
#include "profiler/arrival.h"

namespace stragglar {

struct CallDecision {
  int64_t call = 0;  // 0-based call index on this communicator
  Algorithm algorithm = Algorithm::kRing;
  std::optional<int> straggler;  // StragglAR's straggler
  // StragglAR's shape as the chooser picked it; nullopt: the plan cache's default for the size
  // (a forced or replayed StragglAR).
  std::optional<StragglarShape> shape;
  double predicted_s = 0;          // model: completion of the chosen plan (0 when not modelled)
  double default_predicted_s = 0;  // model: completion of the default algorithm
  bool explored = false;           // an exploration call, not the policy's best guess
};

// One call as the epoch exchange revealed it: the same on every rank.
struct EpochCallReport {
  int64_t bytes = 0;
  CallDecision decision;           // what ran
  std::vector<CallTiming> timing;  // by rank
  std::vector<double> lag_s;       // by rank: arrival behind the earliest rank's
  // Estimated time this call saved against the default algorithm: the model's time for the
  // default on this call's lags (calibrated) minus the measured time, both the shortest duration
  // over the ranks (the time after the last arrival, as the calibration compares them). Negative
  // when the choice was slower; 0 when the default ran or nothing could be measured.
  double saved_s = 0;
};

// What an epoch exchange revealed, for observers (exporters, traces): every call of the epoch and
// the detector's verdict after it.
struct EpochReport {
  int64_t epoch = 0;       // 0-based
  int64_t first_call = 0;  // call index of calls[0]
  std::vector<EpochCallReport> calls;
  std::optional<int> straggler;
  std::vector<double> persistence;  // by rank: share of the detector's window it lagged
  // The link the policy prices transfers on (on a machine of nodes, the one inside a node): the
  // link probe's measure, with the rank behind a slow link where the probe found one.
  LinkModel link;
  // By rank: each rank's own link as the slow-link probe last measured it, each way; empty where
  // the probe does not look for a slow link (LooksForSlowRank).
  std::vector<RankLinkSpeed> link_speeds;
  // The largest move of a measured algorithm's calibration this epoch, either way (>= 1;
  // Calibration::CloseEpoch): a link that slowed or recovered moves it.
  double calibration_move = 1;
};

// A change of the detector's verdict, taken at an epoch exchange.
struct DetectionEvent {
  int64_t call = 0;              // the last call of the epoch whose data led to it
  std::optional<int> straggler;  // the newly named rank; nullopt when it was cleared
  double persistence = 0;        // of the named (or cleared) rank, at that moment
  double mean_lag_s = 0;         // likewise
};

}  // namespace stragglar
