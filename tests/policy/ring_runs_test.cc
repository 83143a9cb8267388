// Ring runs (policy/ring_runs.h): which rounds of a plan are priced in closed form, and that the
// simulator gives the same result with them as round by round, bit for bit, for every plan family,
// random arrivals, whole plans and phases, with and without shared lanes; and rings that cross
// nodes, exactly where sums are exact and up to rounding elsewhere.
#include "policy/model/ring_runs.h"

#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"
#include "policy/model/network_model.h"
#include "policy/model/simulator.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RingRunsTest, RingIsOneRunOfEveryRound) {
  for (int n = 2; n <= 9; ++n) {
    const Plan ring = *SynthesizeRing(n);
    const std::vector<RingRun> runs = FindRingRuns(ring);
    ASSERT_EQ(runs.size(), 1u) << n;
    EXPECT_EQ(runs[0].first_round, 0);
    EXPECT_EQ(runs[0].rounds, 2 * (n - 1));
    ASSERT_EQ(runs[0].cycles.size(), 1u);
    EXPECT_EQ(runs[0].cycles[0].size(), static_cast<size_t>(n));
    EXPECT_EQ(runs[0].chunks, 1);
  }
  EXPECT_THAT(FindRingRuns(*SynthesizeRing(5))[0].cycles, ElementsAre(ElementsAre(0, 1, 2, 3, 4)));
}

TEST(RingRunsTest, TheHierarchicalRingIsFourRunsOfDisjointRings) {
  // 3 nodes of 4: node rings (ReduceScatter, 3 rounds of 3 chunks), rails (ReduceScatter and
  // AllGather, one run of 4 rounds of 1 chunk), node rings again (AllGather).
  const std::vector<RingRun> runs = FindRingRuns(*SynthesizeHierarchicalRing(3, 4));
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].first_round, 0);
  EXPECT_EQ(runs[0].rounds, 3);
  EXPECT_EQ(runs[0].chunks, 3);
  EXPECT_THAT(runs[0].cycles, ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7),
                                          ElementsAre(8, 9, 10, 11)));
  EXPECT_EQ(runs[1].first_round, 3);
  EXPECT_EQ(runs[1].rounds, 4);
  EXPECT_EQ(runs[1].chunks, 1);
  EXPECT_THAT(runs[1].cycles, ElementsAre(ElementsAre(0, 4, 8), ElementsAre(1, 5, 9),
                                          ElementsAre(2, 6, 10), ElementsAre(3, 7, 11)));
  EXPECT_EQ(runs[1].transfers(), 12);
  EXPECT_EQ(runs[2].first_round, 7);
  EXPECT_EQ(runs[2].rounds, 3);
}

TEST(RingRunsTest, StragglarsReduceScatterIsARingOfTheReadyRanks) {
  const Plan plan = *SynthesizeStragglar(6, /*straggler=*/2, /*pieces=*/2);
  const std::vector<RingRun> runs = FindRingRuns(plan);
  ASSERT_FALSE(runs.empty());
  EXPECT_EQ(runs[0].first_round, 0);
  EXPECT_EQ(runs[0].rounds, plan.pre_arrival_rounds);
  ASSERT_EQ(runs[0].cycles.size(), 1u);
  EXPECT_EQ(runs[0].cycles[0].size(), 5u);
  EXPECT_THAT(runs[0].cycles[0], ::testing::Not(::testing::Contains(2)));
  EXPECT_EQ(runs[0].chunks, 2);
  // Halving-Doubling's pairs repeat only in its middle: the last halving and the first doubling
  // exchange one chunk with the same partner.
  const std::vector<RingRun> pairs = FindRingRuns(*SynthesizeHalvingDoubling(8));
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].first_round, 2);
  EXPECT_EQ(pairs[0].rounds, 2);
  EXPECT_EQ(pairs[0].cycles.size(), 4u);
}

