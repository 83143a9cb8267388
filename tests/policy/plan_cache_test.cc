// PlanCache::Simulate's closed form for StragglAR's post-arrival rounds: equal to the full
// simulation up to rounding wherever it applies, and the full simulation, bit for bit, wherever
// it does not. Also the compact rounds the cache simulates from: the same bits as the plan's;
// Ring's plan kept without its transfers; and StragglAR's plans kept as a renamed header or as
// their compact rounds, one plan's transfers however many stragglers are asked about.
#include "policy/plan_cache.h"

#include <bit>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/plan_memo.h"
#include "kernels/plan/rank_relabel.h"
#include "kernels/plan/verifier.h"
#include "kernels/program/program.h"
#include "kernels/synth/synthesizers.h"
#include "policy/chooser.h"
#include "policy/hierarchical_rails.h"
#include "policy/model/queue_simulator.h"
#include "policy/model/ring_runs.h"
#include "policy/model/simulator.h"

namespace stragglar {
namespace {

// `got` equals `want` up to rounding: a few ulps of the times involved.
void ExpectClose(const SimulationResult& got, const SimulationResult& want) {
  ASSERT_EQ(got.finish_s.size(), want.finish_s.size());
  for (size_t r = 0; r < want.finish_s.size(); ++r) {
    EXPECT_NEAR(got.finish_s[r], want.finish_s[r], 1e-12 * (1 + std::abs(want.finish_s[r])))
        << "rank " << r;
  }
  EXPECT_NEAR(got.completion_s, want.completion_s, 1e-12 * (1 + want.completion_s));
  EXPECT_NEAR(got.after_last_arrival_s, want.after_last_arrival_s,
              1e-12 * (1 + want.after_last_arrival_s));
}

TEST(PlanCacheTest, StragglarsPostArrivalClosedFormIsTheSimulation) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> lag(0, 2e-3);
  for (const LinkModel& link :
       {LinkModel{}, LinkModel{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9, .shared_lanes = 2}}) {
    for (int n = 3; n <= 16; ++n) {
      PlanCache cache(n);
      for (int pieces : {1, 2}) {
        for (int straggler : {0, n / 2, n - 1}) {
          const PricedPlan plan = *cache.WithPieces(Algorithm::kStragglar, straggler, pieces);
          for (int trial = 0; trial < 6; ++trial) {
            const double bytes = trial % 2 ? 1 << 22 : 4099;
            std::vector<double> arrival(n);
            for (double& a : arrival) a = lag(random);
            // Late by far more than the pre-arrival rounds, or arriving with the others.
            arrival[straggler] = trial < 4 ? 0.5 + lag(random) : lag(random) / 4;
            SCOPED_TRACE(testing::Message() << "n=" << n << " pieces=" << pieces
                                            << " straggler=" << straggler << " trial " << trial);
            const int64_t before = cache.closed_form_calls();
            const SimulationResult got = *cache.Simulate(plan, bytes, link, arrival);
            // Around another straggler than the last rank the cache prices the plan around the
            // last rank; the plan an executor gets is what it must cost.
            const SimulationResult want =
                *SimulatePlan(**cache.Materialized(plan), bytes, link, arrival);
            if (cache.closed_form_calls() > before) {
              ExpectClose(got, want);
            } else {
              EXPECT_EQ(got.finish_s, want.finish_s);  // simulated round by round
              EXPECT_EQ(got.completion_s, want.completion_s);
            }
          }
        }
      }
      // A ring ReduceScatter ends alike on every ready rank, so every trial of every plan and
      // link is priced in closed form, whenever the straggler arrives.
      EXPECT_EQ(cache.closed_form_calls(), 2 * 3 * 6) << "n=" << n;
    }
  }
}

TEST(PlanCacheTest, LogDepthClosedFormIsTheSimulationWhereItApplies) {
  // Log-depth StragglAR's pre-arrival Halving-Doubling: with a power-of-two count of ready ranks it
  // is a butterfly, which leaves every ready rank at one time whoever arrived last, so every call
  // is priced in closed form; with others, the pairs folded into it leave in a pattern, which
  // holds only for some arrivals. Wherever the closed form is used it must equal the simulation.
  std::mt19937 random(11);
  std::uniform_real_distribution<double> lag(0, 2e-3);
  const LinkModel link{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9};
  int64_t closed_form_elsewhere = 0;
  for (int n : {3, 5, 6, 9, 12, 17, 33, 40}) {
    PlanCache cache(n);
    const bool butterfly = std::has_single_bit(static_cast<unsigned>(n - 1));
    for (int blocks : {1, 4}) {
      for (int straggler : {0, n / 2, n - 1}) {
        const PricedPlan plan =
            *cache.WithShape(Algorithm::kStragglar, straggler, {.log_depth_blocks = blocks});
        for (int trial = 0; trial < 6; ++trial) {
          std::vector<double> arrival(n);
          for (double& a : arrival) a = trial < 3 ? lag(random) : 0;
          arrival[straggler] = 0.5 + lag(random);
          SCOPED_TRACE(testing::Message() << "n=" << n << " blocks=" << blocks
                                          << " straggler=" << straggler << " trial " << trial);
          const int64_t before = cache.closed_form_calls();
          const SimulationResult got = *cache.Simulate(plan, 1 << 22, link, arrival);
          const SimulationResult want =
              *SimulatePlan(**cache.Materialized(plan), 1 << 22, link, arrival);
          const bool closed_form = cache.closed_form_calls() > before;
          // Ready ranks arriving together always leave in the pattern.
          if (butterfly || trial >= 3) {
            EXPECT_TRUE(closed_form);
          }
          if (!butterfly && closed_form) ++closed_form_elsewhere;
          if (closed_form) {
            ExpectClose(got, want);
          } else {
            EXPECT_EQ(got.finish_s, want.finish_s);
          }
        }
      }
    }
  }
  EXPECT_GT(closed_form_elsewhere, 0);
}

TEST(PlanCacheTest, ReadyRanksLeavingThePreArrivalRoundsApartAreSimulated) {
  // Hierarchical StragglAR's pre-arrival rounds (inside nodes, then along rails) leave its ready
  // ranks at different times when they arrive apart: nothing is assumed, every round simulated.
  // Both link classes alike, so that the simulation on one link is the plan's own.
  const LinkModel link;
  PlanCache cache(6, 0, {.topology = {.nodes = 3, .ranks_per_node = 2}, .inter_node_link = link});
  const PricedPlan plan = *cache.WithShape(Algorithm::kStragglar, 5, {.hierarchical = true});
  const std::vector<double> arrival = {0.4, 0, 0.1, 0, 0, 0.3};
  const SimulationResult got = *cache.Simulate(plan, 1 << 20, link, arrival);
  EXPECT_EQ(cache.closed_form_calls(), 0);
  EXPECT_EQ(got.finish_s,
            SimulatePlan(**cache.Materialized(plan), 1 << 20, link, arrival)->finish_s);
}

TEST(PlanCacheTest, ALateStragglerIsPricedInClosedFormHoweverApartTheOthersLeave) {
  // On a machine of nodes the ready ranks leave flat StragglAR's ReduceScatter (a ring across
  // nodes) and hierarchical StragglAR's pre-arrival rounds apart. Their side of the post-arrival
  // rounds is then only bounded, which is enough where the straggler's side is later everywhere:
  // a late straggler is priced in closed form, one that is barely late is simulated unless the
  // bound happens to suffice for its arrivals.
  std::mt19937 random(3);
  int barely_late_simulated = 0;
  std::uniform_real_distribution<double> lag(0, 2e-3);
  const LinkModel nvlink{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9};
  const LinkModel nic{.alpha_s = 20e-6, .bandwidth_bytes_per_s = 1e9};
  for (const auto& [nodes, per_node] : {std::pair{3, 2}, std::pair{2, 4}, std::pair{4, 3}}) {
    const Topology topology{.nodes = nodes, .ranks_per_node = per_node};
    const int n = topology.num_ranks();
    const NetworkModel network{.topology = topology, .intra_node = nvlink, .inter_node = nic};
    PlanCache cache(n, 0, {.topology = topology, .inter_node_link = nic});
    for (int straggler : {0, n / 2, n - 1}) {
      for (const bool hierarchical : {false, true}) {
        const PricedPlan plan = *cache.WithShape(Algorithm::kStragglar, straggler,
                                                 {.pieces = 1, .hierarchical = hierarchical});
        for (int trial = 0; trial < 4; ++trial) {
          std::vector<double> arrival(n);
          for (double& a : arrival) a = lag(random);
          const bool late = trial < 2;
          arrival[straggler] = late ? 0.5 : 2e-3 + lag(random) / 100;
          SCOPED_TRACE(testing::Message()
                       << TopologyName(topology) << " straggler " << straggler
                       << (hierarchical ? " hierarchical" : " flat") << " trial " << trial);
          const int64_t before = cache.closed_form_calls();
          const SimulationResult got = *cache.Simulate(plan, 1 << 22, nvlink, arrival);
          const SimulationResult want =
              *SimulatePlan(**cache.Materialized(plan), 1 << 22, network, arrival);
          const bool closed_form = cache.closed_form_calls() > before;
          if (late) {
            EXPECT_TRUE(closed_form);
          } else if (!closed_form) {
            ++barely_late_simulated;
          }
          if (closed_form) {
            ExpectClose(got, want);
          } else {
            for (int r = 0; r < n; ++r) {  // the mixed ring is priced up to rounding
              EXPECT_NEAR(got.finish_s[r], want.finish_s[r], 1e-12 * want.finish_s[r]);
            }
          }
        }
      }
    }
  }
  // Of 3 layouts x 3 stragglers x 2 families x 2 barely-late trials.
  EXPECT_GT(barely_late_simulated, 30);
}

TEST(PlanCacheTest, TheTimeAfterArrivalIsAtLeastTheStragglersOwnChains) {
  // AfterLastArrivalAtLeast never exceeds the simulation, and once the plan's post-arrival
  // profile is known (the cache has simulated it) meets it when the straggler is so late that its
  // own chains decide; plans without a straggler get 0; wrong input, an error. (On nodes the flat
  // and log-depth plans around a rank other than the last are bounded before that by their
  // renaming bounds, looser: OnNodesEveryRenamedPlanIsBoundedWithoutRenamingItsIndex.)
  std::mt19937 random(21);
  std::uniform_real_distribution<double> lag(0, 1e-3);
  const LinkModel link{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9};
  const Topology topology{.nodes = 3, .ranks_per_node = 4};
  const NetworkModel network{
      .topology = topology, .intra_node = link, .inter_node = kTypicalInterNodeLink};
  PlanCache cache(12, 0, {.topology = topology});
  for (const StragglarShape& shape :
       {StragglarShape{.pieces = 2}, StragglarShape{.log_depth_blocks = 4},
        StragglarShape{.hierarchical = true}}) {
    for (int trial = 0; trial < 8; ++trial) {
      const int straggler = (5 * trial) % 12;
      const PricedPlan plan = *cache.WithShape(Algorithm::kStragglar, straggler, shape);
      std::vector<double> arrival(12);
      for (double& a : arrival) a = lag(random);
      const bool late = trial % 2 == 0;
      arrival[straggler] = late ? 1.0 : lag(random);
      const double unsimulated_bound = *cache.AfterLastArrivalAtLeast(plan, 1 << 20, link, arrival);
      const double simulated =
          SimulatePlan(**cache.Materialized(plan), 1 << 20, network, arrival)->after_last_arrival_s;
      EXPECT_LE(unsimulated_bound, simulated) << trial;
      ASSERT_TRUE(cache.Simulate(plan, 1 << 20, link, arrival).ok());
      const double bound = *cache.AfterLastArrivalAtLeast(plan, 1 << 20, link, arrival);
      EXPECT_LE(bound, simulated) << trial;
      // Short of it by the margin kept for rounding alone.
      if (late) {
        EXPECT_NEAR(bound, simulated, 1e-9 * simulated + 2e-12) << trial;
      }
    }
  }
  const std::vector<double> together(12, 0.0);
  const PricedPlan ring = *cache.For(Algorithm::kRing, std::nullopt, 1 << 20, link);
  EXPECT_EQ(*cache.AfterLastArrivalAtLeast(ring, 1 << 20, link, together), 0.0);
  EXPECT_THAT(cache.AfterLastArrivalAtLeast(ring, 1 << 20, link, {0.0, 1.0}).status().message(),
              ::testing::HasSubstr("needs 12 arrival times, got 2"));
}

TEST(PlanCacheTest, OnPerClassQueuesEveryPlanIsPricedThatWayAndThePiecesPlanIsOffered) {
  // 8x8 at 1 GiB, the docs' NVLink and NIC: hierarchical StragglAR with its shards in pieces
  // takes 4.2 ms after arrival on per-class queues against 7.1 ms whole (docs/scale-model.md), so
  // a cache for an executor with those queues offers it, and one for round-by-round executors,
  // where it is slower, never does.
  const Topology topology{.nodes = 8, .ranks_per_node = 8};
  const LinkModel nvlink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1 << 30)};
  const NetworkModel network{
      .topology = topology, .intra_node = nvlink, .inter_node = kTypicalInterNodeLink};
  const double bytes = 1 << 30;
  PlanCache queued(64, 0, {.topology = topology, .per_class_queues = true});
  PlanCache rounds(64, 0, {.topology = topology});
  const std::vector<StragglarShape> queued_shapes = *queued.StragglarShapes(bytes, nvlink);
  ASSERT_EQ(queued_shapes.size(), 3u);
  EXPECT_TRUE(queued_shapes[2].hierarchical);
  EXPECT_GT(queued_shapes[2].pieces, 1);
  const std::vector<StragglarShape> round_shapes = *rounds.StragglarShapes(bytes, nvlink);
  for (const StragglarShape& shape : round_shapes) {
    EXPECT_FALSE(shape.hierarchical && shape.pieces > 1);
  }
  // Every plan, on any arrivals, is the queue simulation bit for bit; no bound is claimed.
  std::mt19937 random(5);
  std::uniform_real_distribution<double> lag(0, 1e-3);
  const std::vector<PricedPlan> plans = {
      *queued.WithShape(Algorithm::kStragglar, 63, queued_shapes[2]),
      *queued.WithShape(Algorithm::kStragglar, 63, {.hierarchical = true}),
      *queued.For(Algorithm::kRing, std::nullopt, bytes, nvlink)};
  for (const PricedPlan plan : plans) {
    std::vector<double> arrival(64);
    for (double& a : arrival) a = lag(random);
    arrival[63] = 0.5;
    const SimulationResult got = *queued.Simulate(plan, bytes, nvlink, arrival);
    const SimulationResult want =
        *SimulatePlanWithQueues(**queued.Materialized(plan), bytes, network, arrival);
    EXPECT_EQ(got.finish_s, want.finish_s) << AlgorithmName(plan.algorithm());
    EXPECT_EQ(*queued.AfterLastArrivalAtLeast(plan, bytes, nvlink, arrival), 0.0);
  }
  EXPECT_EQ(queued.closed_form_calls(), 0);
  // The pieces plan is the faster on queues, after a late straggler's arrival.
  std::vector<double> late(64, 0.0);
  late[63] = 1.0;
  EXPECT_LT(queued.Simulate(plans[0], bytes, nvlink, late)->after_last_arrival_s,
            queued.Simulate(plans[1], bytes, nvlink, late)->after_last_arrival_s);
}

