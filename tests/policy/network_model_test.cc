// The machine of nodes: parsing a topology, the simulator pricing each transfer by its link
// class, and NCCL's ring and tree in closed form.
#include <bit>
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"
#include "policy/model/nccl_models.h"
#include "policy/model/ring_runs.h"
#include "policy/model/simulator.h"
#include "policy/model/topology.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

const LinkModel kNvLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450e9};
const LinkModel kNic{.alpha_s = 10e-6, .bandwidth_bytes_per_s = 50e9};

NetworkModel Machine(int nodes, int ranks_per_node) {
  return {.topology = {.nodes = nodes, .ranks_per_node = ranks_per_node},
          .intra_node = kNvLink,
          .inter_node = kNic};
}

Plan Synthesize(Algorithm algorithm, int n, int straggler = 0) {
  absl::StatusOr<Plan> plan = SynthesizePlan(
      algorithm, n,
      algorithm == Algorithm::kStragglar ? std::optional<int>(straggler) : std::nullopt);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

TEST(TopologyTest, ParsesNodesTimesRanksAndPlacesRanksNodeByNode) {
  absl::StatusOr<Topology> topology = ParseTopology("4x8");
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(*topology, (Topology{.nodes = 4, .ranks_per_node = 8}));
  EXPECT_EQ(topology->num_ranks(), 32);
  EXPECT_EQ(topology->NodeOf(7), 0);
  EXPECT_EQ(topology->NodeOf(8), 1);
  EXPECT_EQ(topology->LocalRank(13), 5);
  EXPECT_EQ(topology->Between(8, 15), LinkClass::kIntraNode);
  EXPECT_EQ(topology->Between(7, 8), LinkClass::kInterNode);
  EXPECT_EQ(TopologyName(*topology), "4x8");
  EXPECT_EQ(ParseTopology("2X4")->num_ranks(), 8);
  EXPECT_FALSE(Topology::Flat(16).multi_node());
  EXPECT_EQ(Topology::Flat(16).Between(0, 15), LinkClass::kIntraNode);
}

TEST(TopologyTest, BadTextIsOneClearError) {
  for (const char* text : {"", "4", "4x", "x8", "0x8", "4x0", "-1x8", "4x8x2", "ax8", "4*8"}) {
    absl::StatusOr<Topology> topology = ParseTopology(text);
    ASSERT_FALSE(topology.ok()) << text;
    EXPECT_THAT(topology.status().message(), HasSubstr("is not NxG")) << text;
  }
  EXPECT_THAT(ParseTopology("1024x128").status().message(), HasSubstr("at most 65536"));
}

TEST(TopologyTest, NodeIdsGiveTheTopologyOrOneClearError) {
  // Host hashes, node leaders' ranks: any value equal on the ranks of one node.
  EXPECT_EQ(*TopologyFromNodeIds(std::vector<int64_t>{7, 7, 7, 7}), Topology::Flat(4));
  EXPECT_EQ(*TopologyFromNodeIds(std::vector<int64_t>{9, 9, 3, 3, 5, 5}),
            (Topology{.nodes = 3, .ranks_per_node = 2}));
  EXPECT_EQ(*TopologyFromNodeIds(std::vector<int64_t>{1, 2, 3}),
            (Topology{.nodes = 3, .ranks_per_node = 1}));
  EXPECT_THAT(TopologyFromNodeIds(std::vector<int64_t>{0, 0, 1, 1, 0, 0}).status().message(),
              HasSubstr("rank 4 is on the node of rank 0 again"));
  EXPECT_THAT(TopologyFromNodeIds(std::vector<int64_t>{0, 1, 0, 1}).status().message(),
              HasSubstr("rank 2 is on the node of rank 0 again"));
  EXPECT_THAT(TopologyFromNodeIds(std::vector<int64_t>{4, 4, 4, 8, 8}).status().message(),
              HasSubstr("the node of rank 0 has 3, the node of rank 3 has 2"));
  EXPECT_THAT(TopologyFromNodeIds(std::vector<int64_t>{4, 8, 8}).status().message(),
              HasSubstr("the node of rank 0 has 1, the node of rank 1 has 2"));
  EXPECT_FALSE(TopologyFromNodeIds({}).ok());
}

TEST(NetworkSimulatorTest, OneClassPricesLikeTheFlatModel) {
  // With both classes equal, the machine's shape changes nothing, bit for bit.
  for (const auto& [nodes, per_node] : {std::pair{2, 4}, std::pair{4, 2}, std::pair{8, 1}}) {
    const NetworkModel network{.topology = {.nodes = nodes, .ranks_per_node = per_node},
                               .intra_node = kNvLink,
                               .inter_node = kNvLink};
    for (Algorithm algorithm : kPlanAlgorithms) {
      const Plan plan = Synthesize(algorithm, nodes * per_node, 3);
      const std::vector<double> arrival = OneLateRank(plan.num_ranks, 3, 1e-3);
      absl::StatusOr<SimulationResult> flat = SimulatePlan(plan, 64e6, kNvLink, arrival);
      absl::StatusOr<SimulationResult> shaped = SimulatePlan(plan, 64e6, network, arrival);
      ASSERT_TRUE(flat.ok() && shaped.ok());
      EXPECT_EQ(flat->finish_s, shaped->finish_s) << AlgorithmName(algorithm);
    }
  }
}

TEST(NetworkSimulatorTest, EachTransferPaysItsOwnClass) {
  // Ring over 2 nodes of 2: every round has a hop between nodes (1->2, 3->0), and with ranks
  // together every rank waits for it, so each of the 2(n - 1) rounds costs one NIC transfer.
  const double bytes = 64e6;
  const Plan ring = Synthesize(Algorithm::kRing, 4);
  absl::StatusOr<SimulationResult> result =
      SimulatePlan(ring, bytes, Machine(2, 2), std::vector<double>(4, 0.0));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->completion_s, 6 * kNic.TransferSeconds(bytes / 4));
  // On one node the same plan costs NVLink transfers only.
  absl::StatusOr<SimulationResult> one_node =
      SimulatePlan(ring, bytes, Machine(1, 4), std::vector<double>(4, 0.0));
  ASSERT_TRUE(one_node.ok());
  EXPECT_DOUBLE_EQ(one_node->completion_s, 6 * kNvLink.TransferSeconds(bytes / 4));

  // A lone transfer of each class: rank 0 -> 1 inside node 0, rank 1 -> 2 between nodes.
  Plan two_hops{.algorithm = Algorithm::kRing, .num_ranks = 4, .num_chunks = 1};
  two_hops.rounds = {Round{{Transfer{.src = 0, .dst = 1, .op = TransferOp::kCopy, .chunks = {0}}}},
                     Round{{Transfer{.src = 1, .dst = 2, .op = TransferOp::kCopy, .chunks = {0}}}}};
  absl::StatusOr<SimulationResult> hops =
      SimulatePlan(two_hops, bytes, Machine(2, 2), std::vector<double>(4, 0.0));
  ASSERT_TRUE(hops.ok());
  EXPECT_DOUBLE_EQ(hops->finish_s[1], kNvLink.TransferSeconds(bytes) + kNic.TransferSeconds(bytes));
  EXPECT_DOUBLE_EQ(hops->finish_s[2], hops->finish_s[1]);
  EXPECT_EQ(hops->finish_s[3], 0);
}

