// Scripted calls for the protocol's equivalence tests (communicator_test, mpi/protocol_check):
// every rank's timing of every call, known in advance, and the policy configuration they run
// with, so that an online run and a replay can be fed exactly the same.
#pragma once

#include <cstdint>

#include "policy/policy_config.h"
#include "policy/reports.h"
#include "profiler/arrival.h"

namespace stragglar::scripted {

// The ranks arrive together until `late_rank` turns 20 ms late at call 20; a call's duration is
// what its algorithm costs after the last arrival plus the wait for it, so the calibration sees
// StragglAR and Ring cost differently.
inline CallTiming Timing(int late_rank, int rank, int64_t call, const CallDecision& decision) {
  const double late_s = call >= 20 ? 20e-3 : 0.0;
  const double arrival_s = 1.0 * call + (rank == late_rank ? late_s : 0.0);
  const double cost_s = decision.algorithm == Algorithm::kStragglar ? 1.5e-3 : 3e-3;
  return {.arrival_s = arrival_s, .duration_s = 1.0 * call + late_s - arrival_s + cost_s};
}

// Short epochs and windows, exploration one call in 8, Ring and StragglAR: a few dozen calls
// exercise detection, calibration and exploration.
inline RuntimeConfig Config() {
  RuntimeConfig config;
  config.epoch_calls = 8;
  config.explore_every = 8;
  config.detector.window_calls = 16;
  config.detector.min_calls = 8;
  config.candidates = {Algorithm::kRing, Algorithm::kStragglar};
  return config;
}

}  // namespace stragglar::scripted
