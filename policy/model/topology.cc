#include "policy/model/topology.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace stragglar {

absl::string_view LinkClassName(LinkClass link_class) {
  return link_class == LinkClass::kIntraNode ? "intra-node" : "inter-node";
}

absl::StatusOr<Topology> ParseTopology(absl::string_view text) {
  constexpr int kMaxRanks = 65536;
  const std::string lowered = absl::AsciiStrToLower(text);
  const std::vector<absl::string_view> parts = absl::StrSplit(lowered, 'x');
  int nodes = 0;
  int ranks_per_node = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &nodes) ||
      !absl::SimpleAtoi(parts[1], &ranks_per_node) || nodes < 1 || ranks_per_node < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology \"", text, "\" is not NxG (N >= 1 nodes of G >= 1 ranks, e.g. 4x8)"));
  }
  if (static_cast<int64_t>(nodes) * ranks_per_node > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology \"", text, "\" has ", static_cast<int64_t>(nodes) * ranks_per_node,
                     " ranks; at most ", kMaxRanks, " are supported"));
  }
  return Topology{.nodes = nodes, .ranks_per_node = ranks_per_node};
}

std::string TopologyName(const Topology& topology) {
  return absl::StrCat(topology.nodes, "x", topology.ranks_per_node);
}

absl::StatusOr<Topology> TopologyFromNodeIds(absl::Span<const int64_t> node_of_rank) {
  if (node_of_rank.empty()) return absl::InvalidArgumentError("no ranks to place on nodes");
  const int num_ranks = static_cast<int>(node_of_rank.size());
  // Each node's ranks must be one run of consecutive ranks, and every run as long as the first.
  absl::flat_hash_map<int64_t, int> first_rank_of_node;
  int run_start = 0;
  int ranks_per_node = 0;
  for (int rank = 0; rank <= num_ranks; ++rank) {
    if (rank < num_ranks && rank > 0 && node_of_rank[rank] == node_of_rank[rank - 1]) continue;
    if (rank > 0) {  // the run [run_start, rank) ends here
      const int run = rank - run_start;
      if (ranks_per_node == 0) ranks_per_node = run;
      if (run != ranks_per_node) {
        return absl::InvalidArgumentError(
            absl::StrCat("nodes hold different numbers of ranks: the node of rank 0 has ",
                         ranks_per_node, ", the node of rank ", run_start, " has ", run));
      }
    }
    if (rank == num_ranks) break;
    const auto [seen, inserted] = first_rank_of_node.emplace(node_of_rank[rank], rank);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("ranks are not numbered node by node: rank ",
                                                     rank, " is on the node of rank ", seen->second,
                                                     " again, after other nodes"));
    }
    run_start = rank;
  }
  return Topology{.nodes = num_ranks / ranks_per_node, .ranks_per_node = ranks_per_node};
}

}  // namespace stragglar