TEST(NetworkSimulatorTest, RingRunsStayExactOnMachinesOfNodes) {
  // Every ring run is priced in closed form: runs of one class give the simulator's result bit
  // for bit, runs that cross nodes up to rounding (tests/policy/ring_runs_test.cc checks them
  // exactly on whole numbers), wherever the straggler is.
  for (const auto& [nodes, per_node] :
       {std::pair{4, 1}, std::pair{2, 4}, std::pair{3, 3}, std::pair{1, 6}}) {
    const int n = nodes * per_node;
    for (int straggler : {0, n / 2, n - 1}) {
      for (const Plan& plan :
           {Synthesize(Algorithm::kRing, n), Synthesize(Algorithm::kStragglar, n, straggler),
            *SynthesizeHierarchicalRing(nodes, per_node)}) {
        const std::vector<RingRun> runs = FindRingRuns(plan);
        ASSERT_FALSE(runs.empty());
        const std::vector<double> arrival = OneLateRank(n, straggler, 2e-4);
        absl::StatusOr<SimulationResult> closed = SimulateRounds(
            plan, runs, 0, plan.num_rounds(), 16e6, Machine(nodes, per_node), arrival);
        absl::StatusOr<SimulationResult> rounds =
            SimulatePlan(plan, 16e6, Machine(nodes, per_node), arrival);
        ASSERT_TRUE(closed.ok() && rounds.ok());
        const bool one_class = nodes == 1 || per_node == 1 || plan.variant != PlanVariant::kFlat;
        for (int r = 0; r < n; ++r) {
          SCOPED_TRACE(testing::Message()
                       << nodes << "x" << per_node << " " << AlgorithmName(plan.algorithm) << " "
                       << PlanVariantName(plan.variant) << " " << straggler);
          if (one_class) {
            EXPECT_EQ(closed->finish_s[r], rounds->finish_s[r]);
          } else {
            EXPECT_NEAR(closed->finish_s[r], rounds->finish_s[r], 1e-12 * rounds->finish_s[r]);
          }
        }
      }
    }
  }
}

