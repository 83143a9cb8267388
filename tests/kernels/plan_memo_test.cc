#include "kernels/plan/plan_memo.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

// Ring on n ranks: 2(n - 1) rounds of n transfers.
int64_t RingTransfers(int n) { return int64_t{2} * (n - 1) * n; }

// The plan kept for `key`, or an empty plan when there is none.
Plan Kept(PlanMemo& memo, PlanMemo::Key key) {
  std::shared_ptr<const Plan> plan = memo.Find(key);
  return plan == nullptr ? Plan{} : *plan;
}

TEST(PlanMemoTest, KeepsTheNewestPlansThatFitTheBudgetAndNoneLargerThanIt) {
  EXPECT_EQ(TransferCount(*SynthesizeRing(5)), RingTransfers(5));
  // Room for Ring on 4 ranks (24 transfers) and on 5 (40), not for both with 6 (60).
  PlanMemo memo(RingTransfers(4) + RingTransfers(5));
  const Plan four = *SynthesizeRing(4), five = *SynthesizeRing(5), six = *SynthesizeRing(6);
  memo.Keep({4, 1}, four);
  memo.Keep({5, 1}, five);
  EXPECT_EQ(memo.size(), 2u);
  EXPECT_EQ(memo.kept_transfers(), 64);
  EXPECT_EQ(Kept(memo, {4, 1}), four);
  EXPECT_EQ(Kept(memo, {5, 1}), five);
  EXPECT_EQ(memo.Find({4, 2}), nullptr);

  // A plan still held by a caller outlives its eviction.
  const std::shared_ptr<const Plan> held = memo.Find({4, 1});
  ASSERT_NE(held, nullptr);
  memo.Keep({6, 1}, six);  // drops 4, then 5: 60 fits alone
  EXPECT_EQ(memo.Find({4, 1}), nullptr);
  EXPECT_EQ(memo.Find({5, 1}), nullptr);
  EXPECT_EQ(Kept(memo, {6, 1}), six);
  EXPECT_EQ(memo.kept_transfers(), 60);
  EXPECT_EQ(*held, four);

  // A key kept already keeps its first plan, and is not counted twice.
  memo.Keep({6, 1}, four);
  EXPECT_EQ(Kept(memo, {6, 1}), six);
  EXPECT_EQ(memo.kept_transfers(), 60);

  // Over the budget alone: not kept, and nothing else is dropped for it.
  memo.Keep({9, 1}, *SynthesizeRing(9));
  EXPECT_EQ(memo.Find({9, 1}), nullptr);
  EXPECT_EQ(Kept(memo, {6, 1}), six);
  EXPECT_EQ(memo.size(), 1u);
}

TEST(PlanMemoTest, ThreadsKeepingAndFindingAgree) {
  PlanMemo memo(RingTransfers(8) * 3);
  std::vector<Plan> plans;
  for (int n = 2; n <= 8; ++n) plans.push_back(*SynthesizeRing(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int repeat = 0; repeat < 50; ++repeat) {
        for (const Plan& plan : plans) {
          memo.Keep({plan.num_ranks, 1}, plan);
          if (std::shared_ptr<const Plan> found = memo.Find({plan.num_ranks, 1})) {
            EXPECT_EQ(*found, plan);
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(memo.kept_transfers(), RingTransfers(8) * 3);
  int64_t total = 0;
  for (const Plan& plan : plans) {
    if (std::shared_ptr<const Plan> found = memo.Find({plan.num_ranks, 1})) {
      total += TransferCount(*found);
    }
  }
  EXPECT_EQ(total, memo.kept_transfers());
}

}  // namespace
}  // namespace stragglar