TEST(PlanCacheTest, TheTimedPlanIsTimedWithTheMachinesLinks) {
  // 3x4 with the emulated cluster's links (shared memory at 0.9 GB/s inside a host, 200 Mbit/s
  // between; tests/policy/hierarchical_rails_test.cc): the plan timed for per-class queues is the
  // synthesizer's timed with those links at the shape's size, not the one timed with NVLink
  // inside nodes; around another straggler, that plan renamed, correct too.
  const Topology topology{.nodes = 3, .ranks_per_node = 4};
  const LinkModel inside{.alpha_s = 103e-6, .bandwidth_bytes_per_s = 0.915e9};
  const LinkModel between{.alpha_s = 379e-6, .bandwidth_bytes_per_s = 25e6};
  PlanCache cache(12, 0,
                  {.topology = topology,
                   .inter_node_link = between,
                   .per_class_queues = true,
                   .intra_node_link = inside});
  const StragglarShape timed{.pieces = 2, .hierarchical = true, .queue_timed_bytes = 4 << 20};
  const Plan& got = **cache.Materialized(*cache.WithShape(Algorithm::kStragglar, 11, timed));
  const Plan want = *SynthesizeTimedHierarchicalStragglar(
      3, 4, 11, 0, 1, QueueTimingFor(topology, 4 << 20, inside, between));
  const Plan on_nvlink = *SynthesizeTimedHierarchicalStragglar(
      3, 4, 11, 0, 1, QueueTimingFor(topology, 4 << 20, LinkModel{}, between));
  EXPECT_EQ(got.rounds, want.rounds);
  EXPECT_NE(got.rounds, on_nvlink.rounds);
  const Plan& renamed = **cache.Materialized(*cache.WithShape(Algorithm::kStragglar, 5, timed));
  EXPECT_EQ(renamed.straggler, 5);
  EXPECT_TRUE(VerifyPlan(renamed).ok()) << VerifyPlan(renamed);
}

