// QueueOrderPlacer (kernels/synth/queue_order.h): groups placed in the order they can start on
// per-class queues, where RoundPacker alone would number them by dependency depth, and never
// against the list's meaning.
#include "kernels/synth/queue_order.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/synth/round_packer.h"

namespace stragglar {
namespace {

// Every rank a node of its own, one second per chunk (bytes = chunks), no latency.
constexpr QueueTiming kOneSecondAChunk{
    .bytes = 10, .ranks_per_node = 1, .inter_node = {.alpha_s = 0, .seconds_per_byte = 1}};

Transfer Copy(int src, int dst, int first_chunk, int end_chunk) {
  return {src, dst, TransferOp::kCopy, ChunkRange(first_chunk, end_chunk)};
}

// The round of the first transfer `src -> dst` in `rounds` (-1: none).
int RoundOf(const std::vector<Round>& rounds, int src, int dst) {
  for (size_t r = 0; r < rounds.size(); ++r) {
    for (const Transfer& transfer : rounds[r].transfers) {
      if (transfer.src == src && transfer.dst == dst) return static_cast<int>(r);
    }
  }
  return -1;
}

TEST(QueueOrderPlacerTest, ACopyReadyEarlyIsNotQueuedBehindOneReadyLate) {
  // Rank 2 receives chunks 0-7 relayed through rank 1 (ready at 8 s) and chunk 8 relayed through
  // rank 4 (ready at 1 s). By dependency depth the relay from 1 is round 1 and the one from 4 round
  // 2 (rank 2 receives one transfer a round), so a queue served in round order holds the early
  // copy until 16 s. By time, the early copy goes first.
  const std::vector<std::vector<Transfer>> list = {
      {Copy(0, 1, 0, 8)}, {Copy(1, 2, 0, 8)}, {Copy(3, 4, 8, 9)}, {Copy(4, 2, 8, 9)}};
  RoundPacker by_depth(5, 10);
  for (const std::vector<Transfer>& group : list) by_depth.Place(group);
  const std::vector<Round> depth_rounds = by_depth.TakeRounds();
  EXPECT_LT(RoundOf(depth_rounds, 1, 2), RoundOf(depth_rounds, 4, 2));

  QueueOrderPlacer by_time(5, 10);
  for (const std::vector<Transfer>& group : list) by_time.Place(group);
  RoundPacker packer(5, 10);
  by_time.PlaceInto(packer, 0, kOneSecondAChunk);
  const std::vector<Round> time_rounds = packer.TakeRounds();
  EXPECT_LT(RoundOf(time_rounds, 4, 2), RoundOf(time_rounds, 1, 2));
  // The relays still follow what they relay.
  EXPECT_LT(RoundOf(time_rounds, 0, 1), RoundOf(time_rounds, 1, 2));
  EXPECT_LT(RoundOf(time_rounds, 3, 4), RoundOf(time_rounds, 4, 2));
}

TEST(QueueOrderPlacerTest, AWriteWaitsForTheEarlierReadOfItsChunk) {
  // Rank 0 sends chunk 0 to rank 1 once its queue is free (at 8 s), and the list then overwrites
  // rank 0's chunk 0 from rank 2, which could start at once. Rank 1 must get rank 0's own value:
  // the write is placed no earlier than the read's round, late as the read is (a round's reads see
  // the values from before it).
  QueueOrderPlacer list(3, 10);
  list.Place({Copy(0, 1, 1, 9)});
  list.Place({Copy(0, 1, 0, 1)});
  list.Place({Copy(2, 0, 0, 1)});
  RoundPacker packer(3, 10);
  list.PlaceInto(packer, 3, kOneSecondAChunk);
  const std::vector<Round> rounds = packer.TakeRounds();
  const int read = RoundOf(rounds, 0, 1);
  ASSERT_GE(read, 3);  // not before round 3, as asked
  int read_of_chunk_0 = -1;
  for (int r = 0; r < static_cast<int>(rounds.size()); ++r) {
    for (const Transfer& transfer : rounds[r].transfers) {
      if (transfer.src == 0 && transfer.chunks.front() == 0) read_of_chunk_0 = r;
    }
  }
  EXPECT_LE(read_of_chunk_0, RoundOf(rounds, 2, 0));
}

TEST(QueueOrderPlacerTest, ABadTimingIsOneClearError) {
  EXPECT_TRUE(ValidateQueueTiming(kOneSecondAChunk).ok());
  QueueTiming timing = kOneSecondAChunk;
  timing.bytes = 0;
  EXPECT_EQ(ValidateQueueTiming(timing).code(), absl::StatusCode::kInvalidArgument);
  timing = kOneSecondAChunk;
  timing.ranks_per_node = 0;
  EXPECT_FALSE(ValidateQueueTiming(timing).ok());
  timing = kOneSecondAChunk;
  timing.intra_node.seconds_per_byte = -1;
  EXPECT_FALSE(ValidateQueueTiming(timing).ok());
}

}  // namespace
}  // namespace stragglar
