// `stragglar plan`: one synthesized plan, as a round-by-round table or the plan JSON contract
// (docs/plans.md) that `stragglar verify` reads back. Beyond the three algorithms it prints
// StragglAR's scale families: hierarchical (--topology NxG) and log-depth
// (--algorithm stragglar-log-depth, --pieces blocks).
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "policy/model/topology.h"

namespace stragglar {

struct PlanArgs {
  std::string algorithm;  // ring, halving-doubling, stragglar or stragglar-log-depth
  int num_ranks = 0;      // --ranks, or the topology's
  std::optional<Topology> topology;
  std::optional<int> straggler;  // --straggler, already checked against num_ranks
  int pieces = 1;
  bool json = false;
};

// InvalidArgument naming the flag that does not apply, or the bad value.
absl::Status RunPlanCommand(const PlanArgs& args, std::ostream& out);

}  // namespace stragglar
