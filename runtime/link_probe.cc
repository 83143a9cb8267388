#include "runtime/link_probe.h"

#include <algorithm>
#include <limits>
#include <utility>
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

std::vector<RankLinkSpeed> RankLinkSpeeds(const LinkModel& link,
                                          absl::Span<const SlowLinkRounds> rounds,
                                          int64_t large_bytes) {
  const int n = static_cast<int>(rounds.size());
  const auto of = [n](int rank) { return ((rank % n) + n) % n; };
  // The fastest round each end of each rank's link took part in, above alpha, as a speed.
  const auto speeds = [&](const auto& round_s) {
    std::vector<std::pair<double, double>> send_receive(static_cast<size_t>(n));
    for (int rank = 0; rank < n; ++rank) {
      double send_s = std::min(round_s(rank, 0), round_s(rank, 1));
      double receive_s = send_s;
      for (int ring = 0; ring < 2; ++ring) {
        const int offset = ring + 1;
        send_s = std::min(send_s, round_s(of(rank + offset), ring));
        receive_s = std::min(receive_s, round_s(of(rank - offset), ring));
      }
      const auto speed = [&](double round) {
        return (large_bytes - kProbeSmallBytes) / std::max(round - link.alpha_s, 1e-12);
      };
      send_receive[rank] = {speed(send_s), speed(receive_s)};
    }
    return send_receive;
  };
  const auto fastest = speeds([&](int rank, int ring) { return rounds[rank].fastest_s[ring]; });
  const auto slowest = speeds([&](int rank, int ring) { return rounds[rank].slowest_s[ring]; });
  std::vector<RankLinkSpeed> result(static_cast<size_t>(n));
  for (int rank = 0; rank < n; ++rank) {
    result[rank] = {.send_bytes_per_s = fastest[rank].first,
                    .receive_bytes_per_s = fastest[rank].second,
                    .slowest_send_bytes_per_s = slowest[rank].first,
                    .slowest_receive_bytes_per_s = slowest[rank].second};
  }
  return result;
}

std::optional<LinkModel> SlowRankFromSpeeds(const LinkModel& link,
                                            absl::Span<const RankLinkSpeed> speeds) {
  const int num_ranks = static_cast<int>(speeds.size());
  if (num_ranks < kSlowRankMinRanks) return std::nullopt;
  std::vector<double> each_way;
  for (const RankLinkSpeed& speed : speeds) {
    each_way.push_back(speed.send_bytes_per_s);
    each_way.push_back(speed.receive_bytes_per_s);
  }
  if (std::any_of(each_way.begin(), each_way.end(), [](double speed) { return !(speed > 0); })) {
    return std::nullopt;
  }
  // The lower median of the 2n speeds: with one rank slow both ways, the fast ranks' own.
  const size_t median = each_way.size() / 2 - 1;
  const int slowest =
      static_cast<int>((std::min_element(each_way.begin(), each_way.end()) - each_way.begin()) / 2);
  const double slowest_speed =
      std::min(speeds[slowest].send_bytes_per_s, speeds[slowest].receive_bytes_per_s);
  std::nth_element(each_way.begin(), each_way.begin() + median, each_way.end());
  const double median_speed = each_way[median];
  if (!(median_speed >= kSlowRankRatio * slowest_speed)) return std::nullopt;
  LinkModel slow = link;
  slow.bandwidth_bytes_per_s = median_speed;
  slow.slow_rank = slowest;
  slow.slow_factor = median_speed / slowest_speed;
  return slow;
}

absl::StatusOr<SlowLinkProbe> ProbeSlowRank(CommBackend& backend, int rank, int num_ranks,
                                            const LinkModel& link, int batches) {
  SlowLinkRounds mine;
  for (int ring = 0; ring < 2; ++ring) {
    const int offset = ring + 1;
    const RingPeers peers{.next = (rank + offset) % num_ranks,
                          .previous = (rank + num_ranks - offset) % num_ranks};
    mine.fastest_s[ring] = std::numeric_limits<double>::infinity();
    for (int batch = 0; batch < std::max(1, batches); ++batch) {
      absl::StatusOr<double> round = backend.RingRoundSeconds(kProbeLargeBytes, 1, peers);
      if (!round.ok()) return round.status();
      mine.fastest_s[ring] = std::min(mine.fastest_s[ring], *round);
      mine.slowest_s[ring] = std::max(mine.slowest_s[ring], *round);
    }
  }
  const double sent[kSlowLinkGatherValues] = {mine.fastest_s[0], mine.fastest_s[1],
                                              mine.slowest_s[0], mine.slowest_s[1]};
  if (absl::Status status = backend.StartGather(sent); !status.ok()) return status;
  absl::StatusOr<std::vector<double>> gathered = backend.FinishGather();
  if (!gathered.ok()) return gathered.status();
  if (static_cast<int>(gathered->size()) != kSlowLinkGatherValues * num_ranks) {
    return absl::InternalError(absl::StrCat("the slow-link probe gathered ", gathered->size(),
                                            " times from ", num_ranks, " ranks (",
                                            kSlowLinkGatherValues, " each)"));
  }
  std::vector<SlowLinkRounds> rounds(static_cast<size_t>(num_ranks));
  for (int r = 0; r < num_ranks; ++r) {
    const double* each = gathered->data() + kSlowLinkGatherValues * r;
    rounds[r] = {.fastest_s = {each[0], each[1]}, .slowest_s = {each[2], each[3]}};
  }
  std::vector<RankLinkSpeed> speeds = RankLinkSpeeds(link, rounds, kProbeLargeBytes);
  const LinkModel probed = SlowRankFromSpeeds(link, speeds).value_or(link);
  return SlowLinkProbe{.link = probed, .speeds = std::move(speeds)};
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
    if (!LooksForSlowRank(num_ranks, topology, spec)) return ProbedLinks{.intra_node = *link};
    absl::StatusOr<SlowLinkProbe> slow =
        ProbeSlowRank(backend, rank, num_ranks, *link, spec.large_batches);
    if (!slow.ok()) return slow.status();
    return ProbedLinks{.intra_node = slow->link, .rank_speeds = std::move(slow->speeds)};
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
    absl::StatusOr<SlowLinkProbe> slow =
        ProbeSlowRank(backend, rank, num_ranks, *inter, spec.large_batches);
    if (!slow.ok()) return slow.status();
    inter = slow->link;
    links.rank_speeds = std::move(slow->speeds);
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

std::string DescribeLinkSpeeds(absl::Span<const RankLinkSpeed> speeds) {
  const auto speed = [](double fastest, double slowest) {
    std::string text = absl::StrFormat("%.4g", fastest / 1e6);
    if (slowest < 0.9 * fastest) absl::StrAppend(&text, absl::StrFormat(" (%.4g)", slowest / 1e6));
    return text;
  };
  std::string text = "links (send/receive, MB/s):";
  for (size_t rank = 0; rank < speeds.size(); ++rank) {
    const RankLinkSpeed& each = speeds[rank];
    absl::StrAppend(&text, rank == 0 ? " " : ", ", rank, " ",
                    speed(each.send_bytes_per_s, each.slowest_send_bytes_per_s), "/",
                    speed(each.receive_bytes_per_s, each.slowest_receive_bytes_per_s));
  }
  return text;
}

}  // namespace stragglar
