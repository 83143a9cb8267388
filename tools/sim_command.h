// `stragglar sim`: every candidate priced on the same arrivals. Plans (Ring, Halving-Doubling,
// StragglAR) are simulated transfer by transfer; on a machine of nodes NCCL's own ring and tree
// are priced in closed form (policy/nccl_models.h), so StragglAR is compared with what NCCL would
// really run there. Prints a table, or the JSON contract of README's "stragglar sim".
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "policy/model/network_model.h"

namespace stragglar {

struct SimArgs {
  NetworkModel network;  // its topology gives the rank count (flat: one node of --ranks)
  int straggler = 0;
  int64_t bytes = 0;
  double delay_s = 0;
  std::string algorithms;  // comma-separated; empty: the default for the topology
  // Price plans with one queue per link class (policy/queue_simulator.h), not round by round.
  // Break-even delays are then not computed (their bisection is the round model's).
  bool per_class_queues = false;
  bool json = false;
  bool progress = false;  // a progress line on stderr even when it is not a terminal
};

// InvalidArgument naming the bad value.
absl::Status RunSimCommand(const SimArgs& args, std::ostream& out);

}  // namespace stragglar