TEST(NetworkSimulatorTest, BadMachinesAreRejected) {
  const Plan ring = Synthesize(Algorithm::kRing, 4);
  EXPECT_THAT(
      SimulatePlan(ring, 1e6, Machine(2, 4), std::vector<double>(4, 0.0)).status().message(),
      HasSubstr("topology 2x4 has 8 ranks, the plan 4"));
  NetworkModel broken = Machine(2, 2);
  broken.inter_node.bandwidth_bytes_per_s = 0;
  EXPECT_THAT(SimulatePlan(ring, 1e6, broken, std::vector<double>(4, 0.0)).status().message(),
              HasSubstr("inter-node link: "));
  // One node never uses the inter-node link, so it is not checked.
  broken.topology = Topology::Flat(4);
  EXPECT_TRUE(SimulatePlan(ring, 1e6, broken, std::vector<double>(4, 0.0)).ok());
}

TEST(HierarchicalModelTest, TwoNodesOfTwoTakeThreeHops) {
  // Straggler 3 (node 1): after it arrives, it trades halves with rank 2 over NVLink, the two
  // rails trade their halves between nodes, and each node swaps its halves over NVLink again.
  absl::StatusOr<Plan> plan = SynthesizeHierarchicalStragglar(2, 2, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double bytes = 64e6;
  absl::StatusOr<SimulationResult> result =
      SimulatePlan(*plan, bytes, Machine(2, 2), OneLateRank(4, 3, 1.0));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->after_last_arrival_s,
              2 * kNvLink.TransferSeconds(bytes / 2) + kNic.TransferSeconds(bytes / 2), 1e-15);
}

TEST(HierarchicalModelTest, RailsKeepFlatStragglarOffTheNics) {
  // After a late arrival, flat StragglAR pays about S over a NIC; the hierarchical plan S/G per
  // rail plus NVLink. At 4 nodes of 4 and 8 of 8 it is at least twice as fast.
  for (const auto& [nodes, per_node] : {std::pair{4, 4}, std::pair{8, 8}}) {
    const int n = nodes * per_node;
    const std::vector<double> arrival = OneLateRank(n, n - 1, 1.0);
    absl::StatusOr<Plan> hierarchical = SynthesizeHierarchicalStragglar(nodes, per_node, n - 1);
    ASSERT_TRUE(hierarchical.ok());
    const Plan flat = Synthesize(Algorithm::kStragglar, n, n - 1);
    const NetworkModel network = Machine(nodes, per_node);
    const double ours = SimulatePlan(*hierarchical, 1e9, network, arrival)->after_last_arrival_s;
    const double theirs = SimulatePlan(flat, 1e9, network, arrival)->after_last_arrival_s;
    EXPECT_LT(2 * ours, theirs) << nodes << "x" << per_node;
  }
}

TEST(NcclModelTest, OneNodeRingIsTheFlatRing) {
  for (int n = 2; n <= 64; ++n) {
    for (double bytes : {0.0, 1e6, 1e9}) {
      const NcclModelCost cost = NcclAllReduceCost(NcclModel::kRing, Machine(1, n), bytes);
      EXPECT_NEAR(cost.seconds(), RingSeconds(n, bytes, kNvLink), 1e-15 + 1e-12 * cost.seconds())
          << n;
      EXPECT_EQ(cost.steps, 2 * (n - 1));
    }
  }
}

