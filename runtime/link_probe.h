// The link model a communicator prices plans with, measured as a plan sees the link: one ring
// round (every rank sends to the next and receives from the previous, all at once, so contention
// is included) of tiny messages gives alpha; one of large messages, beta. One formula for every
// backend; each backend only times its own ring rounds. On a machine of nodes each link class is
// probed on its own rings: the rings inside the nodes, then the rails' rings over the nodes (the
// hierarchical ring's two steps), so a slow hop between nodes does not set the price of NVLink.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "policy/model/simulator.h"
#include "policy/model/topology.h"
#include "runtime/comm_backend.h"

namespace stragglar {

// How many rounds a probe times, and how the transfers share the machine.
struct LinkProbeSpec {
  int small_repeats = 16;
  int large_repeats = 2;
  // The large rounds are timed in this many batches of `large_repeats` each, and each rank keeps
  // its fastest batch: another job's burst or a descheduled rank only slows a round, and one slow
  // batch priced the link at half its speed on a shared machine (then cluster.switch, now part of
  // cluster.policy). 1 where one round is too short to time alone (a GPU's, whose launch would be
  // most of it).
  int large_batches = 1;
  // 0: every transfer has a link of its own; P > 0: the ranks share P cores (ranks of one host),
  // so a round of n transfers runs n / P times slower than one alone.
  double shared_lanes = 0;
  // Also look for one rank whose link is slow (ProbeSlowRank), where every link is of one class
  // (one machine, or nodes of one rank) and at least kSlowRankMinRanks ranks have links of their
  // own (shared_lanes 0).
  bool find_slow_rank = false;
};

// A rank's link is slow when its probe round takes at least this many times the median rank's,
// counted above the round of small messages. The bar is that a link that slows 2x is
// named, and the probe measures less than the cap: on emulated hosts (tc tbf) a link capped 5x
// lower measured 4.06-4.14x, and one capped 2x lower 1.92-1.97x with each ring's fastest of 3
// batches (1.79x, 1.88x and under 1.7x with one round per ring; 2026-11-29).
inline constexpr double kSlowRankRatio = 1.7;
// Fewer ranks cannot tell the slow rank from its neighbours: on 3, every rank is next to it in
// both of the probe's rings.
inline constexpr int kSlowRankMinRanks = 4;

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
// connections and buffers are touched; of the large rounds, each rank's fastest batch), takes the
// slowest rank's times, and returns LinkFromRingRounds of them: the same model on every rank.
// Collective.
absl::StatusOr<LinkModel> ProbeLink(CommBackend& backend, int num_ranks, RingPeers peers,
                                    const LinkProbeSpec& spec);

// One rank's rounds of kProbeLargeBytes in the slow-link probe, on the ring to the rank 1 after it
// ([0]) and on the ring to the rank 2 after it ([1]): each ring's fastest batch and its slowest.
struct SlowLinkRounds {
  std::array<double, 2> fastest_s{};
  std::array<double, 2> slowest_s{};
};
// What ProbeSlowRank gathers from each rank: a SlowLinkRounds. A backend whose gather holds a fixed
// number of values (the NCCL one's, sized by the epoch) holds at least this many.
inline constexpr int kSlowLinkGatherValues = 4;

// Each rank's own link each way, from every rank's rounds (by rank). A rank's round in ring k
// ends when its send to rank + k and its receive from rank - k have, so it joins four link ends:
// its own two, the send of rank - k and the receive of rank + k. Each end is as fast as the
// fastest round it took part in: a slow end slows every round it is in, and each fast end is in
// one round without it (on 4 ranks or more). Times count above `link`'s alpha (the round of small
// messages), as the ring probe's. Pure, for tests; ProbeSlowRank measures and gathers.
std::vector<RankLinkSpeed> RankLinkSpeeds(const LinkModel& link,
                                          absl::Span<const SlowLinkRounds> rounds,
                                          int64_t large_bytes);

// The rank behind a slow link, from every rank's speeds: the one whose slower direction is at
// least kSlowRankRatio times slower than the median of every rank's two directions; nullopt when
// none is, or on fewer than kSlowRankMinRanks ranks. The returned link is `link` with the median's
// bandwidth (the ring probe's, set by its slowest rank, was the slow link's) and that rank slow by
// the ratio. LinkModel has one factor for both ways: a link slow one way is priced slow both, which
// overprices StragglAR's return of the result to that rank, never the plans that avoid it.
std::optional<LinkModel> SlowRankFromSpeeds(const LinkModel& link,
                                            absl::Span<const RankLinkSpeed> speeds);

// What ProbeSlowRank measured: `link` with the slow rank where there is one, and every rank's
// speeds.
struct SlowLinkProbe {
  LinkModel link;
  std::vector<RankLinkSpeed> speeds;
};
// ProbeSlowRank: the two rings' rounds on this rank, `batches` of each (>= 1; the spec's
// large_batches), gathered from every rank (the same result on every rank), then RankLinkSpeeds
// and SlowRankFromSpeeds. `link` unchanged when no rank is slow. Collective.
absl::StatusOr<SlowLinkProbe> ProbeSlowRank(CommBackend& backend, int rank, int num_ranks,
                                            const LinkModel& link, int batches = 1);

// Whether ProbeLinks looks for a slow rank here (LinkProbeSpec::find_slow_rank): every link of
// one class (one node, or nodes of one rank) and at least kSlowRankMinRanks ranks with links of
// their own. Where it does, a communicator whose backend completes its gathers at once probes for
// it again when its calibration moves (Communicator::FollowLinkChange); one that defers them (the
// GPU's) looks at setup only.
bool LooksForSlowRank(int num_ranks, const std::optional<Topology>& topology,
                      const LinkProbeSpec& spec);

// A communicator that looked for a slow rank probes for it again after an epoch that moved a
// measured algorithm's calibration by this factor or more, either way (EpochReport::
// calibration_move). A link 2x slower moves Ring's time by up to 2x, bandwidth-bound; on a loaded
// 2-core machine an epoch's median moved 1.2x with nothing changed (cluster.slowdown).
inline constexpr double kReprobeMove = 1.6;

struct ProbedLinks {
  LinkModel intra_node;
  std::optional<LinkModel> inter_node;  // set on a machine of several nodes
  // By rank, where the probe looked for a slow rank (LooksForSlowRank); empty elsewhere.
  std::vector<RankLinkSpeed> rank_speeds;
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
// Every rank's measured link, for the same log: "links (send/receive, MB/s): 0 12.4/12.5, 1 ...",
// each way's slowest batch in brackets where it measured 10% or more below the fastest.
std::string DescribeLinkSpeeds(absl::Span<const RankLinkSpeed> speeds);

}  // namespace stragglar
