#include "policy/model/network_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace stragglar {

absl::Status ValidateLink(const LinkModel& link) {
  if (!(link.alpha_s >= 0) || !std::isfinite(link.alpha_s) || !(link.bandwidth_bytes_per_s > 0) ||
      !(link.shared_lanes >= 0)) {
    return absl::InvalidArgumentError("alpha must be >= 0, bandwidth > 0 and shared lanes >= 0");
  }
  if (link.slow_rank < -1 || !(link.slow_factor >= 1) || !std::isfinite(link.slow_factor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a slow link needs a rank >= 0 (-1: none) and a "
                     "finite factor >= 1, got rank ",
                     link.slow_rank, " at ", link.slow_factor));
  }
  return absl::OkStatus();
}

absl::Status ValidateNetwork(const NetworkModel& network) {
  if (absl::Status status = ValidateLink(network.intra_node); !status.ok()) {
    if (!network.topology.multi_node()) return status;
    return absl::InvalidArgumentError(absl::StrCat("intra-node link: ", status.message()));
  }
  if (network.intra_node.has_slow_rank() || network.inter_node.has_slow_rank()) {
    const int slow_rank = std::max(network.intra_node.slow_rank, network.inter_node.slow_rank);
    if (network.topology.multi_node() && network.topology.ranks_per_node > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("a slow link is priced where every link is of one class (one node, or "
                       "nodes of one rank), not on ",
                       TopologyName(network.topology), " (rank ", slow_rank, ")"));
    }
    if (slow_rank >= network.topology.num_ranks()) {
      return absl::InvalidArgumentError(absl::StrCat("the slow link's rank ", slow_rank,
                                                     " is not one of the ",
                                                     network.topology.num_ranks(), " ranks"));
    }
  }
  if (!network.topology.multi_node()) return absl::OkStatus();  // the inter-node link is unused
  if (absl::Status status = ValidateLink(network.inter_node); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("inter-node link: ", status.message()));
  }
  if (network.topology.nodes < 1 || network.topology.ranks_per_node < 1) {
    return absl::InvalidArgumentError(absl::StrCat("topology ", TopologyName(network.topology),
                                                   " needs at least one node of one rank"));
  }
  return absl::OkStatus();
}

}  // namespace stragglar