TEST(NcclModelTest, RingAcrossNodesSharesTheNicsOfARail) {
  // 4 nodes of 8: 2N = 8 of the 2(n - 1) = 62 steps cross a NIC. A rank's NIC carries 1/8 of the
  // bus bytes at 50 GB/s (6.25 GB/s of bus bytes per rank... times 8: 400 GB/s) and its NVLink
  // 7/8 at 450 GB/s (514 GB/s): the NIC is the bottleneck.
  const double bytes = 1e9;
  const NcclModelCost cost = NcclAllReduceCost(NcclModel::kRing, Machine(4, 8), bytes);
  EXPECT_EQ(cost.steps, 62);
  EXPECT_NEAR(cost.latency_s, 54 * 3e-6 + 8 * 10e-6, 1e-15);
  EXPECT_NEAR(cost.bandwidth_s, 2.0 * 31 / 32 * bytes / 400e9, 1e-12);
  // Slower NVLink moves the bottleneck there: 7/8 of the bus bytes at 100 GB/s.
  NetworkModel slow_nvlink = Machine(4, 8);
  slow_nvlink.intra_node.bandwidth_bytes_per_s = 100e9;
  EXPECT_NEAR(NcclAllReduceCost(NcclModel::kRing, slow_nvlink, bytes).bandwidth_s,
              2.0 * 31 / 32 * bytes * 7 / 8 / 100e9, 1e-12);
  // One rank per node: every byte crosses the NIC, and every step is a network step.
  const NcclModelCost rail = NcclAllReduceCost(NcclModel::kRing, Machine(16, 1), bytes);
  EXPECT_NEAR(rail.latency_s, 30 * 10e-6, 1e-15);
  EXPECT_NEAR(rail.bandwidth_s, 2.0 * 15 / 16 * bytes / 50e9, 1e-12);
}

TEST(NcclModelTest, TreeIsLogDepthAcrossNodes) {
  const double bytes = 1e6;
  for (int nodes : {1, 2, 3, 4, 5, 8, 64, 512}) {
    const NcclModelCost cost = NcclAllReduceCost(NcclModel::kTree, Machine(nodes, 8), bytes);
    const int depth = std::bit_width(static_cast<unsigned>(nodes)) - 1;  // floor(log2 N)
    EXPECT_EQ(cost.steps, 2 * (7 + depth)) << nodes;
    EXPECT_NEAR(cost.latency_s, 2 * (7 * 3e-6 + depth * 10e-6), 1e-15) << nodes;
    const double bus = nodes == 1 ? 1 / 450e9 : std::max(1 / 400e9, 7.0 / 8 / 450e9);
    EXPECT_NEAR(cost.bandwidth_s, 2 * bytes * bus, 1e-15) << nodes;
  }
  // At scale the tree's latency stays logarithmic while the ring's grows with the ranks.
  const NetworkModel big = Machine(512, 8);
  EXPECT_LT(NcclAllReduceCost(NcclModel::kTree, big, 0).latency_s,
            NcclAllReduceCost(NcclModel::kRing, big, 0).latency_s / 100);
}

TEST(NcclModelTest, NamesRoundTrip) {
  for (NcclModel model : kAllNcclModels) {
    EXPECT_EQ(*ParseNcclModel(NcclModelName(model)), model);
  }
  EXPECT_THAT(ParseNcclModel("nccl-nvls").status().message(), HasSubstr("unknown NCCL model"));
}

TEST(NetworkBreakEvenTest, AgainstAClosedFormBaseline) {
  // StragglAR on 2 nodes of 4 against a baseline of fixed length after the last arrival: the
  // break-even is where its completion first drops below delay + baseline.
  const NetworkModel network = Machine(2, 4);
  const Plan stragglar = Synthesize(Algorithm::kStragglar, 8, 7);
  const double bytes = 64e6;
  const double baseline_s = NcclAllReduceCost(NcclModel::kRing, network, bytes).seconds() * 4;
  absl::StatusOr<double> delay = BreakEvenDelay(stragglar, baseline_s, bytes, network);
  ASSERT_TRUE(delay.ok()) << delay.status();
  ASSERT_GT(*delay, 0);
  ASSERT_NE(*delay, kNever);
  auto completion = [&](double d) {
    return SimulatePlan(stragglar, bytes, network, OneLateRank(8, 7, d))->completion_s;
  };
  EXPECT_LT(completion(*delay), *delay + baseline_s);
  EXPECT_GE(completion(*delay - 2e-9), *delay - 2e-9 + baseline_s);
  // A baseline StragglAR can never beat; a bad baseline time.
  EXPECT_EQ(*BreakEvenDelay(stragglar, 0.0, bytes, network), kNever);
  EXPECT_FALSE(BreakEvenDelay(stragglar, -1.0, bytes, network).ok());
}

}  // namespace
}  // namespace stragglar
