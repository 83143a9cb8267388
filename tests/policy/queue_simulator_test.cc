// The plan priced with one queue per link class (policy/queue_simulator.h): never later than the
// round model, the same where every transfer needs the one before it, overlapping the classes
// where the data allows it and not where it does not.
#include "policy/model/queue_simulator.h"

#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

const LinkModel kNvLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450e9};
const LinkModel kNic{.alpha_s = 10e-6, .bandwidth_bytes_per_s = 50e9};

NetworkModel Machine(int nodes, int per_node) {
  return {.topology = {.nodes = nodes, .ranks_per_node = per_node},
          .intra_node = kNvLink,
          .inter_node = kNic};
}

TEST(QueueSimulatorTest, NeverLaterThanTheRoundModel) {
  std::mt19937 random(13);
  std::uniform_real_distribution<double> lag(0, 1e-3);
  for (const auto& [nodes, per_node] : {std::pair{1, 8}, std::pair{2, 4}, std::pair{4, 3}}) {
    const int n = nodes * per_node;
    std::vector<Plan> plans = {*SynthesizeRing(n), *SynthesizeHalvingDoubling(n),
                               *SynthesizeStragglar(n, n - 1, 2),
                               *SynthesizeLogDepthStragglar(n, 1, 4)};
    if (nodes > 1) {
      plans.push_back(*SynthesizeHierarchicalRing(nodes, per_node));
      plans.push_back(*SynthesizeHierarchicalStragglar(nodes, per_node, 2));
    }
    for (const Plan& plan : plans) {
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<double> arrival(n);
        for (double& a : arrival) a = trial == 0 ? 0 : lag(random);
        const SimulationResult rounds =
            *SimulatePlan(plan, 1 << 24, Machine(nodes, per_node), arrival);
        const SimulationResult queues =
            *SimulatePlanWithQueues(plan, 1 << 24, Machine(nodes, per_node), arrival);
        for (int r = 0; r < n; ++r) {
          EXPECT_LE(queues.finish_s[r], rounds.finish_s[r])
              << AlgorithmName(plan.algorithm) << " " << PlanVariantName(plan.variant) << " "
              << nodes << "x" << per_node << " rank " << r;
        }
      }
    }
  }
}

TEST(QueueSimulatorTest, TheRingOnOneClassIsTheRoundModel) {
  // Each ring step sends what the step before it brought: nothing to overlap.
  for (int n = 2; n <= 9; ++n) {
    const Plan ring = *SynthesizeRing(n);
    const std::vector<double> together(n, 0.25);
    EXPECT_EQ(
        SimulatePlanWithQueues(ring, 1 << 20, NetworkModel::Flat(n, kNvLink), together)->finish_s,
        SimulatePlan(ring, 1 << 20, kNvLink, together)->finish_s)
        << n;
  }
}

// A slow link is priced as the round model prices it: on hosts of one rank (every link of one
// class) the ring ends when the round model says (each step waits on the slow rank's), and
// StragglAR pipelined around the slow rank takes its slow link's time at least (16 MiB each way
// at a fifth of the rate), where it took the fast link's when the queues left the slow rank out.
TEST(QueueSimulatorTest, ASlowLinkIsPricedAsTheRoundModelPricesIt) {
  const LinkModel fast{.alpha_s = 60e-6, .bandwidth_bytes_per_s = 11.875e6};
  LinkModel slow = fast;
  slow.slow_rank = 2;
  slow.slow_factor = 5;
  const double bytes = 1 << 24;
  for (int n : {4, 8}) {
    const NetworkModel hosts{
        .topology = {.nodes = n, .ranks_per_node = 1}, .intra_node = slow, .inter_node = slow};
    const std::vector<double> together(n, 0.0);
    const Plan ring = *SynthesizeRing(n);
    EXPECT_EQ(SimulatePlanWithQueues(ring, bytes, hosts, together)->completion_s,
              SimulatePlan(ring, bytes, hosts, together)->completion_s)
        << n;
    const Plan stragglar = *SynthesizeStragglar(n, 2, 4);
    const double slow_link_s = bytes * slow.slow_factor / fast.bandwidth_bytes_per_s;
    const SimulationResult queues = *SimulatePlanWithQueues(stragglar, bytes, hosts, together);
    EXPECT_GE(queues.completion_s, slow_link_s) << n;
    EXPECT_LE(queues.completion_s, SimulatePlan(stragglar, bytes, hosts, together)->completion_s)
        << n;
  }
}

// Two rounds on 2 nodes of 2: rank 0 sends `first` to rank 2 over the NIC, then takes part in
// `second`. Whole-number costs (0 bytes: alpha alone) make every time exact.
SimulationResult TwoRounds(Transfer second) {
  const Plan plan{.num_ranks = 4,
                  .num_chunks = 2,
                  .rounds = {{.transfers = {{.src = 0, .dst = 2, .chunks = {0}}}},
                             {.transfers = {std::move(second)}}}};
  const NetworkModel machine{.topology = {.nodes = 2, .ranks_per_node = 2},
                             .intra_node = {.alpha_s = 1},
                             .inter_node = {.alpha_s = 5}};
  return *SimulatePlanWithQueues(plan, 0, machine, std::vector<double>(4, 0.0));
}

TEST(QueueSimulatorTest, ClassesOverlapWhereTheDataAllows) {
  // Rank 0 receives another chunk over NVLink while its NIC send runs: 5, not 5 + 1.
  EXPECT_EQ(TwoRounds({.src = 1, .dst = 0, .chunks = {1}}).finish_s[1], 1.0);
  EXPECT_EQ(TwoRounds({.src = 1, .dst = 0, .chunks = {1}}).completion_s, 5.0);
}

TEST(QueueSimulatorTest, DataAndQueuesStillOrderTransfers) {
  // Overwriting the chunk the NIC is still reading waits for it.
  EXPECT_EQ(TwoRounds({.src = 1, .dst = 0, .op = TransferOp::kReduce, .chunks = {0}}).finish_s[1],
            6.0);
  // Sending on what the NIC is writing waits for it.
  EXPECT_EQ(TwoRounds({.src = 2, .dst = 3, .chunks = {0}}).finish_s[3], 6.0);
  // The NIC's own send queue is one at a time.
  EXPECT_EQ(TwoRounds({.src = 0, .dst = 3, .chunks = {1}}).finish_s[3], 10.0);
  // Another rank's NIC is free.
  EXPECT_EQ(TwoRounds({.src = 1, .dst = 3, .chunks = {1}}).finish_s[3], 5.0);
}

TEST(QueueSimulatorTest, BadInputIsOneClearError) {
  const Plan ring = *SynthesizeRing(4);
  EXPECT_THAT(SimulatePlanWithQueues(ring, 1, NetworkModel::Flat(4, kNvLink), {0.0, 0.0})
                  .status()
                  .message(),
              HasSubstr("needs 4 arrival times, got 2"));
  Plan bad = ring;
  bad.rounds[1].transfers[0].chunks = {7};
  EXPECT_THAT(
      SimulatePlanWithQueues(bad, 1, NetworkModel::Flat(4, kNvLink), std::vector<double>(4, 0.0))
          .status()
          .message(),
      HasSubstr("round 1: transfer 0 -> 1 names a rank or chunk outside the plan"));
}

}  // namespace
}  // namespace stragglar
