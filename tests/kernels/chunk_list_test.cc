#include "kernels/plan/chunk_list.h"

#include <optional>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/plan.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

TEST(ChunkListTest, ReadsAsTheChunksPushedInOrder) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> chunks;
    ChunkList list;
    const int length = std::uniform_int_distribution<int>(0, 12)(random);
    int32_t next = std::uniform_int_distribution<int32_t>(0, 5)(random);
    for (int i = 0; i < length; ++i) {
      // Mostly consecutive, sometimes a jump forward or back, so runs start and end anywhere.
      if (std::uniform_int_distribution<int>(0, 3)(random) == 0) {
        next = std::uniform_int_distribution<int32_t>(0, 20)(random);
      }
      chunks.push_back(next);
      list.push_back(next++);
    }
    ASSERT_THAT(list, ElementsAreArray(chunks));
    ASSERT_EQ(list.size(), chunks.size());
    ASSERT_EQ(list.empty(), chunks.empty());
    for (size_t i = 0; i < chunks.size(); ++i) ASSERT_EQ(list[i], chunks[i]) << i;
    if (!chunks.empty()) {
      ASSERT_EQ(list.front(), chunks.front());
    }
    // The runs are maximal: none empty, none continuing the one before.
    for (size_t r = 0; r < list.runs().size(); ++r) {
      ASSERT_LT(list.runs()[r].begin, list.runs()[r].end);
      if (r > 0) {
        ASSERT_NE(list.runs()[r - 1].end, list.runs()[r].begin);
      }
    }
  }
}

TEST(ChunkListTest, EqualExactlyWhenTheChunksAre) {
  std::mt19937 random(11);
  const auto random_list = [&random] {
    std::vector<int32_t> chunks(std::uniform_int_distribution<int>(0, 4)(random));
    for (int32_t& chunk : chunks) chunk = std::uniform_int_distribution<int32_t>(0, 4)(random);
    return chunks;
  };
  for (int trial = 0; trial < 5000; ++trial) {
    const std::vector<int32_t> a = random_list(), b = random_list();
    ChunkList list_a, list_b;
    for (int32_t chunk : a) list_a.push_back(chunk);
    for (int32_t chunk : b) list_b.push_back(chunk);
    ASSERT_EQ(list_a == list_b, a == b)
        << ::testing::PrintToString(a) << " vs " << ::testing::PrintToString(b);
  }
  // However a sequence is built, it is the same list.
  const auto pushed_one_by_one = [](std::vector<int32_t> chunks) {
    ChunkList list;
    for (int32_t chunk : chunks) list.push_back(chunk);
    return list;
  };
  EXPECT_EQ((ChunkList{5, 4, 3}), pushed_one_by_one({5, 4, 3}));
  EXPECT_EQ((ChunkList{1, 1, 2}), pushed_one_by_one({1, 1, 2}));
  EXPECT_EQ((ChunkList{2, 3, 3, 4, 7}), pushed_one_by_one({2, 3, 3, 4, 7}));
  EXPECT_EQ((ChunkList{}), pushed_one_by_one({}));
  EXPECT_THAT((ChunkList{2, 3, 3, 4, 7}), ElementsAre(2, 3, 3, 4, 7));
  ChunkList pushed = {3, 4, 5, 9};
  ChunkList appended;
  appended.AppendRange(3, 4);
  appended.AppendRange(4, 6);
  appended.AppendRange(7, 7);  // empty: nothing
  appended.Append(ChunkList{9});
  EXPECT_EQ(pushed, appended);
  EXPECT_THAT(appended.runs(), ElementsAre(ChunkList::Run{3, 6}, ChunkList::Run{9, 10}));
  EXPECT_EQ(ChunkRange(2, 2), ChunkList());
  EXPECT_THAT(ChunkRange(2, 6), ElementsAre(2, 3, 4, 5));
}

// What the form is for: Halving-Doubling's lists at 2048 chunks, log-depth's, the rings' and the
// hierarchical plans' are one or two runs each, and a transfer is no bigger than a list of two
// indices made it (Ring's 33 million transfers at 4096 ranks).
TEST(ChunkListTest, EverySynthesizedListIsAtMostTwoRuns) {
  static_assert(sizeof(Transfer) <= 40, "a transfer grew; Ring at 4096 ranks is 33M of them");
  std::vector<Plan> plans;
  for (int n : {2, 3, 5, 8, 13, 64, 4096}) {
    plans.push_back(*SynthesizeHalvingDoubling(n));
    plans.push_back(*SynthesizeLogDepthStragglar(n, n - 1, 1));
  }
  for (int n : {3, 8, 13}) {
    plans.push_back(*SynthesizeRing(n));
    plans.push_back(*SynthesizeStragglar(n, 0, 3));
  }
  plans.push_back(*SynthesizeHierarchicalRing(4, 4));
  plans.push_back(*SynthesizeHierarchicalStragglar(4, 4, 5, /*rail_blocks=*/0, /*pieces=*/3));
  plans.push_back(*SynthesizeHierarchicalStragglar(8, 4, 9, /*rail_blocks=*/4));
  for (const Plan& plan : plans) {
    int64_t chunks = 0, runs = 0;
    for (const Round& round : plan.rounds) {
      for (const Transfer& transfer : round.transfers) {
        ASSERT_LE(transfer.chunks.runs().size(), 2u)
            << AlgorithmName(plan.algorithm) << " " << plan.num_ranks;
        chunks += transfer.chunks.size();
        runs += transfer.chunks.runs().size();
      }
    }
    if (plan.num_ranks == 4096 && plan.algorithm == Algorithm::kHalvingDoubling) {
      // Each rank sends 2048 + 1024 + ... + 1 chunks while halving and again while doubling, in
      // one run per transfer.
      EXPECT_EQ(chunks, int64_t{2} * 4096 * 4095);
      EXPECT_EQ(runs, int64_t{2} * 12 * 4096);
    }
  }
}

}  // namespace
}  // namespace stragglar
