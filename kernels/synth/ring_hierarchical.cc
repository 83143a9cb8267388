// The hierarchical ring on N nodes of G ranks (ranks node by node): the two-level ring a library
// runs when the links between nodes are the scarce ones, and the baseline StragglAR's families are
// compared with on such a machine. Only a G-th of the buffer crosses each NIC, as in NCCL's rings,
// but the levels run one after the other: the IR gives a rank one send and one receive per round.
//
// The buffer is G shards of N chunks; local rank g of every node owns shard g, and those ranks
// form rail g.
//  1. Inside every node, a ring ReduceScatter of the G shards: local g holds its node's sum of
//     shard g (G - 1 rounds).
//  2. Every rail runs a ring AllReduce over the nodes on its shard's N chunks (2(N - 1) rounds).
//  3. Inside every node, a ring AllGather of the shards (G - 1 rounds).
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {

namespace {

absl::Status CheckLayout(int nodes, int ranks_per_node) {
  if (nodes < 1 || ranks_per_node < 1 || nodes * ranks_per_node < 2) {
    return absl::InvalidArgumentError(absl::StrCat("hierarchical ring needs at least 2 ranks, got ",
                                                   nodes, " nodes of ", ranks_per_node));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PlanHeader> SynthesizeHierarchicalRingHeader(int nodes, int ranks_per_node) {
  if (absl::Status status = CheckLayout(nodes, ranks_per_node); !status.ok()) return status;
  const int num_ranks = nodes * ranks_per_node;
  if (nodes == 1 || ranks_per_node == 1) return SynthesizeRingHeader(num_ranks);
  return PlanHeader{.algorithm = Algorithm::kRing,
                    .num_ranks = num_ranks,
                    .num_chunks = num_ranks,
                    .variant = PlanVariant::kHierarchical,
                    .round_count = 2 * (ranks_per_node - 1) + 2 * (nodes - 1)};  // the four steps
}

absl::StatusOr<Plan> SynthesizeHierarchicalRing(int nodes, int ranks_per_node) {
  if (absl::Status status = CheckLayout(nodes, ranks_per_node); !status.ok()) return status;
  const int num_ranks = nodes * ranks_per_node;
  // One node, or one rank per node: there is only one level, and the flat ring is that level.
  if (nodes == 1 || ranks_per_node == 1) return SynthesizeRing(num_ranks);
  std::vector<std::vector<int>> node_rings(nodes, std::vector<int>(ranks_per_node));
  std::vector<std::vector<int>> rails(ranks_per_node, std::vector<int>(nodes));
  for (int node = 0; node < nodes; ++node) {
    for (int local = 0; local < ranks_per_node; ++local) {
      node_rings[node][local] = rails[local][node] = node * ranks_per_node + local;
    }
  }
  Plan plan{.algorithm = Algorithm::kRing,
            .num_ranks = num_ranks,
            .num_chunks = num_ranks,
            .variant = PlanVariant::kHierarchical};
  const auto add_round = [&](auto&& append_step) {
    Round& round = plan.rounds.emplace_back();
    round.transfers.reserve(num_ranks);
    append_step(round.transfers);
  };
  for (int step = 0; step + 1 < ranks_per_node; ++step) {
    add_round([&](std::vector<Transfer>& transfers) {
      for (const std::vector<int>& ring : node_rings) {
        AppendRingReduceScatterStep(ring, step, 0, nodes, transfers);
      }
    });
  }
  for (int step = 0; step + 1 < nodes; ++step) {
    add_round([&](std::vector<Transfer>& transfers) {
      for (int rail = 0; rail < ranks_per_node; ++rail) {
        AppendRingReduceScatterStep(rails[rail], step, rail * nodes, 1, transfers);
      }
    });
  }
  for (int step = 0; step + 1 < nodes; ++step) {
    add_round([&](std::vector<Transfer>& transfers) {
      for (int rail = 0; rail < ranks_per_node; ++rail) {
        AppendRingAllGatherStep(rails[rail], step, rail * nodes, 1, transfers);
      }
    });
  }
  for (int step = 0; step + 1 < ranks_per_node; ++step) {
    add_round([&](std::vector<Transfer>& transfers) {
      for (const std::vector<int>& ring : node_rings) {
        AppendRingAllGatherStep(ring, step, 0, nodes, transfers);
      }
    });
  }
  return plan;
}

}  // namespace stragglar