TEST(RingRunsTest, NotARing) {
  Plan plan{.num_ranks = 4, .num_chunks = 4};
  const auto round = [](std::vector<std::pair<int, int>> pairs, int chunks) {
    Round r;
    for (auto [src, dst] : pairs)
      r.transfers.push_back({src, dst, TransferOp::kCopy, ChunkRange(0, chunks)});
    return r;
  };
  plan.rounds = {round({{0, 1}, {1, 2}, {2, 3}, {3, 0}}, 1),  // a ring, but uneven chunks next
                 round({{0, 1}, {1, 2}, {2, 3}, {3, 0}}, 2),
                 round({{0, 1}, {1, 2}, {2, 3}}, 1),  // a path, not a cycle
                 round({{0, 1}, {1, 2}, {2, 3}}, 1),
                 round({{0, 1}, {1, 0}, {2, 3}}, 1),  // a pair and a path
                 round({{0, 1}, {1, 0}, {2, 3}}, 1),
                 round({{0, 1}, {1, 0}, {2, 3}, {3, 2}}, 1),  // two pairs, then other pairs
                 round({{0, 2}, {2, 0}, {1, 3}, {3, 1}}, 1)};
  EXPECT_TRUE(FindRingRuns(plan).empty());
  // Apart: the two rings and the two rounds of pairs.
  EXPECT_EQ(FindRingRuns(plan, /*min_rounds=*/1).size(), 4u);
}

// Every family at several sizes: the run-priced simulation equals the round-by-round one exactly.
TEST(RingRunsTest, SimulationWithRunsIsBitForBitTheSimulators) {
  std::mt19937 random(11);
  std::uniform_real_distribution<double> lag(0, 3e-3);
  std::bernoulli_distribution tie(0.3);
  for (const LinkModel& link :
       {LinkModel{}, LinkModel{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9, .shared_lanes = 2}}) {
    for (int n = 2; n <= 12; ++n) {
      std::vector<Plan> plans = {*SynthesizeRing(n), *SynthesizeHalvingDoubling(n)};
      if (n % 2 == 0) plans.push_back(*SynthesizeHierarchicalRing(n / 2, 2));
      if (n % 3 == 0) plans.push_back(*SynthesizeHierarchicalRing(3, n / 3));
      if (n >= 3) {
        plans.push_back(*SynthesizeStragglar(n, n - 1));
        plans.push_back(*SynthesizeStragglar(n, n / 2, 3));
      }
      for (const Plan& plan : plans) {
        const std::vector<RingRun> runs = FindRingRuns(plan);
        for (int trial = 0; trial < 8; ++trial) {
          std::vector<double> arrival(n);
          for (double& a : arrival) a = tie(random) ? 1e-3 : lag(random);  // ties too
          const double bytes = trial % 2 ? 1 << 20 : 12345;
          SCOPED_TRACE(testing::Message() << AlgorithmName(plan.algorithm) << " n=" << n);
          const SimulationResult reference = *SimulatePlan(plan, bytes, link, arrival);
          const SimulationResult fast =
              *SimulateRounds(plan, runs, 0, plan.num_rounds(), bytes, link, arrival);
          EXPECT_EQ(fast.finish_s, reference.finish_s);
          EXPECT_EQ(fast.completion_s, reference.completion_s);
          // A phase that starts or ends inside a run.
          const int begin = plan.num_rounds() / 3, end = plan.num_rounds() - plan.num_rounds() / 4;
          Plan phase = plan;
          phase.rounds.assign(plan.rounds.begin() + begin, plan.rounds.begin() + end);
          EXPECT_EQ(SimulateRounds(plan, runs, begin, end, bytes, link, arrival)->finish_s,
                    SimulatePlan(phase, bytes, link, arrival)->finish_s);
        }
      }
    }
  }
}

// Flat rings and flat StragglAR on a machine of nodes: their rings cross nodes, so their hops take
// two times. Transfers of 0 bytes cost alpha alone.
std::vector<Plan> PlansCrossingNodes(int n) {
  std::vector<Plan> plans = {*SynthesizeRing(n)};
  for (int straggler = 0; straggler < n; ++straggler) {
    plans.push_back(*SynthesizeStragglar(n, straggler));
  }
  return plans;
}

// The simulator one round at a time (no runs) over rounds [begin, end).
std::vector<double> RoundByRound(const Plan& plan, int begin, int end, double bytes,
                                 const NetworkModel& network, const std::vector<double>& arrival) {
  return SimulateRounds(plan, {}, begin, end, bytes, network, arrival)->finish_s;
}

