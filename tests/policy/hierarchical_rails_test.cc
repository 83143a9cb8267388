// The rails of hierarchical StragglAR (policy/hierarchical_rails.h): the shapes priced, exactly;
// flat rails only up to kMaxFlatRailNodes nodes, above which they lose; and the plan cache's pick
// on nodes (PlanCache::BestHierarchical): the flat schedule pipelined in the pieces the model
// prices fastest after arrival, and log-depth rails only where they win after arrival by more
// than kLogDepthRailsMinGain, and gain more than they lose with the straggler as late as the flat
// rails' pre-arrival phase, since they move a whole AllReduce before the straggler arrives.
#include "policy/hierarchical_rails.h"

#include <algorithm>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"
#include "policy/model/queue_simulator.h"
#include "policy/model/simulator.h"
#include "policy/plan_cache.h"
#include "policy/stragglar_shape.h"

namespace stragglar {
namespace {

// The emulated 4x2 cluster at 100 Mbit/s a host as the MPI preload measured it
// (docs/results/cluster-nodes-rails-2026-11-30.md): per message, 60 us + 2.8 GB/s inside a host,
// 160 us + 7.02 MB/s between hosts.
constexpr LinkModel kInsideHost{.alpha_s = 60e-6, .bandwidth_bytes_per_s = 2.8e9};
constexpr LinkModel kBetweenHosts{.alpha_s = 160e-6, .bandwidth_bytes_per_s = 7.02e6};
constexpr double kTwoMiB = 2 << 20;

double AfterArrival(PlanCache& cache, const StragglarShape& shape, double bytes,
                    const LinkModel& link) {
  const int n = cache.machine().topology.num_ranks();
  absl::StatusOr<PricedPlan> plan = cache.WithShape(Algorithm::kStragglar, n - 1, shape);
  EXPECT_TRUE(plan.ok()) << plan.status();
  std::vector<double> late(n, 0.0);
  late[n - 1] = 10.0;
  return cache.Simulate(*plan, bytes, link, late)->after_last_arrival_s;
}

TEST(HierarchicalRailsTest, OnTheEmulatedClusterTheRailsAreFlatAndPipelined) {
  PlanCache cache(
      8, 0, {.topology = {.nodes = 4, .ranks_per_node = 2}, .inter_node_link = kBetweenHosts});
  absl::StatusOr<std::vector<StragglarShape>> shapes = cache.StragglarShapes(kTwoMiB, kInsideHost);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  const StragglarShape offered = shapes->back();
  EXPECT_TRUE(offered.hierarchical);
  EXPECT_EQ(offered.log_depth_blocks, 0);
  EXPECT_EQ(offered.rail_pieces, 8);
  EXPECT_EQ(offered.pieces, 1);
  // What a forced family runs is the same shape.
  EXPECT_EQ(*cache.ShapeOfFamily(PlanVariant::kHierarchical, kTwoMiB, kInsideHost), offered);
  // Pipelined rails are faster after arrival than flat rails in one piece, ...
  const double offered_s = AfterArrival(cache, offered, kTwoMiB, kInsideHost);
  EXPECT_LT(offered_s, AfterArrival(cache, {.hierarchical = true}, kTwoMiB, kInsideHost));
  // ... and the rule, not the model, turns down the log-depth rails here: the model prices them
  // within kLogDepthRailsMinGain of the flat ones after arrival (on this cluster they took 602 ms
  // with nobody late, against 343 for the flat rails).
  for (int blocks : HierarchicalRailBlockChoices(cache.machine().topology, kTwoMiB,
                                                 cache.machine().inter_node_link)) {
    if (blocks == 0) continue;
    EXPECT_GT(AfterArrival(cache, {.log_depth_blocks = blocks, .hierarchical = true}, kTwoMiB,
                           kInsideHost),
              (1 - kLogDepthRailsMinGain) * offered_s)
        << blocks;
  }
}

TEST(HierarchicalRailsTest, LogDepthRailsLoseWhereAFlatPhaseLateCostsMoreThanTheyGain) {
  // The emulated 8x2 cluster at 50 Mbit/s a host as one forced job's MPI preload measured it
  // (docs/results/cluster-nodes-8x2-aligned-2026-12-01.md), per-class queues as it runs them:
  // 103 us + 0.915 GB/s inside a host, 379 us + 2.92 MB/s between hosts. That job ran log-depth
  // rails, 433 ms after the last arrival with the straggler 353 ms late, where flat rails took
  // 217-225 ms.
  const LinkModel inside{.alpha_s = 103e-6, .bandwidth_bytes_per_s = 0.915e9};
  const LinkModel between{.alpha_s = 379e-6, .bandwidth_bytes_per_s = 2.92e6};
  const double bytes = 1 << 20;
  PlanCache cache(16, 0,
                  {.topology = {.nodes = 8, .ranks_per_node = 2},
                   .inter_node_link = between,
                   .per_class_queues = true});
  absl::StatusOr<std::vector<StragglarShape>> shapes = cache.StragglarShapes(bytes, inside);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  const StragglarShape offered = shapes->back();
  // The flat rails in 8 pieces, timed for the queues at 1 MiB (every one of a shard's 56 chunks
  // a piece).
  EXPECT_EQ(
      offered,
      (StragglarShape{
          .pieces = 56, .hierarchical = true, .rail_pieces = 8, .queue_timed_bytes = 1 << 20}));
  EXPECT_EQ(*cache.ShapeOfFamily(PlanVariant::kHierarchical, bytes, inside), offered);
  // With both pre-arrival phases hidden, the log-depth rails win by more than the margin ...
  const StragglarShape log_depth{.pieces = 16, .log_depth_blocks = 32, .hierarchical = true};
  const double flat_hidden_s = AfterArrival(cache, offered, bytes, inside);
  EXPECT_LT(AfterArrival(cache, log_depth, bytes, inside),
            (1 - kLogDepthRailsMinGain) * flat_hidden_s);
  // ... but a straggler as late as the flat rails' phase does not hide theirs, and they lose more
  // there than they gain.
  absl::StatusOr<PricedPlan> flat_plan = cache.WithShape(Algorithm::kStragglar, 15, offered);
  ASSERT_TRUE(flat_plan.ok()) << flat_plan.status();
  const double phase_s = *cache.PreArrivalSeconds(*flat_plan, bytes, inside);
  const auto at_phase = [&](const StragglarShape& shape) {
    absl::StatusOr<PricedPlan> plan = cache.WithShape(Algorithm::kStragglar, 15, shape);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return cache.Simulate(*plan, bytes, inside, OneLateRank(16, 15, phase_s))->after_last_arrival_s;
  };
  EXPECT_NEAR(at_phase(offered), flat_hidden_s, 0.01 * flat_hidden_s);
  EXPECT_GT(at_phase(log_depth) - at_phase(offered),
            flat_hidden_s - AfterArrival(cache, log_depth, bytes, inside));
}

TEST(HierarchicalRailsTest, LogDepthRailsWhereTheyWinByMoreThanTheMargin) {
  // 64 nodes of 8 at 64 KiB: flat rails' latency chain grows with the nodes, log-depth rails' as
  // its logarithm, and the log-depth rails are far faster after arrival.
  PlanCache cache(512, 0, {.topology = {.nodes = 64, .ranks_per_node = 8}});
  const double bytes = 64 << 10;
  const LinkModel nvlink{};
  absl::StatusOr<std::vector<StragglarShape>> shapes = cache.StragglarShapes(bytes, nvlink);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  const StragglarShape offered = shapes->back();
  ASSERT_TRUE(offered.hierarchical);
  EXPECT_GT(offered.log_depth_blocks, 0);
  EXPECT_EQ(offered.rail_pieces, 1);
  EXPECT_LT(AfterArrival(cache, offered, bytes, nvlink),
            (1 - kLogDepthRailsMinGain) *
                AfterArrival(cache, {.hierarchical = true, .rail_pieces = 2}, bytes, nvlink));
}

// The shapes priced, exactly: flat rails in every piece count a rail holds (on 64 nodes 63 x 2 =
// 126 chunks, 63 x 4 over kMaxPipelinedPieces), log-depth rails in HierarchicalRailBlockChoices'
// blocks; a caller's first refusal ends the flat list and says why; and each shape again with its
// shards in the pieces that divide them.
TEST(HierarchicalRailsTest, TheShapesPricedAreEveryRailThatFits) {
  const auto accept = [](int) { return absl::OkStatus(); };
  const auto rail_pieces = [](const std::vector<StragglarShape>& shapes) {
    std::vector<int> counts;
    for (const StragglarShape& shape : shapes) {
      EXPECT_TRUE(shape.hierarchical);
      EXPECT_EQ(shape.log_depth_blocks, 0);
      counts.push_back(shape.rail_pieces);
    }
    return counts;
  };
  const Topology cluster{.nodes = 4, .ranks_per_node = 2};
  const HierarchicalRailShapes four = RailShapesToPrice(cluster, kTwoMiB, kBetweenHosts, accept);
  EXPECT_THAT(rail_pieces(four.flat), ::testing::ElementsAre(1, 2, 4, 8, 16));
  EXPECT_TRUE(four.flat_refusal.ok());
  std::vector<int> blocks;
  for (const StragglarShape& shape : four.log_depth) {
    EXPECT_TRUE(shape.hierarchical);
    EXPECT_EQ(shape.rail_pieces, 1);
    blocks.push_back(shape.log_depth_blocks);
  }
  std::vector<int> expected_blocks = HierarchicalRailBlockChoices(cluster, kTwoMiB, kBetweenHosts);
  expected_blocks.erase(expected_blocks.begin());  // the flat rails' 0
  EXPECT_EQ(blocks, expected_blocks);
  EXPECT_THAT(rail_pieces(RailShapesToPrice({.nodes = 64, .ranks_per_node = 8}, kTwoMiB,
                                            kBetweenHosts, accept)
                              .flat),
              ::testing::ElementsAre(1, 2));
  const HierarchicalRailShapes one_node =
      RailShapesToPrice({.nodes = 1, .ranks_per_node = 8}, kTwoMiB, kBetweenHosts, accept);
  EXPECT_THAT(rail_pieces(one_node.flat), ::testing::ElementsAre(1));
  EXPECT_TRUE(one_node.log_depth.empty());
  const HierarchicalRailShapes refused =
      RailShapesToPrice(cluster, kTwoMiB, kBetweenHosts, [](int pieces) {
        return pieces == 4 ? absl::ResourceExhaustedError("too large") : absl::OkStatus();
      });
  EXPECT_THAT(rail_pieces(refused.flat), ::testing::ElementsAre(1, 2));
  EXPECT_EQ(refused.flat_refusal, absl::ResourceExhaustedError("too large"));

  // A rail in 8 pieces on 4x2 has 2 x 3 x 8 = 48 chunks, 24 a shard: pieces 2, 4 and 8 divide it.
  std::vector<StragglarShape> queued = {{.hierarchical = true, .rail_pieces = 8}};
  const auto chunks = [&](const StragglarShape& shape) -> absl::StatusOr<int> {
    return cluster.ranks_per_node * (cluster.nodes - 1) * shape.rail_pieces;
  };
  // And once timed for per-class queues, every chunk a piece, at the power of two at or above the
  // size (3 MiB: 4 MiB).
  ASSERT_TRUE(AddQueuePieces(cluster, 3 << 20, chunks, queued).ok());
  std::vector<int> shard_pieces;
  std::vector<int64_t> timed_bytes;
  for (const StragglarShape& shape : queued) {
    EXPECT_EQ(shape.rail_pieces, 8);
    shard_pieces.push_back(shape.pieces);
    timed_bytes.push_back(shape.queue_timed_bytes);
  }
  EXPECT_THAT(shard_pieces, ::testing::ElementsAre(1, 2, 4, 8, 24));
  EXPECT_THAT(timed_bytes, ::testing::ElementsAre(0, 0, 0, 0, 4 << 20));
  EXPECT_EQ(QueueTimedBytes(4 << 20), 4 << 20);
  EXPECT_EQ(QueueTimedBytes(1), 1);
  EXPECT_EQ(AddQueuePieces(
                cluster, 3 << 20,
                [](const StragglarShape&) -> absl::StatusOr<int> {
                  return absl::InternalError("no plan");
                },
                queued),
            absl::InternalError("no plan"));
  EXPECT_EQ(queued.size(), 5u);  // nothing added on the error
  // Beyond kMaxTimedQueueNodes nodes, the pieces only.
  const Topology large{.nodes = kMaxTimedQueueNodes + 1, .ranks_per_node = 8};
  std::vector<StragglarShape> large_rails = {{.hierarchical = true}};
  ASSERT_TRUE(AddQueuePieces(
                  large, 1 << 30, [](const StragglarShape&) -> absl::StatusOr<int> { return 64; },
                  large_rails)
                  .ok());
  for (const StragglarShape& shape : large_rails) EXPECT_EQ(shape.queue_timed_bytes, 0);
  EXPECT_EQ(large_rails.size(), 4u);  // whole, 2, 4 and 8 pieces
}

TEST(HierarchicalRailsTest, FlatRailsArePricedOnlyUpToTheirLimitWhereAboveItTheyLose) {
  const LinkModel nic = kTypicalInterNodeLink;
  EXPECT_THAT(HierarchicalRailBlockChoices({.nodes = 1, .ranks_per_node = 8}, 1 << 26, nic),
              ::testing::ElementsAre(0));
  const std::vector<int> at_limit =
      HierarchicalRailBlockChoices({.nodes = kMaxFlatRailNodes, .ranks_per_node = 8}, 1 << 26, nic);
  ASSERT_GE(at_limit.size(), 2u);
  EXPECT_EQ(at_limit[0], 0);
  EXPECT_THAT(std::vector<int>(at_limit.begin() + 1, at_limit.end()),
              ::testing::Each(::testing::Gt(0)));
  // Just above the limit flat rails are left out, and there they lose after arrival to the best
  // of the log-depth rails left in, round by round and on per-class queues, small and large.
  const Topology above{.nodes = kMaxFlatRailNodes + 1, .ranks_per_node = 8};
  const NetworkModel network{.topology = above, .intra_node = LinkModel{}, .inter_node = nic};
  const int straggler = above.num_ranks() - 1;
  std::vector<double> late(above.num_ranks(), 0.0);
  late[straggler] = 1.0;
  const Plan flat_rails = *SynthesizeHierarchicalStragglar(above.nodes, 8, straggler, 0);
  for (double bytes : {4096.0, 64.0 * (1 << 20), 1024.0 * (1 << 20), 16.0 * (1 << 30)}) {
    const std::vector<int> choices = HierarchicalRailBlockChoices(above, bytes, nic);
    ASSERT_THAT(choices, ::testing::Each(::testing::Gt(0))) << bytes;
    for (bool queues : {false, true}) {
      const auto after_arrival = [&](const Plan& plan) {
        return (queues ? SimulatePlanWithQueues(plan, bytes, network, late)
                       : SimulatePlan(plan, bytes, network, late))
            ->after_last_arrival_s;
      };
      double best_log_depth = kNever;
      for (int blocks : choices) {
        best_log_depth = std::min(best_log_depth, after_arrival(*SynthesizeHierarchicalStragglar(
                                                      above.nodes, 8, straggler, blocks)));
      }
      EXPECT_LT(best_log_depth, after_arrival(flat_rails)) << bytes << " queues " << queues;
    }
  }
}

TEST(HierarchicalRailsTest, ForcedPiecesAreTheForcedFamilysRails) {
  // STRAGGLAR_PIECES with STRAGGLAR_ALGORITHM=stragglar-hierarchical: the rails in those pieces,
  // lowered to a rail's 128 chunks (42 pieces over 4 nodes), whatever the model would pick.
  for (auto [forced, rail_pieces] : {std::pair{4, 4}, std::pair{64, 42}}) {
    PlanCache cache(
        8, forced,
        {.topology = {.nodes = 4, .ranks_per_node = 2}, .inter_node_link = kBetweenHosts});
    absl::StatusOr<StragglarShape> shape =
        cache.ShapeOfFamily(PlanVariant::kHierarchical, kTwoMiB, kInsideHost);
    ASSERT_TRUE(shape.ok()) << shape.status();
    EXPECT_EQ(*shape, (StragglarShape{.hierarchical = true, .rail_pieces = rail_pieces}));
    EXPECT_TRUE(cache.WithShape(Algorithm::kStragglar, 3, *shape).ok());
  }
  // On one machine there are no rails: the family's error, forced pieces or not.
  PlanCache flat(8, 4);
  EXPECT_FALSE(flat.ShapeOfFamily(PlanVariant::kHierarchical, kTwoMiB, kInsideHost).ok());
}

}  // namespace
}  // namespace stragglar
