// Log-depth StragglAR: correct plans at every rank count, straggler and block count covered; the
// round counts docs/scale-model.md states (the lower bound, met exactly at powers of two); no
// transfer wasted; and one clear error for each bad argument.
#include <bit>
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/verifier.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

Plan LogDepth(int num_ranks, int straggler, int blocks) {
  absl::StatusOr<Plan> plan = SynthesizeLogDepthStragglar(num_ranks, straggler, blocks);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : Plan{};
}

// The fewest post-arrival rounds of single blocks any plan can take (docs/scale-model.md),
// written out independently of LogDepthRoundLowerBound.
int RoundBound(int num_ranks, int blocks) {
  return blocks - 1 + static_cast<int>(std::ceil(std::log2(num_ranks)));
}

TEST(LogDepthStragglarTest, RoundLowerBoundIsCeilLog2N) {
  for (int n = 2; n <= 2049; ++n) {
    for (int blocks : {1, 7, 64})
      ASSERT_EQ(LogDepthRoundLowerBound(n, blocks), RoundBound(n, blocks));
  }
}

int HalvingDoublingRounds(int num_ranks) {
  return num_ranks < 2 ? 0 : 2 * std::bit_width(static_cast<unsigned>(num_ranks - 1));
}

TEST(LogDepthStragglarTest, VerifiesForEveryRankCountStragglerAndBlockCount) {
  for (int n = 2; n <= 33; ++n) {
    for (int straggler : {0, n / 2, n - 1}) {
      for (int blocks : {1, 2, 8, 32}) {
        const Plan plan = LogDepth(n, straggler, blocks);
        ASSERT_TRUE(VerifyPlan(plan).ok()) << n << " ranks, straggler " << straggler << ", "
                                           << blocks << " blocks: " << VerifyPlan(plan);
        EXPECT_EQ(plan.straggler, straggler);
        EXPECT_EQ(plan.pre_arrival_rounds, HalvingDoublingRounds(n - 1)) << n;
        EXPECT_EQ(plan.num_chunks, std::max<int>(blocks, std::bit_floor(unsigned(n - 1)))) << n;
      }
    }
  }
}

TEST(LogDepthStragglarTest, PowersOfTwoMeetTheRoundBoundExactly) {
  for (int n : {2, 4, 8, 16, 64, 256, 1024}) {
    for (int blocks : {1, 4, 16, 64}) {
      EXPECT_EQ(LogDepth(n, n - 1, blocks).post_arrival_rounds(), RoundBound(n, blocks))
          << n << " ranks, " << blocks << " blocks";
    }
  }
}

TEST(LogDepthStragglarTest, OtherRankCountsStayNearTheBound) {
  // {ranks, blocks, post-arrival rounds}, from an independent model of the same rule.
  struct Expected {
    int num_ranks, blocks, rounds;
  };
  for (const Expected& e :
       {Expected{3, 1, 2}, Expected{3, 4, 5}, Expected{5, 8, 10}, Expected{6, 2, 4},
        Expected{7, 16, 18}, Expected{12, 8, 11}, Expected{65, 8, 16}, Expected{100, 32, 39},
        Expected{257, 64, 76}, Expected{513, 32, 46}}) {
    const Plan plan = LogDepth(e.num_ranks, 0, e.blocks);
    EXPECT_EQ(plan.post_arrival_rounds(), e.rounds) << e.num_ranks << " ranks, " << e.blocks;
    EXPECT_GE(plan.post_arrival_rounds(), RoundBound(e.num_ranks, e.blocks));
  }
}

TEST(LogDepthStragglarTest, EveryRankReceivesEachBlockOnceAfterArrival) {
  // No wasted transfer: after arrival every rank, the straggler included, receives exactly one
  // transfer per block, each a whole block. A reduce adds x_b (from the straggler) or y_b (to it).
  for (const auto& [n, blocks] : {std::pair{7, 4}, std::pair{16, 8}, std::pair{33, 16}}) {
    const int straggler = n / 3;
    const Plan plan = LogDepth(n, straggler, blocks);
    std::vector<std::vector<int>> received(n, std::vector<int>(blocks, 0));
    const int chunks_per_block = plan.num_chunks / blocks;
    for (int r = plan.pre_arrival_rounds; r < plan.num_rounds(); ++r) {
      for (const Transfer& transfer : plan.rounds[r].transfers) {
        ASSERT_EQ(static_cast<int>(transfer.chunks.size()), chunks_per_block);
        ASSERT_EQ(transfer.chunks[0] % chunks_per_block, 0);
        if (transfer.op == TransferOp::kReduce) {
          EXPECT_TRUE(transfer.src == straggler || transfer.dst == straggler);
        }
        ++received[transfer.dst][transfer.chunks[0] / chunks_per_block];
      }
    }
    for (int rank = 0; rank < n; ++rank) {
      EXPECT_THAT(received[rank], ::testing::Each(1)) << n << " ranks, rank " << rank;
    }
  }
}

TEST(LogDepthStragglarTest, LargeRankCountsVerifyInBatches) {
  // 1500 ranks: 1 MiB of state per chunk, so the default budget checks 1024 chunks per pass.
  const Plan plan = LogDepth(1500, 700, 16);
  EXPECT_TRUE(VerifyPlan(plan).ok()) << VerifyPlan(plan);
  EXPECT_EQ(plan.post_arrival_rounds(), 27);  // the bound is 26
}

TEST(LogDepthStragglarTest, RejectsBadArguments) {
  EXPECT_THAT(SynthesizeLogDepthStragglar(1, 0, 1).status().message(),
              HasSubstr("at least 2 ranks"));
  EXPECT_THAT(SynthesizeLogDepthStragglar(8, 8, 1).status().message(),
              HasSubstr("straggler 8 outside [0, 8)"));
  for (int blocks : {0, 3, 2 * kMaxLogDepthBlocks}) {
    EXPECT_THAT(SynthesizeLogDepthStragglar(8, 0, blocks).status().message(),
                HasSubstr("power of two"))
        << blocks;
  }
}

}  // namespace
}  // namespace stragglar
