// A StragglAR family forced with STRAGGLAR_ALGORITHM (stragglar, stragglar-log-depth,
// stragglar-hierarchical): the knob's families, what forcing leaves to the caller, and the shape
// of each family the plan cache gives it. That the executors then run the family's plan is in
// communicator_test, nccl_executor_test, device_rank_test and the MPI checks.
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/plan_cache.h"
#include "runtime/env_config.h"

namespace stragglar {
namespace {

using Forced = PreloadConfig::Forced;
using ::testing::HasSubstr;

TEST(ForcedFamilyTest, EachStragglarKnobNamesItsFamily) {
  EXPECT_EQ(ForcedPlanVariant(Forced::kStragglar), PlanVariant::kFlat);
  EXPECT_EQ(ForcedPlanVariant(Forced::kStragglarLogDepth), PlanVariant::kLogDepth);
  EXPECT_EQ(ForcedPlanVariant(Forced::kStragglarHierarchical), PlanVariant::kHierarchical);
  for (Forced other : {Forced::kAuto, Forced::kNative, Forced::kRing, Forced::kHalvingDoubling}) {
    EXPECT_EQ(ForcedPlanVariant(other), std::nullopt) << ForcedAlgorithmName(other);
  }
  EXPECT_EQ(ForcedAlgorithmName(Forced::kStragglarLogDepth), "stragglar-log-depth");
  EXPECT_EQ(ForcedAlgorithmName(Forced::kStragglarHierarchical), "stragglar-hierarchical");
}

// Every family is StragglAR around the forced straggler (the last rank when unset); the chooser's
// shape goes, for the caller to set the family's.
TEST(ForcedFamilyTest, ForcingAFamilyIsStragglarWithoutTheChoosersShape) {
  for (Forced family :
       {Forced::kStragglar, Forced::kStragglarLogDepth, Forced::kStragglarHierarchical}) {
    for (std::optional<int> straggler : {std::optional<int>(), std::optional<int>(1)}) {
      CallDecision decision{.call = 7, .algorithm = Algorithm::kRing};
      decision.shape = StragglarShape{.pieces = 4};
      EXPECT_FALSE(ApplyForcedAlgorithm(family, straggler, 4, decision));
      EXPECT_EQ(decision.algorithm, Algorithm::kStragglar);
      EXPECT_EQ(decision.straggler, straggler.value_or(3));
      EXPECT_FALSE(decision.shape.has_value());
      EXPECT_EQ(decision.call, 7);
    }
  }
}

// A forced family runs the shape of that family the chooser prices: on one machine the flat and
// log-depth shapes StragglarShapes offers (log-depth also when forced pieces leave it out), on
// nodes the hierarchical one too; hierarchical on one machine and flat above
// kMaxFlatStragglarRanks are errors that name the reason.
TEST(ForcedFamilyTest, ThePlanCacheGivesThatFamilysShapeAmongThoseTheChooserPrices) {
  const LinkModel link{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9};
  for (const double bytes : {4096.0, double{1 << 24}, double{1 << 30}}) {
    SCOPED_TRACE(bytes);
    PlanCache flat(8);
    const std::vector<StragglarShape> offered = *flat.StragglarShapes(bytes, link);
    ASSERT_EQ(offered.size(), 2u);
    EXPECT_EQ(*flat.ShapeOfFamily(PlanVariant::kFlat, bytes, link), offered[0]);
    EXPECT_EQ(*flat.ShapeOfFamily(PlanVariant::kLogDepth, bytes, link), offered[1]);
    EXPECT_GT(offered[1].log_depth_blocks, 0);
    EXPECT_THAT(flat.ShapeOfFamily(PlanVariant::kHierarchical, bytes, link).status().message(),
                HasSubstr("needs a machine of several nodes"));

    PlanCache pieces(8, /*forced_pieces=*/2);
    EXPECT_EQ(*pieces.ShapeOfFamily(PlanVariant::kFlat, bytes, link), StragglarShape{.pieces = 2});
    EXPECT_EQ(*pieces.ShapeOfFamily(PlanVariant::kLogDepth, bytes, link), offered[1]);

    const Topology two_by_four{.nodes = 2, .ranks_per_node = 4};
    PlanCache nodes(8, 0, {.topology = two_by_four, .inter_node_link = kTypicalInterNodeLink});
    const std::vector<StragglarShape> on_nodes = *nodes.StragglarShapes(bytes, link);
    ASSERT_EQ(on_nodes.size(), 3u);
    for (const StragglarShape& shape : on_nodes) {
      EXPECT_EQ(*nodes.ShapeOfFamily(FamilyOf(shape), bytes, link), shape);
    }
    EXPECT_TRUE(on_nodes[2].hierarchical);
  }
  PlanCache large(PlanCache::kMaxFlatStragglarRanks + 1);
  EXPECT_THAT(large.ShapeOfFamily(PlanVariant::kFlat, 1 << 20, link).status().message(),
              HasSubstr("not built above 1024 ranks"));
  EXPECT_GT(large.ShapeOfFamily(PlanVariant::kLogDepth, 1 << 20, link)->log_depth_blocks, 0);
}

}  // namespace
}  // namespace stragglar
