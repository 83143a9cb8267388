#include "kernels/program/link_class_queues.h"

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/exec/host/host_executor.h"
#include "kernels/reduce/exact_data.h"
#include "kernels/synth/synthesizers.h"
#include "tests/host_collective.h"
#include "tests/host_plan_run.h"

namespace stragglar {
namespace {

using exact_data::SplitMix64;
using ::testing::HasSubstr;

Transfer Move(int src, int dst, TransferOp op, int chunk) {
  return {.src = src, .dst = dst, .op = op, .chunks = {chunk}};
}

// Four ranks in nodes of two ({0, 1} and {2, 3}), three chunks. Rank 0 first waits for rank 2's
// chunk 0 from the other node; then, inside its node, it exchanges with rank 1 chunks that
// message does not touch.
Plan CrossNodeWaitThenLocalExchange() {
  Plan plan{.num_ranks = 4, .num_chunks = 3};
  plan.rounds.push_back({.transfers = {Move(2, 0, TransferOp::kReduce, 0)}});
  plan.rounds.push_back(
      {.transfers = {Move(1, 0, TransferOp::kReduce, 1), Move(0, 1, TransferOp::kReduce, 2)}});
  return plan;
}

TEST(SplitByLinkClassTest, EachTransferWaitsForExactlyTheChunkAccessesBeforeIt) {
  // Rank 0 of four in nodes of two: round 0 lends chunk 0 to rank 2 (another node) while rank 1
  // reduces into it; round 1 takes chunk 1 from rank 2 and passes chunk 0 on to rank 1; round 2
  // takes chunk 0 back from rank 3.
  Plan plan{.num_ranks = 4, .num_chunks = 2};
  plan.rounds.push_back(
      {.transfers = {Move(0, 2, TransferOp::kCopy, 0), Move(1, 0, TransferOp::kReduce, 0)}});
  plan.rounds.push_back(
      {.transfers = {Move(2, 0, TransferOp::kCopy, 1), Move(0, 1, TransferOp::kCopy, 0)}});
  plan.rounds.push_back({.transfers = {Move(3, 0, TransferOp::kCopy, 0)}});
  absl::StatusOr<RankProgram> program = LowerPlan(plan, 0);
  ASSERT_TRUE(program.ok()) << program.status();
  const LinkClassQueues queues = SplitByLinkClass(*program, 2);
  EXPECT_FALSE(queues.OneClass());
  const auto needs = [&](const QueuedTransfer& transfer) {
    std::vector<std::tuple<int, int, int>> each;
    for (int i = transfer.first_need; i < transfer.first_need + transfer.num_needs; ++i) {
      each.emplace_back(queues.needs[i].chunk, queues.needs[i].writes, queues.needs[i].sends);
    }
    return each;
  };
  using Need = std::tuple<int, int, int>;  // chunk, writes, sends
  // Inside the node: the round-0 receive waits for its own round's send of chunk 0 to be lent;
  // the round-1 send waits for that receive.
  ASSERT_EQ(queues.receives[0].size(), 1u);
  EXPECT_EQ(queues.receives[0][0].step, 0);
  EXPECT_THAT(needs(queues.receives[0][0]), ::testing::ElementsAre(Need{0, 0, 1}));
  ASSERT_EQ(queues.sends[0].size(), 1u);
  EXPECT_EQ(queues.sends[0][0].step, 1);
  EXPECT_THAT(needs(queues.sends[0][0]), ::testing::ElementsAre(Need{0, 1, 0}));
  // Between nodes: the first send and the chunk-1 receive wait for nothing; chunk 0's last
  // receive waits for the write and both sends before it.
  ASSERT_EQ(queues.sends[1].size(), 1u);
  EXPECT_EQ(queues.sends[1][0].step, 0);
  EXPECT_THAT(needs(queues.sends[1][0]), ::testing::IsEmpty());
  ASSERT_EQ(queues.receives[1].size(), 2u);
  EXPECT_EQ(queues.receives[1][0].step, 1);
  EXPECT_THAT(needs(queues.receives[1][0]), ::testing::IsEmpty());
  EXPECT_EQ(queues.receives[1][1].step, 2);
  EXPECT_THAT(needs(queues.receives[1][1]), ::testing::ElementsAre(Need{0, 1, 2}));
  // One node: one class.
  EXPECT_TRUE(SplitByLinkClass(*program, 4).OneClass());
}

// Every family, on layouts of two and three nodes, gives bit for bit the reference result on
// queues per link class: with the transport at memory speed, and with messages between nodes
// delayed as an emulated NIC would (which reorders what the queues do).
TEST(LinkClassQueuesTest, EveryFamilyMatchesTheReferenceOnEveryRank) {
  for (const auto& [nodes, per_node] : {std::pair{2, 2}, std::pair{3, 2}, std::pair{2, 4}}) {
    const int n = nodes * per_node;
    std::vector<Plan> plans;
    const auto add = [&](absl::StatusOr<Plan> plan) {
      ASSERT_TRUE(plan.ok()) << plan.status();
      plans.push_back(*std::move(plan));
    };
    // Flat rails; log-depth rails of 2 blocks, whole and in 2 pieces (the plan written for
    // per-class queues).
    add(SynthesizeHierarchicalStragglar(nodes, per_node, n - 1));
    add(SynthesizeHierarchicalStragglar(nodes, per_node, 1, 2, 1));
    add(SynthesizeHierarchicalStragglar(nodes, per_node, 1, 2, 2));
    // Timed for those queues (kernels/synth/queue_order.h), its straggler's shard relayed.
    add(SynthesizeTimedHierarchicalStragglar(nodes, per_node, n - 1, 2, 1,
                                             {.bytes = 1 << 20,
                                              .ranks_per_node = per_node,
                                              .intra_node = {3e-6, 1e-11},
                                              .inter_node = {10e-6, 2e-11}}));
    add(SynthesizeHierarchicalRing(nodes, per_node));
    add(SynthesizeLogDepthStragglar(n, 0, 4));
    for (Algorithm algorithm : kPlanAlgorithms) {
      add(SynthesizePlan(
          algorithm, n,
          algorithm == Algorithm::kStragglar ? std::optional<int>(n / 2) : std::nullopt));
    }
    for (const Plan& plan : plans) {
      for (bool delayed : {false, true}) {
        Collective collective{.type = DataType::kInt32,
                              .op = ReduceOp::kSum,
                              .count = 1001,
                              .in_place = delayed,
                              .ranks_per_node = per_node};
        if (delayed) {
          collective.emulation = HostTransport::NodeEmulation{
              .ranks_per_node = per_node, .alpha_s = 200e-6, .bytes_per_s = 1e9};
        }
        CheckExact(plan, collective, SplitMix64(n * 17 + plans.size()));
        collective.type = DataType::kBfloat16;
        collective.op = ReduceOp::kAvg;
        CheckExact(plan, collective, SplitMix64(n * 19 + plans.size()));
      }
    }
  }
}

// The point of the queues: rank 0 exchanges with rank 1 inside its node while it still waits for
// rank 2's message from the other node. Rank 2 starts only once rank 1 has finished, which in
// round order would never happen (rank 0 would wait for rank 2 first); the test then gives up
// after 10 s and lets rank 2 go, so a wrong executor fails rather than hangs.
TEST(LinkClassQueuesTest, ATransferInsideTheNodeDoesNotWaitForOneBetweenNodes) {
  const Plan plan = CrossNodeWaitThenLocalExchange();
  const int64_t count = 3;
  std::vector<std::vector<float>> inputs(4), results(4, std::vector<float>(count, -1));
  for (int rank = 0; rank < 4; ++rank) {
    for (int i = 0; i < count; ++i) inputs[rank].push_back(10 * rank + i + 1);
  }
  HostTransport transport(4);
  std::vector<absl::Status> statuses(4);
  const auto run = [&](int rank) {
    statuses[rank] = ExecutePlanOnHost(
        plan, rank, {.send = inputs[rank].data(), .recv = results[rank].data(), .count = count},
        transport, {.ranks_per_node = 2});
  };
  std::thread rank0(run, 0), rank3(run, 3);
  std::future<void> rank1 = std::async(std::launch::async, run, 1);
  EXPECT_EQ(rank1.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "rank 1 waited for rank 0, which waited for rank 2 on the other node";
  std::thread rank2(run, 2);
  rank1.wait();
  for (std::thread* thread : {&rank0, &rank2, &rank3}) thread->join();
  for (int rank = 0; rank < 4; ++rank) ASSERT_TRUE(statuses[rank].ok()) << statuses[rank];
  // Rank 0: chunk 0 reduced with rank 2's, chunk 1 with rank 1's, chunk 2 its own. Rank 1: chunk 2
  // reduced with rank 0's (as it was before round 1), the rest its own.
  EXPECT_THAT(results[0], ::testing::ElementsAre(1 + 21, 2 + 12, 3));
  EXPECT_THAT(results[1], ::testing::ElementsAre(11, 12, 13 + 3));
}

TEST(LinkClassQueuesTest, AFailingRankStopsEveryRankAndEveryQueue) {
  // Rank 3 disagrees on the count: every rank returns an error (nobody hangs on either queue),
  // the ranks that checked its message name the mismatch.
  absl::StatusOr<Plan> plan = SynthesizeHierarchicalStragglar(2, 2, 3, 2, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  HostTransport transport(4);
  std::vector<std::vector<float>> buffers(4, std::vector<float>(64, 1));
  std::vector<absl::Status> statuses(4);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      statuses[rank] =
          ExecutePlanOnHost(*plan, rank,
                            {.send = buffers[rank].data(),
                             .recv = buffers[rank].data(),
                             .count = rank == 3 ? 63 : 64},
                            transport, {.timeout = absl::Seconds(30), .ranks_per_node = 2});
    });
  }
  for (std::thread& thread : threads) thread.join();
  bool named = false;
  for (const absl::Status& status : statuses) {
    EXPECT_FALSE(status.ok());
    named = named || absl::StrContains(status.message(), "mismatched counts across ranks");
  }
  EXPECT_TRUE(named);
}

TEST(LinkClassQueuesTest, NegativeRanksPerNodeIsOneErrorBeforeAnythingIsWritten) {
  const Plan plan = CrossNodeWaitThenLocalExchange();
  std::vector<float> send(3, 1), recv(3, 7);
  HostTransport transport(4);
  const absl::Status status =
      ExecutePlanOnHost(plan, 0, {.send = send.data(), .recv = recv.data(), .count = 3}, transport,
                        {.ranks_per_node = -2});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("ranks per node must be >= 0, got -2"));
  EXPECT_THAT(recv, ::testing::Each(7.0f));
}

}  // namespace
}  // namespace stragglar
