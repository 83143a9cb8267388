#include "runtime/link_probe.h"

#include <algorithm>
#include <limits>
#include <vector>

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
  double large_s = std::numeric_limits<double>::infinity();
  for (int batch = 0; batch < std::max(spec.large_batches, 1); ++batch) {
    absl::StatusOr<double> large =
        backend.RingRoundSeconds(kProbeLargeBytes, spec.large_repeats, peers);
    if (!large.ok()) return large.status();
    large_s = std::min(large_s, *large);
  }
  double measured[2] = {*small, large_s};
  if (absl::Status status = backend.MaxOverRanks(measured); !status.ok()) return status;
  // Every rank takes part in every probe round, whatever its class.
  return LinkFromRingRounds(measured[0], measured[1], kProbeLargeBytes, num_ranks,
                            spec.shared_lanes);
}

std::optional<LinkModel> SlowRankFromRounds(const LinkModel& link, absl::Span<const double> round_s,
                                            int64_t large_bytes) {
  const int num_ranks = static_cast<int>(round_s.size());
  if (num_ranks < kSlowRankMinRanks) return std::nullopt;
  std::vector<double> sorted(round_s.begin(), round_s.end());
  std::nth_element(sorted.begin(), sorted.begin() + num_ranks / 2, sorted.end());
  const double median_s = sorted[num_ranks / 2];
  const int slowest =
      static_cast<int>(std::max_element(round_s.begin(), round_s.end()) - round_s.begin());
  // Above the round of small messages: what the bytes cost.
  const double median_bytes_s = median_s - link.alpha_s;
  const double slowest_bytes_s = round_s[slowest] - link.alpha_s;
  if (!(median_bytes_s > 0) || !(slowest_bytes_s >= kSlowRankRatio * median_bytes_s)) {
    return std::nullopt;
  }
  LinkModel slow =
      LinkFromRingRounds(link.alpha_s, median_s, large_bytes, num_ranks, link.shared_lanes);
  slow.alpha_s = link.alpha_s;
  slow.slow_rank = slowest;
  slow.slow_factor = slowest_bytes_s / median_bytes_s;
  return slow;
}

absl::StatusOr<LinkModel> ProbeSlowRank(CommBackend& backend, int rank, int num_ranks,
                                        const LinkModel& link, int batches) {
  double least_s = std::numeric_limits<double>::infinity();
  for (int offset : {1, 2}) {
    const RingPeers peers{.next = (rank + offset) % num_ranks,
                          .previous = (rank + num_ranks - offset) % num_ranks};
    for (int batch = 0; batch < std::max(1, batches); ++batch) {
      absl::StatusOr<double> round = backend.RingRoundSeconds(kProbeLargeBytes, 1, peers);
      if (!round.ok()) return round.status();
      least_s = std::min(least_s, *round);
    }
  }
  if (absl::Status status = backend.StartGather({&least_s, 1}); !status.ok()) return status;
  absl::StatusOr<std::vector<double>> gathered = backend.FinishGather();
  if (!gathered.ok()) return gathered.status();
  if (static_cast<int>(gathered->size()) != num_ranks) {
    return absl::InternalError(absl::StrCat("the slow-link probe gathered ", gathered->size(),
                                            " times from ", num_ranks, " ranks"));
  }
  return SlowRankFromRounds(link, *gathered, kProbeLargeBytes).value_or(link);
}

bool LooksForSlowRank(int num_ranks, const std::optional<Topology>& topology,
                      const LinkProbeSpec& spec) {
  const bool one_class =
      !topology.has_value() || !topology->multi_node() || topology->ranks_per_node == 1;
  return one_class && spec.find_slow_rank && num_ranks >= kSlowRankMinRanks &&
         spec.shared_lanes == 0;
}

absl::StatusOr<ProbedLinks> ProbeLinks(CommBackend& backend, int rank, int num_ranks,
                                       const std::optional<Topology>& topology,
                                       const LinkProbeSpec& spec) {
  if (!topology.has_value() || !topology->multi_node()) {
    absl::StatusOr<LinkModel> link =
        ProbeLink(backend, num_ranks, FlatRingPeers(rank, num_ranks), spec);
    if (!link.ok()) return link.status();
    if (LooksForSlowRank(num_ranks, topology, spec)) {
      link = ProbeSlowRank(backend, rank, num_ranks, *link, spec.large_batches);
      if (!link.ok()) return link.status();
    }
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
  if (LooksForSlowRank(num_ranks, topology, spec)) {
    // Every link is a NIC's, of one class: a slow one is priced as on one node.
    inter = ProbeSlowRank(backend, rank, num_ranks, *inter, spec.large_batches);
    if (!inter.ok()) return inter.status();
  }
  links.inter_node = *inter;
  if (topology->ranks_per_node == 1) links.intra_node = *inter;
  return links;
}

std::string DescribeLink(const LinkModel& link) {
  std::string text =
      absl::StrCat("link: ", FormatSeconds(link.alpha_s), " + ",
                   absl::StrFormat("%.3g", link.bandwidth_bytes_per_s / 1e9), " GB/s per message");
  if (link.has_slow_rank()) {
    absl::StrAppend(&text, "; rank ", link.slow_rank, "'s link ",
                    absl::StrFormat("%.3g", link.slow_factor), "x slower");
  }
  return text;
}

}  // namespace stragglar
