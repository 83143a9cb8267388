// The alpha-beta cost of a transfer: one link model per link class. A flat machine has one class;
// a machine of nodes has two (NVLink inside a node, a NIC per GPU between nodes), and every
// transfer is priced by the class of the pair it joins.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "absl/status/status.h"
#include "policy/model/topology.h"

namespace stragglar {

struct LinkModel {
  double alpha_s = 3e-6;                               // per-message latency
  double bandwidth_bytes_per_s = 450.0 * (1LL << 30);  // per-direction link bandwidth
  // 0: every transfer has a link of its own (a switch fabric, the paper's model). P > 0: the
  // transfers of a round share P lanes, e.g. ranks that are threads on P cores, so a round of k
  // transfers moves each one max(1, k/P) times slower.
  double shared_lanes = 0;
  // One rank's link slower than the others (a degraded NIC, a bad cable, a congested port):
  // every transfer to or from `slow_rank` moves its bytes `slow_factor` times slower, in both
  // directions. -1: every link alike. Priced where every link is of one class: on one node, or on
  // nodes of one rank (ValidateNetwork), where it is the intra-node link's (both classes are
  // that one link).
  int slow_rank = -1;
  double slow_factor = 1;

  double TransferSeconds(double bytes) const { return alpha_s + bytes / bandwidth_bytes_per_s; }
  double TransferSeconds(double bytes, int transfers_in_round) const {
    const double slowdown =
        shared_lanes > 0 ? std::max(1.0, transfers_in_round / shared_lanes) : 1.0;
    return alpha_s + bytes * slowdown / bandwidth_bytes_per_s;
  }
  double beta() const { return 1.0 / bandwidth_bytes_per_s; }
  bool has_slow_rank() const { return slow_rank >= 0; }
  // The bandwidth of `rank`'s own link: the slow rank's is slow_factor times lower.
  double RankBandwidth(int rank) const {
    return rank == slow_rank ? bandwidth_bytes_per_s / slow_factor : bandwidth_bytes_per_s;
  }
  // This link with its slow rank renamed (`rename`: a rank's new name), for pricing a plan through
  // the plan it renames.
  template <typename Rename>
  LinkModel WithSlowRankRenamed(Rename rename) const {
    LinkModel renamed = *this;
    if (has_slow_rank()) renamed.slow_rank = rename(slow_rank);
    return renamed;
  }
};

// One rank's own link as the slow-link probe measured it (runtime/link_probe.h), in bytes per
// second each way: from each ring's fastest batch of rounds, and from its slowest (the spread a
// shared machine's noise gives). What the metrics, the trace and the log show; the price is
// LinkModel's.
struct RankLinkSpeed {
  double send_bytes_per_s = 0;
  double receive_bytes_per_s = 0;
  double slowest_send_bytes_per_s = 0;
  double slowest_receive_bytes_per_s = 0;
  friend bool operator==(const RankLinkSpeed&, const RankLinkSpeed&) = default;
};

// What a memo of prices on a link is keyed by: the message size and every field of the link.
using LinkKey = std::tuple<int64_t, double, double, double, int, double>;
inline LinkKey KeyOf(double bytes, const LinkModel& link) {
  return {static_cast<int64_t>(bytes), link.alpha_s,   link.bandwidth_bytes_per_s,
          link.shared_lanes,           link.slow_rank, link.slow_factor};
}

// InvalidArgument unless alpha >= 0 and finite, bandwidth > 0, shared lanes >= 0, the slow rank
// >= -1 and the slow factor finite and >= 1.
absl::Status ValidateLink(const LinkModel& link);

// What a typical H100 node has between nodes: one 400 Gb/s NIC per GPU (about 50 GB/s each way)
// and about 10 us per message (docs/scale.md, "What NCCL runs at scale").
inline constexpr LinkModel kTypicalInterNodeLink{.alpha_s = 10e-6, .bandwidth_bytes_per_s = 50e9};

struct NetworkModel {
  Topology topology;
  LinkModel intra_node;
  LinkModel inter_node;

  // One class: every pair priced by `link` (the flat model).
  static NetworkModel Flat(int num_ranks, const LinkModel& link) {
    return {.topology = Topology::Flat(num_ranks), .intra_node = link, .inter_node = link};
  }

  const LinkModel& Of(LinkClass link_class) const {
    return link_class == LinkClass::kIntraNode ? intra_node : inter_node;
  }
  const LinkModel& Between(int a, int b) const { return Of(topology.Between(a, b)); }
};

// ValidateLink for both classes, naming the class at fault; a slow rank only where every link is
// of one class (one node, or nodes of one rank), within the topology's ranks.
absl::Status ValidateNetwork(const NetworkModel& network);

}  // namespace stragglar
