#include "policy/network_model.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace stragglar {

absl::Status ValidateLink(const LinkModel& link) {
  if (!(link.alpha_s >= 0) || !std::isfinite(link.alpha_s) || !(link.bandwidth_bytes_per_s > 0) ||
      !(link.shared_lanes >= 0)) {
    return absl::InvalidArgumentError("alpha must be >= 0, bandwidth > 0 and shared lanes >= 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateNetwork(const NetworkModel& network) {
  if (absl::Status status = ValidateLink(network.intra_node); !status.ok()) {
    if (!network.topology.multi_node()) return status;
    return absl::InvalidArgumentError(absl::StrCat("intra-node link: ", status.message()));
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