TEST(PlanCacheTest, CompactRoundsSimulateBitForBit) {
  // What the cache streams through instead of the plan's transfers gives the same bits, on one
  // node and on a machine of nodes, for plans of one chunk per transfer and of many.
  const std::vector<Plan> plans = {*SynthesizeStragglar(9, 4, 2), *SynthesizeHalvingDoubling(12),
                                   *SynthesizeHierarchicalStragglar(3, 4, 7)};
  for (const Plan& plan : plans) {
    const std::optional<CompactRounds> compact = CompactRoundsOf(plan);
    ASSERT_TRUE(compact.has_value());
    std::vector<double> arrival(plan.num_ranks);
    for (int r = 0; r < plan.num_ranks; ++r) arrival[r] = 1e-5 * ((r * 7) % 5);
    for (const NetworkModel& network :
         {NetworkModel::Flat(plan.num_ranks, LinkModel{}),
          NetworkModel{.topology = {.nodes = 3, .ranks_per_node = plan.num_ranks / 3},
          .intra_node = LinkModel{},
          .inter_node = kTypicalInterNodeLink}}) {
      const SimulationResult want = *SimulatePlan(plan, 12345678, network, arrival);
      const SimulationResult got =
          *SimulateRounds(plan, {}, &*compact, 0, plan.num_rounds(), 12345678, network, arrival);
      EXPECT_EQ(got.finish_s, want.finish_s) << AlgorithmName(plan.algorithm);
    }
  }
  // Another plan's compact rounds are refused.
  const std::optional<CompactRounds> other = CompactRoundsOf(plans[1]);
  EXPECT_FALSE(SimulateRounds(plans[0], {}, &*other, 0, plans[0].num_rounds(), 1,
                              NetworkModel::Flat(9, LinkModel{}), std::vector<double>(9, 0.0))
                   .ok());
}

