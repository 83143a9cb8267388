// The link probe (runtime/link_probe.h): on one machine one link, on the ring through every rank;
// on a machine of nodes each class on its own rings, so the hops between nodes do not set the price
// of the links inside them, and the communicator prices with both. Also the host runtime's probe
// of an emulated machine of nodes.
#include "runtime/link_probe.h"

#include <algorithm>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/communicator.h"
#include "runtime/host_runtime.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

constexpr LinkModel kInside{.alpha_s = 2e-6, .bandwidth_bytes_per_s = 400e9};
constexpr LinkModel kBetween{.alpha_s = 12e-6, .bandwidth_bytes_per_s = 40e9};

// One rank of a machine of `ranks_per_node`-rank nodes whose probe rounds take exactly what its
// hop to `peers.next` costs: the fake is its only rank, so the maximum over ranks is its own.
class MachineBackend final : public CommBackend {
 public:
  MachineBackend(int rank, int ranks_per_node) : rank_(rank), ranks_per_node_(ranks_per_node) {}
  double Now() override { return 0; }
  absl::Status StartGather(absl::Span<const double>) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<double>> FinishGather() override { return std::vector<double>{}; }
  absl::Status BroadcastFromRankZero(std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<double> RingRoundSeconds(int64_t bytes, int repeats, RingPeers peers) override {
    rounds_.push_back(peers);
    const bool same_node = rank_ / ranks_per_node_ == peers.next / ranks_per_node_;
    const double seconds =
        (same_node ? kInside : kBetween).TransferSeconds(static_cast<double>(bytes));
    const bool noisy = bytes == kProbeLargeBytes && large_rounds_++ == noisy_large_round_;
    return noisy ? noise_factor_ * seconds : seconds;
  }
  absl::Status MaxOverRanks(absl::Span<double>) override { return absl::OkStatus(); }
  const std::vector<RingPeers>& rounds() const { return rounds_; }
  // The large round `index` (0: the warm-up) takes `factor` times as long: another job's burst.
  void SlowDownLargeRound(int index, double factor) {
    noisy_large_round_ = index;
    noise_factor_ = factor;
  }

 private:
  int rank_;
  int ranks_per_node_;
  std::vector<RingPeers> rounds_;
  int large_rounds_ = 0;
  int noisy_large_round_ = -1;
  double noise_factor_ = 1;
};

void ExpectLink(const LinkModel& got, const LinkModel& want) {
  // alpha is the round of 64-byte messages: alpha plus 64 bytes' worth.
  EXPECT_NEAR(got.alpha_s, want.TransferSeconds(kProbeSmallBytes), 1e-15);
  EXPECT_NEAR(got.bandwidth_bytes_per_s / want.bandwidth_bytes_per_s, 1.0, 1e-9);
}

TEST(LinkProbeTest, OneMachineProbesTheRingThroughEveryRank) {
  MachineBackend backend(5, 8);
  absl::StatusOr<ProbedLinks> links = ProbeLinks(backend, 5, 8, std::nullopt, {});
  ASSERT_TRUE(links.ok()) << links.status();
  ExpectLink(links->intra_node, kInside);
  EXPECT_FALSE(links->inter_node.has_value());
  for (const RingPeers& peers : backend.rounds()) EXPECT_EQ(peers, (RingPeers{6, 4}));
  EXPECT_EQ(backend.rounds().size(), 3u);  // warm-up, small, large
}

// Noise only slows a round: a burst during one batch of the large rounds, whichever it hits, does
// not set the link's price (it did on a shared machine: half the speed, and the policy kept
// Halving-Doubling where StragglAR was faster).
TEST(LinkProbeTest, EachRankKeepsItsFastestBatchOfLargeRounds) {
  for (int noisy = 1; noisy <= 3; ++noisy) {
    MachineBackend backend(5, 8);
    backend.SlowDownLargeRound(noisy, 2.0);
    absl::StatusOr<ProbedLinks> links =
        ProbeLinks(backend, 5, 8, std::nullopt, {.large_repeats = 1, .large_batches = 3});
    ASSERT_TRUE(links.ok()) << links.status();
    SCOPED_TRACE(noisy);
    ExpectLink(links->intra_node, kInside);
    EXPECT_EQ(backend.rounds().size(), 5u);  // warm-up, small, three large
  }
  // One batch (the default, for a GPU's rounds): what it measured, noise and all.
  MachineBackend backend(5, 8);
  backend.SlowDownLargeRound(1, 2.0);
  absl::StatusOr<ProbedLinks> links = ProbeLinks(backend, 5, 8, std::nullopt, {});
  ASSERT_TRUE(links.ok()) << links.status();
  EXPECT_LT(links->intra_node.bandwidth_bytes_per_s, 0.6 * kInside.bandwidth_bytes_per_s);
}

TEST(LinkProbeTest, NodesProbeEachLinkClassOnItsOwnRings) {
  // Rank 3 of 2x4: its node's ring is 0..3, its rail 3 <-> 7. The ring through every rank would
  // have it send across nodes (3 -> 4) and price NVLink at the NIC's speed.
  const Topology machine{.nodes = 2, .ranks_per_node = 4};
  MachineBackend backend(3, 4);
  absl::StatusOr<ProbedLinks> links = ProbeLinks(backend, 3, 8, machine, {});
  ASSERT_TRUE(links.ok()) << links.status();
  ExpectLink(links->intra_node, kInside);
  ASSERT_TRUE(links->inter_node.has_value());
  ExpectLink(*links->inter_node, kBetween);
  ASSERT_EQ(backend.rounds().size(), 6u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(backend.rounds()[i], (RingPeers{0, 2}));
  for (int i = 3; i < 6; ++i) EXPECT_EQ(backend.rounds()[i], (RingPeers{7, 7}));
  // One rank per node: every hop crosses nodes, so both classes are the rail's.
  MachineBackend alone(2, 1);
  links = ProbeLinks(alone, 2, 4, Topology{.nodes = 4, .ranks_per_node = 1}, {});
  ASSERT_TRUE(links.ok()) << links.status();
  ExpectLink(links->intra_node, kBetween);
  ExpectLink(*links->inter_node, kBetween);
  EXPECT_EQ(alone.rounds().size(), 3u);
}

TEST(LinkProbeTest, PeersFormRingsOfTheirClass) {
  const Topology machine{.nodes = 3, .ranks_per_node = 4};
  for (int rank = 0; rank < 12; ++rank) {
    const RingPeers node = NodeRingPeers(rank, machine);
    const RingPeers rail = RailRingPeers(rank, machine);
    EXPECT_EQ(node.next / 4, rank / 4) << rank;
    EXPECT_EQ(NodeRingPeers(node.next, machine).previous, rank) << rank;
    EXPECT_EQ(rail.next % 4, rank % 4) << rank;
    EXPECT_EQ(rail.next / 4, (rank / 4 + 1) % 3) << rank;
    EXPECT_EQ(RailRingPeers(rail.next, machine).previous, rank) << rank;
    EXPECT_EQ(FlatRingPeers(rank, 12), (RingPeers{(rank + 1) % 12, (rank + 11) % 12}));
  }
}

TEST(LinkProbeTest, ATopologyOfAnotherSizeIsOneErrorBeforeAnyTraffic) {
  MachineBackend backend(0, 4);
  absl::StatusOr<ProbedLinks> links =
      ProbeLinks(backend, 0, 6, Topology{.nodes = 2, .ranks_per_node = 4}, {});
  ASSERT_FALSE(links.ok());
  EXPECT_EQ(links.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(links.status().message(), HasSubstr("topology 2x4 has 8 ranks, the communicator 6"));
  EXPECT_TRUE(backend.rounds().empty());
}

TEST(LinkProbeTest, TheCommunicatorPricesBetweenNodesWithWhatItMeasured) {
  MachineBackend backend(3, 4);
  CommOptions options;
  options.runtime.topology = Topology{.nodes = 2, .ranks_per_node = 4};
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      Communicator::Create(3, 8, std::move(options), backend);
  ASSERT_TRUE(comm.ok()) << comm.status();
  ExpectLink((*comm)->core().config().inter_node_link, kBetween);
  EXPECT_NEAR((*comm)->core().link().alpha_s, kInside.TransferSeconds(kProbeSmallBytes), 1e-15);
}

// The host runtime's probe of an emulated machine (`stragglar run --topology`): the rails' rings
// go through emulated NICs that hold every message 2 ms, the node rings through memory. Lower
// bounds only, so a loaded machine cannot fail it.
TEST(LinkProbeTest, EmulatedNodesAreMeasuredThroughTheirNics) {
  const Topology machine{.nodes = 2, .ranks_per_node = 2};
  const HostTransport::NodeEmulation nics{.ranks_per_node = 2, .alpha_s = 2e-3, .bytes_per_s = 1e9};
  absl::StatusOr<ProbedLinks> links = MeasureEmulatedLinks(machine, nics);
  ASSERT_TRUE(links.ok()) << links.status();
  ASSERT_TRUE(links->inter_node.has_value());
  EXPECT_GE(links->inter_node->alpha_s, 2e-3);
  EXPECT_EQ(links->inter_node->shared_lanes, 0);  // a NIC per rank
  EXPECT_GE(links->intra_node.shared_lanes, 1);   // the host's cores
  EXPECT_GT(links->intra_node.bandwidth_bytes_per_s, 0);
  // Not a machine of nodes of several ranks, emulated as such: one error, no traffic.
  for (const auto& [topology, emulation] :
       {std::pair{Topology::Flat(4), nics},
        std::pair{Topology{.nodes = 4, .ranks_per_node = 1}, nics},
        std::pair{machine, HostTransport::NodeEmulation{}}}) {
    absl::StatusOr<ProbedLinks> refused = MeasureEmulatedLinks(topology, emulation);
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(refused.status().message(), HasSubstr("needs several nodes of at least 2 ranks"));
  }
}

// One rank of a machine whose rank `slow` has a link `factor` times slower: a probe round takes
// the slower of this rank's hop out (to peers.next) and in (from peers.previous), and a hop to or
// from the slow rank moves its bytes `factor` times slower. The gather hands back what every rank
// measures, found by the same rule (the fake knows the whole machine).
// Which ways a slow link is slow.
enum class SlowWay { kBoth, kSend, kReceive };

class SlowLinkBackend final : public CommBackend {
 public:
  SlowLinkBackend(int rank, int num_ranks, int slow, double factor, bool deferred = false,
                  SlowWay way = SlowWay::kBoth)
      : rank_(rank),
        num_ranks_(num_ranks),
        slow_(slow),
        factor_(factor),
        deferred_(deferred),
        way_(way) {}
  double Now() override { return 0; }
  bool DefersExchange() const override { return deferred_; }
  // The other ranks' rounds by the rule (noise-free: each ring's fastest and slowest batch alike),
  // and this rank's as it measured them.
  absl::Status StartGather(absl::Span<const double> mine) override {
    EXPECT_EQ(mine.size(), 4u);
    gathered_.clear();
    for (int r = 0; r < num_ranks_; ++r) {
      const double rounds[4] = {RoundOf(r, 1), RoundOf(r, 2), RoundOf(r, 1), RoundOf(r, 2)};
      for (int i = 0; i < 4; ++i) gathered_.push_back(r == rank_ ? mine[i] : rounds[i]);
    }
    // This rank's fastest batches are what the rule says.
    EXPECT_EQ(mine[0], RoundOf(rank_, 1));
    EXPECT_EQ(mine[1], RoundOf(rank_, 2));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> FinishGather() override { return gathered_; }
  absl::Status BroadcastFromRankZero(std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<double> RingRoundSeconds(int64_t bytes, int repeats, RingPeers peers) override {
    const bool noisy = std::find(noisy_.begin(), noisy_.end(), rounds_) != noisy_.end();
    ++rounds_;
    bytes_ = bytes;
    return (noisy ? 10.0 : 1.0) * std::max(Hop(rank_, peers.next), Hop(peers.previous, rank_));
  }
  absl::Status MaxOverRanks(absl::Span<double> values) override {
    // The ring probe's rounds: the slowest rank's is a hop to or from the slow rank.
    values[1] = std::max({values[1], Hop(slow_, (slow_ + 1) % num_ranks_),
                          Hop((slow_ + num_ranks_ - 1) % num_ranks_, slow_)});
    return absl::OkStatus();
  }
  int rounds() const { return rounds_; }
  // These rounds (counted from 0, in the order asked) take 10x as long: another job's bursts.
  void SlowDownRounds(std::vector<int> rounds) { noisy_ = std::move(rounds); }

 private:
  double Hop(int from, int to) const {
    const double bytes = static_cast<double>(bytes_);
    const bool slow =
        (from == slow_ && way_ != SlowWay::kReceive) || (to == slow_ && way_ != SlowWay::kSend);
    return kInside.TransferSeconds(slow ? bytes * factor_ : bytes);
  }
  double RoundOf(int rank, int offset) const {
    return std::max(Hop(rank, (rank + offset) % num_ranks_),
                    Hop((rank + num_ranks_ - offset) % num_ranks_, rank));
  }
  int rank_, num_ranks_, slow_;
  double factor_;
  bool deferred_;
  SlowWay way_;
  int64_t bytes_ = 0;
  int rounds_ = 0;
  std::vector<int> noisy_;
  std::vector<double> gathered_;
};

// Whether the backend defers its exchange (the GPU's) or not: at setup both look.
TEST(LinkProbeTest, FindsTheRankBehindASlowLink) {
  const LinkProbeSpec spec{.find_slow_rank = true};
  for (int n : {4, 5, 8}) {
    for (int slow : {0, 3, n - 1}) {
      for (int rank : {0, slow, (slow + 1) % n}) {
        SlowLinkBackend backend(rank, n, slow, 5, /*deferred=*/rank % 2 == 1);
        absl::StatusOr<ProbedLinks> links = ProbeLinks(backend, rank, n, std::nullopt, spec);
        ASSERT_TRUE(links.ok()) << links.status();
        const LinkModel& link = links->intra_node;
        EXPECT_EQ(link.slow_rank, slow) << n << " " << rank;
        EXPECT_NEAR(link.slow_factor, 5, 1e-3);  // counted above the 64-byte round
        // The others' bandwidth, not the slow link's, which set the ring probe's slowest round.
        EXPECT_NEAR(link.bandwidth_bytes_per_s / kInside.bandwidth_bytes_per_s, 1.0, 1e-3) << n;
        EXPECT_EQ(backend.rounds(), 5);  // warm-up, small, large, and the two rings
      }
    }
  }
}

// The slow-link rounds in batches, as the ring probe's large rounds (the MPI preload's 3): each
// ring keeps its fastest, so a burst in one batch of each ring makes a fast rank neither slow nor
// the median slower (the fake's gather checks that this rank sent the burst-free time).
TEST(LinkProbeTest, TheSlowLinkRoundsKeepTheFastestBatch) {
  const LinkProbeSpec spec{.large_repeats = 1, .large_batches = 3, .find_slow_rank = true};
  for (int rank : {0, 2, 5}) {
    SlowLinkBackend backend(rank, 8, 2, 5);
    // Rounds 0-4: warm-up, small, 3 large batches; 5-7 the first ring's, 8-10 the second's.
    backend.SlowDownRounds({5, 8});
    absl::StatusOr<ProbedLinks> links = ProbeLinks(backend, rank, 8, std::nullopt, spec);
    ASSERT_TRUE(links.ok()) << links.status();
    EXPECT_EQ(links->intra_node.slow_rank, 2) << rank;
    EXPECT_NEAR(links->intra_node.slow_factor, 5, 1e-3) << rank;
    EXPECT_EQ(backend.rounds(), 11);
  }
}

TEST(LinkProbeTest, FindsTheSlowRankOnNodesOfOneRank) {
  // Hosts of one rank each: both classes are the NICs', and the slow one is in both.
  SlowLinkBackend backend(1, 4, 2, 5);
  absl::StatusOr<ProbedLinks> links = ProbeLinks(
      backend, 1, 4, Topology{.nodes = 4, .ranks_per_node = 1}, {.find_slow_rank = true});
  ASSERT_TRUE(links.ok()) << links.status();
  ASSERT_TRUE(links->inter_node.has_value());
  EXPECT_EQ(links->inter_node->slow_rank, 2);
  EXPECT_EQ(links->intra_node.slow_rank, 2);
  EXPECT_NEAR(links->intra_node.slow_factor, 5, 1e-3);
  // Nodes of several ranks: not looked for (two classes).
  SlowLinkBackend nodes(1, 8, 2, 5);
  links =
      ProbeLinks(nodes, 1, 8, Topology{.nodes = 4, .ranks_per_node = 2}, {.find_slow_rank = true});
  ASSERT_TRUE(links.ok()) << links.status();
  EXPECT_FALSE(links->intra_node.has_slow_rank());
  EXPECT_FALSE(links->inter_node->has_slow_rank());
}

TEST(LinkProbeTest, NamesNoSlowRankBelowTheBarOrWhereItCannotTell) {
  const LinkProbeSpec spec{.find_slow_rank = true};
  // 1.5x is not a slow link.
  SlowLinkBackend mild(0, 8, 2, 1.5);
  EXPECT_FALSE(ProbeLinks(mild, 0, 8, std::nullopt, spec)->intra_node.has_slow_rank());
  // On 3 ranks every rank is next to the slow one in both rings: not probed.
  SlowLinkBackend three(0, 3, 1, 5);
  EXPECT_FALSE(ProbeLinks(three, 0, 3, std::nullopt, spec)->intra_node.has_slow_rank());
  EXPECT_EQ(three.rounds(), 3);
  // Nor where ranks share cores, nor unless asked.
  SlowLinkBackend shared(0, 8, 2, 5);
  EXPECT_FALSE(ProbeLinks(shared, 0, 8, std::nullopt, {.shared_lanes = 2, .find_slow_rank = true})
                   ->intra_node.has_slow_rank());
  SlowLinkBackend unasked(0, 8, 2, 5);
  EXPECT_FALSE(ProbeLinks(unasked, 0, 8, std::nullopt, {})->intra_node.has_slow_rank());
  EXPECT_EQ(unasked.rounds(), 3);
}

// Each rank's speeds each way, from the rounds: a link slow one way is told from one slow the other
// way and from one slow both ways, on every size the probe looks at, and its neighbours, which
// share a round with it in each ring, keep their own speed.
TEST(LinkProbeTest, EachRanksLinkIsMeasuredEachWay) {
  const double fast = kInside.bandwidth_bytes_per_s;
  for (int n : {4, 5, 8}) {
    for (SlowWay way : {SlowWay::kBoth, SlowWay::kSend, SlowWay::kReceive}) {
      const int slow = n / 2;
      SlowLinkBackend backend(0, n, slow, 4, false, way);
      LinkProbeSpec spec{.find_slow_rank = true};
      absl::StatusOr<ProbedLinks> links = ProbeLinks(backend, 0, n, std::nullopt, spec);
      ASSERT_TRUE(links.ok()) << links.status();
      ASSERT_EQ(links->rank_speeds.size(), static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        const RankLinkSpeed& speed = links->rank_speeds[r];
        const bool slow_send = r == slow && way != SlowWay::kReceive;
        const bool slow_receive = r == slow && way != SlowWay::kSend;
        EXPECT_NEAR(speed.send_bytes_per_s / fast, slow_send ? 0.25 : 1, 1e-3) << n << " " << r;
        EXPECT_NEAR(speed.receive_bytes_per_s / fast, slow_receive ? 0.25 : 1, 1e-3)
            << n << " " << r;
        // No noise: every batch alike.
        EXPECT_EQ(speed.slowest_send_bytes_per_s, speed.send_bytes_per_s);
      }
      EXPECT_EQ(links->intra_node.slow_rank, slow);
      EXPECT_NEAR(links->intra_node.slow_factor, 4, 1e-3);
    }
  }
  // Where the probe does not look, no speeds.
  SlowLinkBackend unasked(0, 8, 2, 5);
  EXPECT_TRUE(ProbeLinks(unasked, 0, 8, std::nullopt, {})->rank_speeds.empty());
}

// Each end's slowest batch gives the spread. A burst in one rank's rounds is no end's spread:
// every end was also in a round of another rank's.
TEST(LinkProbeTest, TheSlowestBatchGivesTheSpread) {
  const LinkModel link{.alpha_s = 0, .bandwidth_bytes_per_s = 1e9};
  std::vector<SlowLinkRounds> rounds(6, {.fastest_s = {1e-3, 1e-3}, .slowest_s = {1e-3, 1e-3}});
  rounds[2].slowest_s = {3e-3, 1.5e-3};
  for (const RankLinkSpeed& speed : RankLinkSpeeds(link, rounds, 1'000'064)) {
    EXPECT_EQ(speed, (RankLinkSpeed{1e9, 1e9, 1e9, 1e9}));
  }
  // Every round of every rank slowed in its slowest batch: the spread shows it everywhere.
  for (SlowLinkRounds& each : rounds) each.slowest_s = {2e-3, 2e-3};
  for (const RankLinkSpeed& speed : RankLinkSpeeds(link, rounds, 1'000'064)) {
    EXPECT_DOUBLE_EQ(speed.slowest_send_bytes_per_s, 5e8);
    EXPECT_DOUBLE_EQ(speed.send_bytes_per_s, 1e9);
  }
}

TEST(LinkProbeTest, TheSlowRankIsTheOneAboveTheMedianByTheRatio) {
  const LinkModel link{.alpha_s = 1e-5, .bandwidth_bytes_per_s = 1e9};
  // Speeds in GB/s each way: a link at 1/1.6 is not slow, one at 1/1.8 is, and the slowest wins.
  const auto at = [](double send, double receive) {
    return RankLinkSpeed{.send_bytes_per_s = send * 1e9, .receive_bytes_per_s = receive * 1e9};
  };
  EXPECT_FALSE(
      SlowRankFromSpeeds(link, {at(1, 1), at(1, 1 / 1.6), at(1, 1), at(1.1, 1)}).has_value());
  std::optional<LinkModel> slow =
      SlowRankFromSpeeds(link, {at(1, 1), at(1, 1), at(1 / 1.8, 1), at(1, 1.1), at(1, 1 / 3.0)});
  ASSERT_TRUE(slow.has_value());
  EXPECT_EQ(slow->slow_rank, 4);
  EXPECT_NEAR(slow->slow_factor, 3, 1e-9);  // against the lower median, 1 GB/s
  EXPECT_NEAR(slow->bandwidth_bytes_per_s, 1e9, 1e-3);
  EXPECT_EQ(slow->alpha_s, link.alpha_s);
  // Too few ranks to tell, or a speed not measured.
  EXPECT_FALSE(SlowRankFromSpeeds(link, {at(1, 1), at(9, 1 / 9.0), at(1, 1)}).has_value());
  EXPECT_FALSE(SlowRankFromSpeeds(link, {at(1, 1), at(1, 0.1), at(1, 1), at(0, 1)}).has_value());
}

}  // namespace
}  // namespace stragglar
