// RankRelabel: StragglAR's plans around every straggler are the plan around the last rank renamed,
// exactly as the synthesizers build them, and values per rank move with the names; on nodes the
// renaming keeps every pair of ranks on one node or apart.
#include "kernels/plan/rank_relabel.h"

#include <numeric>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

TEST(RankRelabelTest, RenamesThePlanAroundTheLastRankIntoTheSynthesizedOne) {
  for (int n = 2; n <= 20; ++n) {
    const Plan flat = *SynthesizeStragglar(n, n - 1, 1);
    const Plan pipelined = *SynthesizeStragglar(n, n - 1, 2);
    for (int straggler = 0; straggler < n; ++straggler) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " straggler=" << straggler);
      const RankRelabel swap = RankRelabel::For(PlanVariant::kFlat, n, straggler);
      EXPECT_EQ(swap.Apply(flat), *SynthesizeStragglar(n, straggler, 1));
      EXPECT_EQ(swap.Apply(pipelined), *SynthesizeStragglar(n, straggler, 2));
      for (int blocks : {1, 2, 4}) {
        const RankRelabel rotate = RankRelabel::For(PlanVariant::kLogDepth, n, straggler);
        EXPECT_EQ(rotate.Apply(*SynthesizeLogDepthStragglar(n, n - 1, blocks)),
                  *SynthesizeLogDepthStragglar(n, straggler, blocks))
            << "blocks=" << blocks;
      }
    }
  }
}

TEST(RankRelabelTest, NamesAreAPermutationAndValuesPerRankMoveWithThem) {
  for (PlanVariant variant : {PlanVariant::kFlat, PlanVariant::kLogDepth}) {
    for (int n = 2; n <= 12; ++n) {
      for (int straggler = 0; straggler < n; ++straggler) {
        SCOPED_TRACE(testing::Message()
                     << PlanVariantName(variant) << " n=" << n << " straggler=" << straggler);
        const RankRelabel relabel = RankRelabel::For(variant, n, straggler);
        EXPECT_EQ(relabel.Renamed(n - 1), straggler);
        EXPECT_EQ(relabel.Canonical(straggler), n - 1);
        std::vector<bool> named(n, false);
        for (int canonical = 0; canonical < n; ++canonical) {
          const int rank = relabel.Renamed(canonical);
          ASSERT_GE(rank, 0);
          ASSERT_LT(rank, n);
          EXPECT_FALSE(named[rank]) << "rank " << rank << " named twice";
          named[rank] = true;
          EXPECT_EQ(relabel.Canonical(rank), canonical);
        }
        std::vector<double> by_rank(n);
        std::iota(by_rank.begin(), by_rank.end(), 100.0);
        const std::vector<double> by_canonical = relabel.ToCanonical(by_rank);
        for (int rank = 0; rank < n; ++rank) {
          EXPECT_EQ(by_canonical[relabel.Canonical(rank)], by_rank[rank]);
        }
        EXPECT_EQ(relabel.FromCanonical(by_canonical), by_rank);
      }
    }
  }
  // On nodes: a permutation that keeps every pair of ranks on one node or apart.
  for (const auto& [nodes, per_node] :
       {std::pair{2, 4}, std::pair{3, 4}, std::pair{4, 1}, std::pair{5, 3}}) {
    const int n = nodes * per_node;
    for (int straggler = 0; straggler < n; ++straggler) {
      SCOPED_TRACE(testing::Message() << nodes << "x" << per_node << " straggler " << straggler);
      const RankRelabel relabel = RankRelabel::KeepingNodes(nodes, per_node, straggler);
      EXPECT_EQ(relabel.Renamed(n - 1), straggler);
      std::vector<bool> named(n, false);
      for (int a = 0; a < n; ++a) {
        const int renamed = relabel.Renamed(a);
        ASSERT_GE(renamed, 0);
        ASSERT_LT(renamed, n);
        EXPECT_FALSE(named[renamed]);
        named[renamed] = true;
        EXPECT_EQ(relabel.Canonical(renamed), a);
        for (int b = 0; b < n; ++b) {
          EXPECT_EQ(a / per_node == b / per_node,
                    renamed / per_node == relabel.Renamed(b) / per_node)
              << a << " and " << b;
        }
      }
    }
  }
  // Another length than the rank count is left as it is, for the simulator to refuse.
  const RankRelabel relabel = RankRelabel::For(PlanVariant::kFlat, 4, 1);
  EXPECT_EQ(relabel.ToCanonical(std::vector<double>{1, 2, 3}), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(relabel.FromCanonical(std::vector<double>{1, 2}), (std::vector<double>{1, 2}));
}

}  // namespace
}  // namespace stragglar
