// The rails of the hierarchical StragglAR the plan cache offers on nodes
// (PlanCache::BestHierarchical): the flat schedule pipelined in the pieces the model prices fastest
// after arrival, and log-depth rails only where they win after arrival by more than
// kLogDepthRailsMinGain, since they move a whole AllReduce before the straggler arrives.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"
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
