// What a policy learned, kept across restarts by the runtime's state file
// (runtime/state_file.h): the cost model's calibration per algorithm and size bucket, every
// rank's predicted lag, and the named straggler.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "policy/calibration.h"

namespace stragglar {

struct LearnedState {
  int num_ranks = 0;
  std::string machine;  // where it was learned (MachineId): elsewhere it does not apply
  Calibration calibration;
  std::vector<double> predicted_lag_s;  // per rank
  std::optional<int> straggler;
};

}  // namespace stragglar
