// Where ranks sit: N nodes of G ranks each, ranks numbered node by node (what launchers do:
// rank r is on node r / G). Two ranks on one node talk over NVLink, two on different nodes over
// their NICs, and the cost model prices the two classes differently.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace stragglar {

enum class LinkClass : uint8_t { kIntraNode, kInterNode };

// "intra-node", "inter-node".
absl::string_view LinkClassName(LinkClass link_class);

struct Topology {
  int nodes = 1;
  int ranks_per_node = 1;

  // Every rank on one node: the flat machine every model before topologies assumed.
  static Topology Flat(int num_ranks) { return {.nodes = 1, .ranks_per_node = num_ranks}; }

  int num_ranks() const { return nodes * ranks_per_node; }
  int NodeOf(int rank) const { return rank / ranks_per_node; }
  int LocalRank(int rank) const { return rank % ranks_per_node; }
  LinkClass Between(int a, int b) const {
    return NodeOf(a) == NodeOf(b) ? LinkClass::kIntraNode : LinkClass::kInterNode;
  }
  // Whether any pair of ranks is on different nodes.
  bool multi_node() const { return nodes > 1; }

  friend bool operator==(const Topology&, const Topology&) = default;
};

// "NxG" (also "NXG"): N >= 1 nodes of G >= 1 ranks, at most 65536 ranks in all. Errors quote the
// text and say what is expected.
absl::StatusOr<Topology> ParseTopology(absl::string_view text);
// "4x8".
std::string TopologyName(const Topology& topology);

// The topology of ranks whose node identities (any value equal on the ranks of one node: a host
// hash, a node leader's rank) are `node_of_rank`, rank by rank. InvalidArgument when the ranks are
// not numbered node by node ("rank 4 is on the node of rank 0 again, after other nodes") or nodes
// hold different numbers of ranks ("node of rank 0 has 3 ranks, node of rank 3 has 2"): the model
// of nodes assumes both. An empty span is InvalidArgument too.
absl::StatusOr<Topology> TopologyFromNodeIds(absl::Span<const int64_t> node_of_rank);

}  // namespace stragglar