TEST(PlanCacheTest, RingOnOneMachineIsPricedWithoutItsTransfersAndMaterializedForExecutors) {
  std::mt19937 random(11);
  std::uniform_real_distribution<double> lag(0, 2e-3);
  for (int n : {2, 3, 5, 8, 16}) {
    SCOPED_TRACE(n);
    const Plan full = *SynthesizeRing(n);
    const PlanHeader header = HeaderOf(full);
    EXPECT_EQ(*SynthesizeRingHeader(n), header);
    EXPECT_EQ(RingRunsOfRing(n), FindRingRuns(full));

    PlanCache cache(n);
    const PricedPlan plan = *cache.For(Algorithm::kRing, std::nullopt, 1 << 20, LinkModel{});
    EXPECT_FALSE(cache.KeepsTransfers(plan));
    EXPECT_EQ(cache.kept_transfers(), 0);
    EXPECT_EQ(plan.num_rounds(), header.num_rounds());
    EXPECT_EQ(plan.num_rounds(), full.num_rounds());
    EXPECT_EQ(plan.num_chunks(), header.num_chunks);
    std::vector<double> arrival(n);
    for (double& at : arrival) at = lag(random);
    const SimulationResult want = *SimulatePlan(full, 12345678, LinkModel{}, arrival);
    EXPECT_EQ(cache.Simulate(plan, 12345678, LinkModel{}, arrival)->finish_s, want.finish_s);

    // SimulatePlan prices the synthesizer's header by its run, as the cache does. Nothing that
    // reads transfers (LowerPlan, VerifyPlan, the queues) can be handed a header: it is not a
    // Plan. The simulator's rounds say so instead of running nothing where no run covers them.
    EXPECT_EQ(SimulatePlan(header, 12345678, LinkModel{}, arrival)->finish_s, want.finish_s);
    const absl::Status refused =
        SimulateRounds(PlanRounds{.header = header}, 0, header.num_rounds(), 1,
                       NetworkModel::Flat(n, LinkModel{}), arrival)
            .status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(refused.message(), testing::HasSubstr("known here by its header alone"));

    // Materialized builds it once, beside the header: the same plan at each request, the same
    // prices.
    const Plan* whole = *cache.Materialized(plan);
    EXPECT_EQ(*whole, full);
    EXPECT_TRUE(cache.KeepsTransfers(plan));
    EXPECT_EQ(*cache.Materialized(plan), whole);
    EXPECT_EQ(cache.Simulate(plan, 12345678, LinkModel{}, arrival)->finish_s, want.finish_s);
    EXPECT_TRUE(LowerPlan(*whole, n - 1).ok());
  }
  // Another cache's plan is not filled in behind its owner's back, nor priced, whether its
  // owner keeps its transfers (StragglAR around the last rank) or not (Ring).
  PlanCache cache(4), other(4);
  const PricedPlan stranger = *other.For(Algorithm::kRing, std::nullopt, 1 << 20, LinkModel{});
  EXPECT_EQ(cache.Materialized(stranger).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(other.KeepsTransfers(stranger));
  const PricedPlan kept_elsewhere = *other.WithPieces(Algorithm::kStragglar, 3, 1);
  ASSERT_TRUE(other.KeepsTransfers(kept_elsewhere));
  for (const PricedPlan& foreign : {stranger, kept_elsewhere}) {
    EXPECT_EQ(cache.Materialized(foreign).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(cache.Simulate(foreign, 1 << 20, LinkModel{}, {0, 0, 0, 1e-3}).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  // On a machine of nodes Ring is the hierarchical ring, whose header the cache can keep too
  // (how it is priced there: native_test.cc).
  for (const auto& [nodes, ranks_per_node] :
       std::vector<std::pair<int, int>>{{1, 4}, {4, 1}, {2, 2}, {3, 4}, {4, 3}}) {
    const Plan full = *SynthesizeHierarchicalRing(nodes, ranks_per_node);
    EXPECT_EQ(*SynthesizeHierarchicalRingHeader(nodes, ranks_per_node), HeaderOf(full))
        << nodes << "x" << ranks_per_node;
  }
}

TEST(PlanCacheTest, StragglarAroundAnotherRankIsTheLastRanksPlanRenamedUntilAnExecutorAsks) {
  // One machine: only the plan around the last rank is built; around any other straggler the
  // cache keeps a header, prices it through that plan, and builds it only when asked.
  std::mt19937 random(5);
  std::uniform_real_distribution<double> lag(0, 2e-3);
  const int n = 21;
  const LinkModel link{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9};
  for (const StragglarShape& shape : {StragglarShape{.pieces = 1}, StragglarShape{.pieces = 2},
                                      StragglarShape{.log_depth_blocks = 4}}) {
    SCOPED_TRACE(testing::Message()
                 << "pieces " << shape.pieces << " blocks " << shape.log_depth_blocks);
    PlanCache cache(n);
    const PricedPlan last = *cache.WithShape(Algorithm::kStragglar, n - 1, shape);
    EXPECT_TRUE(cache.KeepsTransfers(last));
    for (int straggler = 0; straggler < n - 1; ++straggler) {
      const PricedPlan plan = *cache.WithShape(Algorithm::kStragglar, straggler, shape);
      EXPECT_EQ(*cache.WithShape(Algorithm::kStragglar, straggler, shape), plan);
      ASSERT_FALSE(cache.KeepsTransfers(plan)) << "straggler " << straggler;
      EXPECT_EQ(plan.straggler(), straggler);
      EXPECT_EQ(plan.num_rounds(), last.num_rounds());
      EXPECT_EQ(plan.pre_arrival_rounds(), last.pre_arrival_rounds());

      std::vector<double> arrival(n);
      for (double& at : arrival) at = lag(random);
      arrival[straggler] = 0.25;
      const SimulationResult priced = *cache.Simulate(plan, 1 << 22, link, arrival);
      const double phase_s = *cache.PreArrivalSeconds(plan, 1 << 22, link);
      const double bound_s = *cache.AfterLastArrivalAtLeast(plan, 1 << 22, link, arrival);
      // What the synthesizer builds around this straggler, where the header was.
      const Plan* whole = *cache.Materialized(plan);
      EXPECT_TRUE(cache.KeepsTransfers(plan));
      EXPECT_EQ(*whole, shape.log_depth_blocks > 0
                            ? *SynthesizeLogDepthStragglar(n, straggler, shape.log_depth_blocks)
                            : *SynthesizeStragglar(n, straggler, shape.pieces));
      EXPECT_TRUE(VerifyPlan(*whole).ok());
      // The same prices before and after, and those of the plan itself.
      const SimulationResult after = *cache.Simulate(plan, 1 << 22, link, arrival);
      EXPECT_EQ(after.finish_s, priced.finish_s);
      EXPECT_EQ(after.after_last_arrival_s, priced.after_last_arrival_s);
      ExpectClose(priced, *SimulatePlan(*whole, 1 << 22, link, arrival));
      EXPECT_EQ(*cache.PreArrivalSeconds(plan, 1 << 22, link), phase_s);
      EXPECT_EQ(phase_s, *cache.PreArrivalSeconds(last, 1 << 22, link));
      EXPECT_LE(bound_s, priced.after_last_arrival_s);
      EXPECT_EQ(*cache.AfterLastArrivalAtLeast(plan, 1 << 22, link, arrival), bound_s);
    }
  }
  // A straggler outside the ranks is still refused, by the synthesizer's message.
  PlanCache cache(n);
  const absl::Status outside = cache.WithPieces(Algorithm::kStragglar, n, 1).status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outside.message(), testing::HasSubstr("outside"));
  // On a machine of nodes a rank's name decides its links. For hierarchical StragglAR the renaming
  // keeps every pair of ranks on one node or apart, so the prices hold there too; the plan is then
  // another valid plan around the straggler than the synthesizer's, costing what the plan around
  // the last rank costs. The flat and log-depth plans are the synthesizer's around each
  // straggler, priced from their compact rounds, and rebuilt whole for an executor.
  const Topology three_by_four{.nodes = 3, .ranks_per_node = 4};
  const NetworkModel network{
      .topology = three_by_four, .intra_node = link, .inter_node = kTypicalInterNodeLink};
  PlanCache nodes(12, 0, {.topology = three_by_four});
  for (const StragglarShape& shape :
       {StragglarShape{.pieces = 1}, StragglarShape{.log_depth_blocks = 2}}) {
    for (int straggler : {1, 11}) {
      const PricedPlan plan = *nodes.WithShape(Algorithm::kStragglar, straggler, shape);
      EXPECT_FALSE(nodes.KeepsTransfers(plan));
      std::vector<double> arrival(12);
      for (double& at : arrival) at = lag(random);
      arrival[straggler] = 0.25;
      const SimulationResult priced = *nodes.Simulate(plan, 1 << 22, link, arrival);
      const double phase_s = *nodes.PreArrivalSeconds(plan, 1 << 22, link);
      const Plan& whole = **nodes.Materialized(plan);
      EXPECT_EQ(whole, shape.log_depth_blocks > 0 ? *SynthesizeLogDepthStragglar(12, straggler, 2)
                                                  : *SynthesizeStragglar(12, straggler));
      EXPECT_EQ(nodes.Simulate(plan, 1 << 22, link, arrival)->finish_s, priced.finish_s);
      EXPECT_EQ(*nodes.PreArrivalSeconds(plan, 1 << 22, link), phase_s);
      ExpectClose(priced, *SimulatePlan(whole, 1 << 22, network, arrival));
    }
  }
  // On per-class queues every plan is simulated from its transfers: none is dropped.
  PlanCache queues(12, 0, {.topology = three_by_four, .per_class_queues = true});
  EXPECT_TRUE(queues.KeepsTransfers(*queues.WithShape(Algorithm::kStragglar, 1, {})));
  for (const StragglarShape& shape :
       {StragglarShape{.hierarchical = true},
        StragglarShape{.log_depth_blocks = 2, .hierarchical = true}}) {
    const Plan& last = **nodes.Materialized(*nodes.WithShape(Algorithm::kStragglar, 11, shape));
    for (int straggler = 0; straggler < 11; ++straggler) {
      SCOPED_TRACE(testing::Message()
                   << "3x4 straggler " << straggler << " blocks " << shape.log_depth_blocks
                   << " hierarchical " << shape.hierarchical);
      const PricedPlan plan = *nodes.WithShape(Algorithm::kStragglar, straggler, shape);
      ASSERT_FALSE(nodes.KeepsTransfers(plan));
      std::vector<double> arrival(12);
      for (double& at : arrival) at = lag(random);
      arrival[straggler] = 0.25;
      const SimulationResult priced = *nodes.Simulate(plan, 1 << 22, link, arrival);
      const Plan& whole = **nodes.Materialized(plan);
      EXPECT_EQ(whole, RankRelabel::KeepingNodes(3, 4, straggler).Apply(last));
      EXPECT_EQ(whole.straggler, straggler);
      EXPECT_TRUE(VerifyPlan(whole).ok());
      ExpectClose(priced, *SimulatePlan(whole, 1 << 22, network, arrival));
    }
  }
}

TEST(PlanCacheTest, OnNodesARenamedPlanPricesAsItsCanonicalIndexRenamedBitForBit) {
  // On nodes the flat and log-depth plans around a rank other than the last are priced on the
  // canonical plan's index, its ranks renamed as it runs: bit for bit the renamed index (ring runs
  // that cross nodes, compact rounds) built as the cache once kept it. Every straggler of 3x4,
  // three shapes, whole plans and their pre-arrival rounds.
  std::mt19937 random(9);
  std::uniform_real_distribution<double> lag(0, 1e-3);
  const LinkModel link{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9};
  const Topology three_by_four{.nodes = 3, .ranks_per_node = 4};
  const NetworkModel network{
      .topology = three_by_four, .intra_node = link, .inter_node = kTypicalInterNodeLink};
  // The synthesizer's plans, as the cache builds them (a shape's flat plan, or log-depth's).
  const auto synthesize = [](const StragglarShape& shape, int straggler) {
    return shape.log_depth_blocks > 0
               ? *SynthesizeLogDepthStragglar(12, straggler, shape.log_depth_blocks)
               : *SynthesizeStragglar(12, straggler, shape.pieces);
  };
  for (const StragglarShape& shape : {StragglarShape{.pieces = 1}, StragglarShape{.pieces = 2},
                                      StragglarShape{.log_depth_blocks = 2}}) {
    PlanCache cache(12, 0, {.topology = three_by_four});
    const Plan canonical = synthesize(shape, 11);
    const std::vector<RingRun> runs = FindRingRuns(canonical);
    const CompactRounds compact = *CompactRoundsOf(canonical);
    for (int straggler = 0; straggler < 11; ++straggler) {
      SCOPED_TRACE(testing::Message() << "blocks " << shape.log_depth_blocks << " pieces "
                                      << shape.pieces << " straggler " << straggler);
      const PricedPlan plan = *cache.WithShape(Algorithm::kStragglar, straggler, shape);
      ASSERT_FALSE(cache.KeepsTransfers(plan));
      const RankRelabel relabel = RankRelabel::For(plan.variant(), 12, straggler);
      std::vector<RingRun> renamed_runs = runs;
      for (RingRun& run : renamed_runs) {
        for (std::vector<int>& cycle : run.cycles) {
          for (int& rank : cycle) rank = relabel.Renamed(rank);
        }
      }
      CompactRounds renamed_compact = compact;
      for (CompactRounds::Move& move : renamed_compact.moves) {
        move.src = static_cast<uint16_t>(relabel.Renamed(move.src));
        move.dst = static_cast<uint16_t>(relabel.Renamed(move.dst));
      }
      const Plan around = synthesize(shape, straggler);
      ASSERT_EQ(relabel.Apply(canonical), around);
      std::vector<double> arrival(12);
      for (double& at : arrival) at = lag(random);
      arrival[straggler] += 2e-3;
      for (int end : {plan.pre_arrival_rounds(), plan.num_rounds()}) {
        const int64_t simulations = cache.renamed_simulations();
        const SimulationResult priced = *cache.SimulatePart(plan, 0, end, 1 << 22, link, arrival);
        EXPECT_EQ(cache.renamed_simulations(), simulations + 1);
        const SimulationResult expected = *SimulateRounds(around, renamed_runs, &renamed_compact, 0,
                                                          end, 1 << 22, network, arrival);
        EXPECT_EQ(priced.finish_s, expected.finish_s) << "rounds [0, " << end << ")";
        EXPECT_EQ(priced.completion_s, expected.completion_s);
        EXPECT_EQ(priced.after_last_arrival_s, expected.after_last_arrival_s);
      }
      EXPECT_FALSE(cache.KeepsTransfers(plan));
    }
    // On nodes every plan is priced by its index, Ring's too: none keeps its transfers.
    EXPECT_FALSE(cache.KeepsTransfers(*cache.For(Algorithm::kRing, std::nullopt, 1, link)));
    EXPECT_EQ(cache.kept_transfers(), 0);
  }
}

TEST(PlanCacheTest, OnNodesEveryRenamedPlanIsBoundedWithoutSimulatingIt) {
  // On nodes the flat and log-depth plans around a rank other than the last are priced by their
  // canonical plan's index renamed. Their least time after the last arrival, and their regime
  // where the straggler's lead is clearly shorter or longer than their pre-arrival rounds, come
  // from bounds found once on the canonical plan, so asking simulates no renamed plan. The bounds
  // hold (at most the exact price) for every straggler, whichever class is faster and with or
  // without shared lanes, and the regime is always the one the exact phase gives.
  std::mt19937 random(4);
  std::uniform_real_distribution<double> lag(0, 1e-4);
  const Topology three_by_four{.nodes = 3, .ranks_per_node = 4};
  const LinkModel host{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9};
  const LinkModel slow{.alpha_s = 20e-6, .bandwidth_bytes_per_s = 1e9, .shared_lanes = 2};
  const LinkModel host_later{.alpha_s = 20e-6, .bandwidth_bytes_per_s = 3e9};
  const LinkModel host_shared{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9, .shared_lanes = 2};
  for (const auto& [intra, inter] :
       {std::pair{host, kTypicalInterNodeLink}, std::pair{slow, host}, std::pair{host, slow},
        std::pair{kTypicalInterNodeLink, slow}, std::pair{host, host_later},
        std::pair{host_shared, host}, std::pair{host, host}, std::pair{host_shared, host_shared}}) {
    for (const StragglarShape& shape :
         {StragglarShape{}, StragglarShape{.pieces = 2}, StragglarShape{.log_depth_blocks = 2}}) {
      PlanCache cache(12, 0, {.topology = three_by_four, .inter_node_link = inter});
      for (int straggler = 0; straggler < 11; ++straggler) {
        SCOPED_TRACE(testing::Message() << "alpha " << intra.alpha_s << "/" << inter.alpha_s
                                        << " blocks " << shape.log_depth_blocks << " pieces "
                                        << shape.pieces << " straggler " << straggler);
        const PricedPlan plan = *cache.WithShape(Algorithm::kStragglar, straggler, shape);
        std::vector<double> arrival(12);
        for (double& at : arrival) at = lag(random);
        arrival[straggler] = straggler % 2 == 0 ? 1.0 : 1e-4 + lag(random);
        const int64_t simulations = cache.renamed_simulations();
        const double bound = *cache.AfterLastArrivalAtLeast(plan, 1 << 22, intra, arrival);
        // The straggler's lead over the others: far shorter and far longer than its phase.
        std::vector<double> short_lead(12, 0.0), long_lead(12, 0.0);
        short_lead[straggler] = 1e-9;
        long_lead[straggler] = 10.0;
        EXPECT_EQ(*cache.RegimeOf(plan, 1 << 22, intra, short_lead),
                  CalibrationRegime::kPhaseExposed);
        EXPECT_EQ(*cache.RegimeOf(plan, 1 << 22, intra, long_lead),
                  CalibrationRegime::kPhaseHidden);
        EXPECT_EQ(cache.renamed_simulations(), simulations);
        const double exact = cache.Simulate(plan, 1 << 22, intra, arrival)->after_last_arrival_s;
        EXPECT_GT(cache.renamed_simulations(), simulations);
        EXPECT_LE(bound, exact);
        EXPECT_GT(bound, 0);
        // One class: the renamed plan costs what the canonical one does, and the bound is tight.
        const bool one_class = intra.alpha_s == inter.alpha_s &&
                               intra.bandwidth_bytes_per_s == inter.bandwidth_bytes_per_s &&
                               intra.shared_lanes == inter.shared_lanes;
        if (one_class && arrival[straggler] == 1.0) {
          EXPECT_NEAR(bound, exact, 1e-9 * exact + 2e-12);
        }
        // Around the exact phase the regime is the exact phase's, bounds or not.
        const double phase_s = *cache.PreArrivalSeconds(plan, 1 << 22, intra);
        for (double lead : {phase_s * 0.5, std::nextafter(phase_s, 0.0), phase_s, phase_s * 1.5}) {
          std::vector<double> leading(12, 0.0);
          leading[straggler] = lead;
          EXPECT_EQ(
              *cache.RegimeOf(plan, 1 << 22, intra, leading),
              lead >= phase_s ? CalibrationRegime::kPhaseHidden : CalibrationRegime::kPhaseExposed)
              << lead / phase_s;
        }
      }
    }
  }
}

// Arrivals within a microsecond of each other, `late` a millisecond after them.
std::vector<double> OneLateAmongNoise(int num_ranks, std::mt19937& random, int late) {
  std::uniform_real_distribution<double> noise(0, 1e-6);
  std::vector<double> arrival(num_ranks);
  for (double& at : arrival) at = noise(random);
  arrival[late] += 1e-3;
  return arrival;
}

TEST(PlanCacheTest, ALatestRankThatWandersBuildsNoPlanPerRank) {
  // Without a persistent straggler the latest rank changes call by call. StragglAR around each is
  // priced through the plan around the last rank, so the cache holds that one plan, not one per
  // rank (at 1024 ranks 84 MB each).
  std::mt19937 random(17);
  const int n = 64;
  PlanCache plans(n);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kStragglar});
  ASSERT_TRUE(
      chooser.Choose(1 << 24, OneLateAmongNoise(n, random, n - 1), n - 1, LinkModel{}).ok());
  const int64_t kept = plans.kept_transfers();
  EXPECT_GE(kept, TransferCount(*SynthesizeStragglar(n, n - 1)));
  int stragglar_chosen = 0;
  for (int latest = 0; latest < n - 1; ++latest) {
    absl::StatusOr<Choice> choice =
        chooser.Choose(1 << 24, OneLateAmongNoise(n, random, latest), latest, LinkModel{});
    ASSERT_TRUE(choice.ok());
    if (choice->algorithm == Algorithm::kStragglar && choice->straggler == latest) {
      ++stragglar_chosen;
    }
  }
  EXPECT_EQ(stragglar_chosen, n - 1);
  EXPECT_EQ(plans.kept_transfers(), kept);
  // The plan an executor asks for is built then, and only it.
  const StragglarShape shape = plans.StragglarShapes(1 << 24, LinkModel{})->front();
  const PricedPlan plan = *plans.WithShape(Algorithm::kStragglar, 5, shape);
  const Plan* whole = *plans.Materialized(plan);
  EXPECT_EQ(plans.kept_transfers(), kept + TransferCount(*whole));

  // On nodes the flat and log-depth plans are built around each straggler but kept as their
  // compact rounds, and hierarchical StragglAR is renamed: no transfers are kept per rank either.
  const Topology four_by_eight{.nodes = 4, .ranks_per_node = 8};
  PlanCache on_nodes(32, 0, {.topology = four_by_eight});
  Chooser node_chooser(on_nodes, {Algorithm::kRing, Algorithm::kStragglar});
  ASSERT_TRUE(
      node_chooser.Choose(1 << 24, OneLateAmongNoise(32, random, 31), 31, LinkModel{}).ok());
  const int64_t kept_on_nodes = on_nodes.kept_transfers();
  EXPECT_EQ(on_nodes.StragglarShapes(1 << 24, LinkModel{})->size(), 3u);
  for (int latest = 0; latest < 31; ++latest) {
    ASSERT_TRUE(
        node_chooser.Choose(1 << 24, OneLateAmongNoise(32, random, latest), latest, LinkModel{})
            .ok());
  }
  EXPECT_EQ(on_nodes.kept_transfers(), kept_on_nodes);
}

}  // namespace
}  // namespace stragglar
