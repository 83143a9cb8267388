// The hierarchical ring: correct on every layout, exactly its rounds, a G-th of the buffer per NIC,
// the flat ring where there is one level, and one clear error for a machine too small.
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/verifier.h"
#include "kernels/program/program.h"
#include "kernels/program/program_check.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

struct Layout {
  int nodes;
  int per_node;
};

const Layout kLayouts[] = {{2, 2}, {2, 3}, {3, 2}, {2, 4}, {3, 3}, {4, 2},  {3, 4},
                           {5, 3}, {4, 4}, {2, 8}, {6, 5}, {8, 4}, {16, 8}, {7, 1}};

Plan HierarchicalRing(const Layout& layout) {
  absl::StatusOr<Plan> plan = SynthesizeHierarchicalRing(layout.nodes, layout.per_node);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : Plan{};
}

TEST(HierarchicalRingTest, EveryLayoutVerifiesInExactlyItsRounds) {
  for (const Layout& layout : kLayouts) {
    const Plan plan = HierarchicalRing(layout);
    const int n = layout.nodes * layout.per_node;
    EXPECT_TRUE(VerifyPlan(plan).ok())
        << layout.nodes << "x" << layout.per_node << ": " << VerifyPlan(plan);
    EXPECT_EQ(plan.algorithm, Algorithm::kRing);
    EXPECT_EQ(plan.num_chunks, n);
    EXPECT_FALSE(plan.straggler.has_value());
    EXPECT_EQ(plan.num_rounds(), layout.per_node == 1
                                     ? 2 * (n - 1)
                                     : 2 * (layout.per_node - 1) + 2 * (layout.nodes - 1))
        << layout.nodes << "x" << layout.per_node;
  }
}

TEST(HierarchicalRingTest, OneLevelIsTheFlatRing) {
  for (const Layout& layout : {Layout{1, 2}, Layout{1, 8}, Layout{2, 1}, Layout{7, 1}}) {
    absl::StatusOr<Plan> flat = SynthesizeRing(layout.nodes * layout.per_node);
    ASSERT_TRUE(flat.ok());
    EXPECT_EQ(HierarchicalRing(layout), *flat) << layout.nodes << "x" << layout.per_node;
  }
  EXPECT_EQ(HierarchicalRing({2, 2}).variant, PlanVariant::kHierarchical);
}

TEST(HierarchicalRingTest, EachRankSendsTwoShardsWorthOverItsNic) {
  // Between nodes only GPU g talks to GPU g of the next node, one chunk of shard g at a time:
  // 2(N - 1) chunks of the N·G leave each rank, 2(N - 1)/N of a G-th of the buffer, as in NCCL's
  // rings. Inside a node every rank sends 2(G - 1) shards of N chunks.
  for (const Layout& layout : kLayouts) {
    if (layout.per_node == 1) continue;
    const Plan plan = HierarchicalRing(layout);
    const int n = layout.nodes * layout.per_node;
    std::vector<int> across(n, 0);
    std::vector<int> inside(n, 0);
    for (const Round& round : plan.rounds) {
      for (const Transfer& transfer : round.transfers) {
        const int rail = transfer.src % layout.per_node;
        if (transfer.src / layout.per_node == transfer.dst / layout.per_node) {
          inside[transfer.src] += static_cast<int>(transfer.chunks.size());
          continue;
        }
        ASSERT_EQ(transfer.dst % layout.per_node, rail);
        ASSERT_EQ(transfer.dst / layout.per_node,
                  (transfer.src / layout.per_node + 1) % layout.nodes);
        ASSERT_EQ(transfer.chunks.size(), 1u);
        EXPECT_EQ(transfer.chunks[0] / layout.nodes, rail);
        across[transfer.src] += 1;
      }
    }
    for (int rank = 0; rank < n; ++rank) {
      EXPECT_EQ(across[rank], 2 * (layout.nodes - 1)) << rank;
      EXPECT_EQ(inside[rank], 2 * (layout.per_node - 1) * layout.nodes) << rank;
    }
  }
}

TEST(HierarchicalRingTest, LowersToProgramsThatMatchThePlan) {
  for (const Layout& layout : {Layout{2, 3}, Layout{3, 4}, Layout{4, 2}}) {
    const Plan plan = HierarchicalRing(layout);
    for (bool in_place : {false, true}) {
      std::vector<RankProgram> programs;
      for (int rank = 0; rank < plan.num_ranks; ++rank) {
        absl::StatusOr<RankProgram> program = LowerPlan(plan, rank, {.in_place = in_place});
        ASSERT_TRUE(program.ok()) << program.status();
        programs.push_back(*std::move(program));
      }
      EXPECT_TRUE(CheckPrograms(plan, programs).ok()) << CheckPrograms(plan, programs);
    }
  }
}

TEST(HierarchicalRingTest, TooSmallAMachineIsOneClearError) {
  for (const Layout& layout : {Layout{1, 1}, Layout{0, 4}, Layout{2, 0}, Layout{-1, 2}}) {
    absl::StatusOr<Plan> plan = SynthesizeHierarchicalRing(layout.nodes, layout.per_node);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr("hierarchical ring needs at least 2 ranks"));
  }
}

}  // namespace
}  // namespace stragglar
