#include "runtime/link_probe.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/units.h"

namespace stragglar {

LinkModel LinkFromRingRounds(double small_s, double large_s, int64_t large_bytes, int num_ranks,
                             double shared_lanes) {
  const double slowdown = shared_lanes > 0 ? std::max(1.0, num_ranks / shared_lanes) : 1.0;
  // A large round no slower than a small one measured no bandwidth limit: a tiny positive
  // difference keeps the model finite.
  const double per_byte =
      std::max(large_s - small_s, 1e-12) / (large_bytes - kProbeSmallBytes) / slowdown;
  return LinkModel{.alpha_s = std::max(small_s, 1e-7),
                   .bandwidth_bytes_per_s = 1.0 / per_byte,
                   .shared_lanes = shared_lanes};
}

RingPeers FlatRingPeers(int rank, int num_ranks) {
  return {.next = (rank + 1) % num_ranks, .previous = (rank + num_ranks - 1) % num_ranks};
}

RingPeers NodeRingPeers(int rank, const Topology& topology) {
  const int g = topology.ranks_per_node;
  const int first = rank / g * g;
  return {.next = first + (rank - first + 1) % g, .previous = first + (rank - first + g - 1) % g};
}

RingPeers RailRingPeers(int rank, const Topology& topology) {
  const int g = topology.ranks_per_node;
  const int n = topology.num_ranks();
  return {.next = (rank + g) % n, .previous = (rank + n - g) % n};
}

absl::StatusOr<LinkModel> ProbeLink(CommBackend& backend, int num_ranks, RingPeers peers,
                                    const LinkProbeSpec& spec) {
  absl::StatusOr<double> warm = backend.RingRoundSeconds(kProbeLargeBytes, 1, peers);
  if (!warm.ok()) return warm.status();
  absl::StatusOr<double> small =
      backend.RingRoundSeconds(kProbeSmallBytes, spec.small_repeats, peers);
  if (!small.ok()) return small.status();
  absl::StatusOr<double> large =
      backend.RingRoundSeconds(kProbeLargeBytes, spec.large_repeats, peers);
  if (!large.ok()) return large.status();
  double measured[2] = {*small, *large};
  if (absl::Status status = backend.MaxOverRanks(measured); !status.ok()) return status;
  // Every rank takes part in every probe round, whatever its class.
  return LinkFromRingRounds(measured[0], measured[1], kProbeLargeBytes, num_ranks,
                            spec.shared_lanes);
}

absl::StatusOr<ProbedLinks> ProbeLinks(CommBackend& backend, int rank, int num_ranks,
                                       const std::optional<Topology>& topology,
                                       const LinkProbeSpec& spec) {
  if (!topology.has_value() || !topology->multi_node()) {
    absl::StatusOr<LinkModel> link =
        ProbeLink(backend, num_ranks, FlatRingPeers(rank, num_ranks), spec);
    if (!link.ok()) return link.status();
    return ProbedLinks{.intra_node = *link};
  }
  if (topology->num_ranks() != num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("topology ", TopologyName(*topology), " has ",
                                                   topology->num_ranks(),
                                                   " ranks, the communicator ", num_ranks));
  }
  // One rank per node: there is no ring inside a node, and every hop crosses nodes.
  ProbedLinks links;
  if (topology->ranks_per_node > 1) {
    absl::StatusOr<LinkModel> intra =
        ProbeLink(backend, num_ranks, NodeRingPeers(rank, *topology), spec);
    if (!intra.ok()) return intra.status();
    links.intra_node = *intra;
  }
  absl::StatusOr<LinkModel> inter =
      ProbeLink(backend, num_ranks, RailRingPeers(rank, *topology), spec);
  if (!inter.ok()) return inter.status();
  links.inter_node = *inter;
  if (topology->ranks_per_node == 1) links.intra_node = *inter;
  return links;
}

std::string DescribeLink(const LinkModel& link) {
  return absl::StrCat("link: ", FormatSeconds(link.alpha_s), " + ",
                      absl::StrFormat("%.3g", link.bandwidth_bytes_per_s / 1e9),
                      " GB/s per message");
}

}  // namespace stragglar
