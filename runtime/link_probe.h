// The link model a communicator prices plans with, measured as a plan sees the link: one ring
// round (every rank sends to the next and receives from the previous, all at once, so contention
// is included) of tiny messages gives alpha; one of large messages, beta. One formula for every
// backend; each backend only times its own ring rounds. On a machine of nodes each link class is
// probed on its own rings: the rings inside the nodes, then the rails' rings over the nodes (the
// hierarchical ring's two steps), so a slow hop between nodes does not set the price of NVLink.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "policy/simulator.h"
#include "policy/topology.h"
#include "runtime/comm_backend.h"

namespace stragglar {

// How many rounds a probe times, and how the transfers share the machine.
struct LinkProbeSpec {
  int small_repeats = 16;
  int large_repeats = 2;
  // 0: every transfer has a link of its own; P > 0: the ranks share P cores (ranks of one host),
  // so a round of n transfers runs n / P times slower than one alone.
  double shared_lanes = 0;
};

inline constexpr int64_t kProbeSmallBytes = 64;
// Large enough that the ranks' buffers spill out of the caches, as a big AllReduce's do.
inline constexpr int64_t kProbeLargeBytes = 4 << 20;

// alpha = a round of kProbeSmallBytes messages; beta = the extra time per extra byte of a round
// of `large_bytes` ones, scaled to one transfer with a lane of its own.
LinkModel LinkFromRingRounds(double small_s, double large_s, int64_t large_bytes, int num_ranks,
                             double shared_lanes);

// Rank `rank`'s peers in a probe round: the ring through every rank (0, 1, ..., n - 1), the ring
// through the ranks of its node, or the ring of its rail (local rank g of every node) over the
// nodes.
RingPeers FlatRingPeers(int rank, int num_ranks);
RingPeers NodeRingPeers(int rank, const Topology& topology);
RingPeers RailRingPeers(int rank, const Topology& topology);

// Times the rounds through `backend` on `peers` (a warm-up round of large messages first:
// connections and buffers are touched), takes the slowest rank's times, and returns
// LinkFromRingRounds of them: the same model on every rank. Collective.
absl::StatusOr<LinkModel> ProbeLink(CommBackend& backend, int num_ranks, RingPeers peers,
                                    const LinkProbeSpec& spec);

struct ProbedLinks {
  LinkModel intra_node;
  std::optional<LinkModel> inter_node;  // set on a machine of several nodes
};

// Rank `rank`'s side of the probe: on a machine of several nodes (`topology`), each class on its
// own rings; otherwise one link, on the ring through every rank. Collective: every rank must pass
// the same topology.
absl::StatusOr<ProbedLinks> ProbeLinks(CommBackend& backend, int rank, int num_ranks,
                                       const std::optional<Topology>& topology,
                                       const LinkProbeSpec& spec);

// The link model a communicator measured, for its log line: "link: 12.5 us + 1.52 GB/s per
// message".
std::string DescribeLink(const LinkModel& link);

}  // namespace stragglar