TEST(RingRunsTest, RingsAcrossNodesAreExactWhereSumsAre) {
  // Whole-number hop times and arrivals: every sum is exact, so the closed form must give the
  // simulator's result bit for bit, whichever class is slower, at every phase boundary.
  std::mt19937 random(5);
  std::uniform_int_distribution<int> lag(0, 40);
  for (const auto& [intra_s, inter_s] :
       {std::pair{1.0, 3.0}, std::pair{2.0, 7.0}, std::pair{5.0, 1.0}, std::pair{1.0, 50.0}}) {
    for (int nodes = 2; nodes <= 5; ++nodes) {
      for (int per_node = 2; per_node <= 5; ++per_node) {
        const NetworkModel machine{.topology = {.nodes = nodes, .ranks_per_node = per_node},
                                   .intra_node = {.alpha_s = intra_s},
                                   .inter_node = {.alpha_s = inter_s}};
        const int n = nodes * per_node;
        for (const Plan& plan : PlansCrossingNodes(n)) {
          const std::vector<RingRun> runs = FindRingRuns(plan);
          ASSERT_FALSE(runs.empty());
          std::vector<double> arrival(n);
          for (double& a : arrival) a = lag(random);
          const int rounds = plan.num_rounds();
          for (int begin : {0, 1, rounds / 3}) {
            for (int end : {rounds, rounds - 1, begin + 2, begin + rounds / 2}) {
              if (end > rounds || end < begin) continue;
              SCOPED_TRACE(testing::Message()
                           << nodes << "x" << per_node << " " << AlgorithmName(plan.algorithm)
                           << " straggler " << plan.straggler.value_or(-1) << " rounds [" << begin
                           << ", " << end << ") hops " << intra_s << "/" << inter_s);
              EXPECT_EQ(SimulateRounds(plan, runs, begin, end, 0, machine, arrival)->finish_s,
                        RoundByRound(plan, begin, end, 0, machine, arrival));
            }
          }
        }
      }
    }
  }
}

TEST(RingRunsTest, RingsAcrossNodesMatchTheSimulatorUpToRounding) {
  // Real links and sizes, random arrivals with ties: within 1e-12 of each time.
  std::mt19937 random(9);
  std::uniform_real_distribution<double> lag(0, 3e-3);
  std::bernoulli_distribution tie(0.3);
  const LinkModel nvlink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450e9};
  const LinkModel nic{.alpha_s = 10e-6, .bandwidth_bytes_per_s = 50e9, .shared_lanes = 4};
  for (const auto& [nodes, per_node] : {std::pair{2, 8}, std::pair{3, 4}, std::pair{8, 2}}) {
    const NetworkModel machine{.topology = {.nodes = nodes, .ranks_per_node = per_node},
                               .intra_node = nvlink,
                               .inter_node = nic};
    const int n = nodes * per_node;
    for (const Plan& plan : PlansCrossingNodes(n)) {
      const std::vector<RingRun> runs = FindRingRuns(plan);
      for (double bytes : {12345.0, 64e6}) {
        std::vector<double> arrival(n);
        for (double& a : arrival) a = 100 + (tie(random) ? 1e-3 : lag(random));
        const std::vector<double> closed =
            SimulateRounds(plan, runs, 0, plan.num_rounds(), bytes, machine, arrival)->finish_s;
        const std::vector<double> exact =
            RoundByRound(plan, 0, plan.num_rounds(), bytes, machine, arrival);
        for (int r = 0; r < n; ++r) EXPECT_NEAR(closed[r], exact[r], 1e-12 * exact[r]) << r;
      }
    }
  }
}

TEST(RingRunsTest, RoundsOutsideThePlanAreAnError) {
  const Plan ring = *SynthesizeRing(4);
  const std::vector<double> arrival(4, 0.0);
  EXPECT_THAT(SimulateRounds(ring, {}, 0, 7, 1, LinkModel{}, arrival).status().message(),
              HasSubstr("not within the plan's 6"));
  EXPECT_FALSE(SimulateRounds(ring, {}, 4, 3, 1, LinkModel{}, arrival).ok());
  EXPECT_FALSE(SimulateRounds(ring, {}, -1, 3, 1, LinkModel{}, arrival).ok());
}

}  // namespace
}  // namespace stragglar
