#include "policy/topology.h"

#include <vector>

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

}  // namespace stragglar
