// Per-rank programs: lowering gives the exact steps, extents and waits a rank needs; the checker
// accepts every synthesized plan's programs in every placement and refuses planted bugs, each
// with a message naming it.
#include "kernels/program/program.h"

#include <optional>
#include <type_traits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/program/program_check.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

// Programs are flat arrays of plain structs: what a device-resident executor copies as it is.
static_assert(std::is_trivially_copyable_v<ProgramStep>);
static_assert(std::is_trivially_copyable_v<ProgramExtent>);

std::vector<RankProgram> LowerAll(const Plan& plan, Placement placement) {
  std::vector<RankProgram> programs;
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    absl::StatusOr<RankProgram> program = LowerPlan(plan, rank, placement);
    EXPECT_TRUE(program.ok()) << program.status();
    programs.push_back(program.value_or(RankProgram{}));
  }
  return programs;
}

ProgramExtent Extent(int32_t chunk, Buffer buffer, bool overlaps = false, int32_t first_wait = 0,
                     int32_t num_waits = 0) {
  return {.first_chunk = chunk,
          .num_chunks = 1,
          .buffer = buffer,
          .starts_run = true,
          .overlaps_send = overlaps,
          .first_wait = first_wait,
          .num_waits = num_waits};
}

// Ring on 3 ranks, rank 0 (plan: round r, 0 sends to 1 and receives from 2; chunks 2,1 reduced
// then 0,2 copied). Out of place a chunk is read from the input until rank 0 first writes it, and
// the last receive overwrites chunk 1, which rank 0 lent out of its result in step 1.
TEST(LowerPlanTest, RingOutOfPlaceReadsTheInputUntilAChunkIsWritten) {
  const RankProgram program = *LowerPlan(*SynthesizeRing(3), 0);
  ASSERT_EQ(program.steps.size(), 4u);
  const std::vector<ProgramExtent> expected = {
      Extent(2, Buffer::kInput),  Extent(1, Buffer::kInput),  // round 0: send c2, reduce c1
      Extent(1, Buffer::kResult), Extent(0, Buffer::kInput),  // round 1: send c1, reduce c0
      Extent(0, Buffer::kResult), Extent(2, Buffer::kInput),  // round 2: send c0, copy c2
      Extent(2, Buffer::kResult), Extent(1, Buffer::kResult, false, 0, 1),  // round 3
  };
  EXPECT_EQ(program.extents, expected);
  EXPECT_EQ(program.waits, std::vector<int32_t>{1});
  for (int i = 0; i < 4; ++i) {
    const ProgramStep& step = program.steps[i];
    EXPECT_EQ(step.round, i);
    EXPECT_EQ(step.send_peer, 1);
    EXPECT_EQ(step.receive_peer, 2);
    EXPECT_EQ(step.receive_op, i < 2 ? TransferOp::kReduce : TransferOp::kCopy);
    EXPECT_EQ(step.first_send, 2 * i);
    EXPECT_EQ(step.first_receive, 2 * i + 1);
  }
  EXPECT_TRUE(program.finish.empty());  // every chunk is written
}

// In place every chunk lives in the result from the start, so every send lends it: copying chunk
// 2 in round 2 waits for the reader of round 0's loan.
TEST(LowerPlanTest, RingInPlaceLendsEverySend) {
  const RankProgram program = *LowerPlan(*SynthesizeRing(3), 0, {.in_place = true});
  for (const ProgramExtent& extent : program.extents) EXPECT_EQ(extent.buffer, Buffer::kResult);
  EXPECT_EQ(program.waits, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(program.extents[5].num_waits, 1);  // round 2's copy of chunk 2: step 0's loan
  EXPECT_EQ(program.waits[program.extents[5].first_wait], 0);
}

// StragglAR's exchange with the straggler sends and receives the same chunk: the receive
// overlaps the send and waits for its own step's loan.
TEST(LowerPlanTest, ExchangeWithTheStragglerOverlapsItsOwnSend) {
  const RankProgram program = *LowerPlan(*SynthesizeStragglar(4, 3), 0);
  const ProgramStep& exchange = program.steps[2];
  ASSERT_EQ(exchange.round, 2);
  ASSERT_EQ(exchange.send_peer, 3);
  const ProgramExtent& received = program.extents[exchange.first_receive];
  EXPECT_EQ(received.first_chunk, 0);
  EXPECT_TRUE(received.overlaps_send);
  EXPECT_EQ(received.buffer, Buffer::kResult);
  ASSERT_EQ(received.num_waits, 1);
  EXPECT_EQ(program.waits[received.first_wait], 2);
}

// Pipelined StragglAR sends runs of chunks; out of place a run whose chunks live in both buffers
// is cut into extents, the run's first extent marking the message.
TEST(LowerPlanTest, ExtentsSplitRunsByBufferAndKeepTheirMessage) {
  const Plan plan = *SynthesizeStragglar(5, 4, 3);
  for (int rank = 0; rank < 5; ++rank) {
    const RankProgram program = *LowerPlan(plan, rank);
    for (const ProgramStep& step : program.steps) {
      for (int32_t i = step.first_send; i < step.first_send + step.num_sends; ++i) {
        const ProgramExtent& extent = program.extents[i];
        if (i == step.first_send) {
          EXPECT_TRUE(extent.starts_run);
        }
        if (i > step.first_send && !extent.starts_run) {
          const ProgramExtent& before = program.extents[i - 1];
          EXPECT_EQ(before.first_chunk + before.num_chunks, extent.first_chunk);
          EXPECT_NE(before.buffer, extent.buffer) << "consecutive extents that agree stay one";
        }
      }
    }
  }
}

TEST(LowerPlanTest, UnsafePlansAreRefused) {
  Plan plan = *SynthesizeRing(3);
  EXPECT_THAT(LowerPlan(plan, 3).status().message(), HasSubstr("rank 3"));
  plan.rounds[1].transfers[0].chunks = ChunkRange(7, 8);
  EXPECT_THAT(LowerPlan(plan, 0).status().message(), HasSubstr("chunk 7 outside [0, 3)"));
  plan = *SynthesizeRing(3);
  plan.rounds[0].transfers.push_back(plan.rounds[0].transfers[0]);
  EXPECT_THAT(LowerPlan(plan, 0).status().message(), HasSubstr("sends more than one transfer"));
}

// Native pre-arrival: the program starts after the plan's ReduceScatter with this rank's block
// in the result; a plan without such a phase keeps its rounds.
TEST(LowerPlanTest, NativePreArrivalStartsAfterTheReduceScatter) {
  const Plan plan = *SynthesizeStragglar(4, 3, 2);
  for (int rank = 0; rank < 4; ++rank) {
    const RankProgram program = *LowerPlan(plan, rank, {.native_pre_arrival = true});
    EXPECT_TRUE(program.placement.native_pre_arrival);
    EXPECT_EQ(program.pre_arrival_blocks, 3);
    EXPECT_GE(program.steps.front().round, plan.pre_arrival_rounds);
    EXPECT_EQ(program.pre_arrival_block == -1, rank == 3);
  }
  const RankProgram ring = *LowerPlan(*SynthesizeRing(4), 0, {.native_pre_arrival = true});
  EXPECT_FALSE(ring.placement.native_pre_arrival);
}

struct CheckCase {
  Algorithm algorithm;
  int ranks;
  int straggler;
  int pieces;
};

std::vector<CheckCase> CheckCases() {
  std::vector<CheckCase> cases;
  for (int n = 2; n <= 12; ++n) {
    cases.push_back({Algorithm::kRing, n, 0, 1});
    cases.push_back({Algorithm::kHalvingDoubling, n, 0, 1});
    for (int straggler : {0, n / 2, n - 1}) {
      for (int pieces : {1, 2, 3}) cases.push_back({Algorithm::kStragglar, n, straggler, pieces});
    }
  }
  for (int n : {16, 24}) {
    cases.push_back({Algorithm::kRing, n, 0, 1});
    cases.push_back({Algorithm::kHalvingDoubling, n, 0, 1});
    cases.push_back({Algorithm::kStragglar, n, n - 1, 2});
  }
  return cases;
}

Plan MakePlan(const CheckCase& c) {
  absl::StatusOr<Plan> plan = c.algorithm == Algorithm::kStragglar
                                  ? SynthesizeStragglar(c.ranks, c.straggler, c.pieces)
                                  : SynthesizePlan(c.algorithm, c.ranks, std::nullopt);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.value_or(Plan{});
}

// Every synthesized plan's programs pass the check in every placement.
TEST(CheckProgramsTest, EverySynthesizedPlanInEveryPlacement) {
  for (const CheckCase& c : CheckCases()) {
    const Plan plan = MakePlan(c);
    for (bool in_place : {false, true}) {
      for (bool native : {false, true}) {
        const Placement placement{.in_place = in_place, .native_pre_arrival = native};
        EXPECT_TRUE(CheckPrograms(plan, LowerAll(plan, placement)).ok())
            << AlgorithmName(c.algorithm) << " n=" << c.ranks << " straggler " << c.straggler
            << " pieces " << c.pieces << " in_place " << in_place << " native " << native << ": "
            << CheckPrograms(plan, LowerAll(plan, placement));
      }
    }
  }
}

// The first receive extent of `program` that satisfies `predicate`, or nullptr.
template <typename Predicate>
ProgramExtent* FindReceive(RankProgram& program, Predicate predicate) {
  for (ProgramStep& step : program.steps) {
    for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
      if (predicate(step, program.extents[i])) return &program.extents[i];
    }
  }
  return nullptr;
}

class PlantedBugTest : public ::testing::Test {
 protected:
  // StragglAR on 4 ranks (its exchanges overlap sends; chunks move between buffers), rank 0's
  // program out of place.
  const Plan plan_ = *SynthesizeStragglar(4, 3);
  std::vector<RankProgram> programs_ = LowerAll(plan_, {});
  RankProgram& zero_ = programs_[0];

  std::string Check() { return std::string(CheckPrograms(plan_, programs_).message()); }
};

TEST_F(PlantedBugTest, CorrectProgramsPass) { EXPECT_EQ(Check(), ""); }

TEST_F(PlantedBugTest, SendFromTheWrongBuffer) {
  // Round 1 sends chunk 1, which rank 0 wrote in round 0: read from the input it is stale.
  ProgramExtent& sent = zero_.extents[zero_.steps[1].first_send];
  ASSERT_EQ(sent.buffer, Buffer::kResult);
  sent.buffer = Buffer::kInput;
  EXPECT_THAT(Check(), HasSubstr("rank 0 round 1 sends chunk 1 from its input, which holds {0}"));
}

TEST_F(PlantedBugTest, SendFromAResultNotYetWritten) {
  ProgramExtent& sent = zero_.extents[zero_.steps[0].first_send];
  sent.buffer = Buffer::kResult;
  EXPECT_THAT(Check(), HasSubstr("sends chunk 2 from its result, which holds {garbage}"));
}

TEST_F(PlantedBugTest, ReduceWithTheWrongOwnValue) {
  ProgramExtent* received = FindReceive(zero_, [](const ProgramStep& step, const ProgramExtent& p) {
    return step.receive_op == TransferOp::kReduce && p.buffer == Buffer::kInput;
  });
  ASSERT_NE(received, nullptr);
  received->buffer = Buffer::kResult;
  EXPECT_THAT(Check(), HasSubstr("reduces into its result, which holds {garbage}"));
}

TEST_F(PlantedBugTest, OverwriteWithoutWaitingForAReader) {
  ProgramExtent* received = FindReceive(
      zero_, [](const ProgramStep&, const ProgramExtent& p) { return p.num_waits > 0; });
  ASSERT_NE(received, nullptr);
  received->num_waits = 0;
  EXPECT_THAT(Check(), HasSubstr("may still read it"));
  EXPECT_THAT(Check(), HasSubstr("without waiting for it"));
}

TEST_F(PlantedBugTest, OverlapWithTheSendUnmarked) {
  ProgramExtent* received = FindReceive(
      zero_, [](const ProgramStep&, const ProgramExtent& p) { return p.overlaps_send; });
  ASSERT_NE(received, nullptr);
  received->overlaps_send = false;
  EXPECT_THAT(Check(), HasSubstr("overlaps_send is 0 but the step sends the chunk"));
}

TEST_F(PlantedBugTest, WrongReceiveOp) {
  zero_.steps[0].receive_op = TransferOp::kCopy;
  EXPECT_THAT(Check(), HasSubstr("rank 0 round 0: the program's receive has the wrong op"));
}

TEST_F(PlantedBugTest, ExchangeUnmarked) {
  // Round 2: rank 0 and the straggler swap chunk 0, the same chunk both ways.
  ASSERT_TRUE(zero_.steps[2].same_chunks_both_ways);
  zero_.steps[2].same_chunks_both_ways = false;
  EXPECT_THAT(Check(), HasSubstr("rank 0 round 2: same_chunks_both_ways is 0, not 1"));
}

TEST_F(PlantedBugTest, MissingStep) {
  zero_.steps.erase(zero_.steps.begin() + 1);
  EXPECT_THAT(Check(), HasSubstr("rank 0 round 1: the program sends 0 chunks with rank -1"));
}

TEST_F(PlantedBugTest, WrongPeer) {
  zero_.steps[0].send_peer = 2;
  EXPECT_THAT(Check(), HasSubstr("with rank 2, the plan 1 with rank 1"));
}

TEST_F(PlantedBugTest, FinishCopyOverAWrittenChunk) {
  // Rank 3 (the straggler) writes every chunk; a finish copy would undo its work.
  programs_[3].finish.push_back(Extent(0, Buffer::kInput));
  EXPECT_THAT(Check(), HasSubstr("rank 3: the finish copies chunk 0 over what the steps wrote"));
}

// Every chunk of a plan of two or more ranks is written (it needs the others' contributions), so
// only a rank alone keeps chunks at its input: the finish copies them, and without it the result
// is garbage.
TEST(CheckProgramsTest, MissingFinishCopy) {
  const Plan alone{.num_ranks = 1, .num_chunks = 2};
  std::vector<RankProgram> programs = LowerAll(alone, {});
  ASSERT_EQ(programs[0].finish.size(), 1u);
  EXPECT_EQ(programs[0].finish[0].num_chunks, 2);
  EXPECT_TRUE(CheckPrograms(alone, programs).ok());
  programs[0].finish.clear();
  EXPECT_THAT(std::string(CheckPrograms(alone, programs).message()),
              HasSubstr("rank 0 ends with chunk 0 holding {garbage}"));
  // In place there is nothing to copy.
  EXPECT_TRUE(LowerAll(alone, {.in_place = true})[0].finish.empty());
}

// NCCL's ReduceScatter may replace StragglAR's pre-arrival rounds only where they are one: the
// flat schedule's ring, whole or in pieces. Log-depth StragglAR's Halving-Doubling among the ready
// ranks ends with an all-gather whose last round looks like a ReduceScatter's (each ready rank
// receives one block), and replacing it gave wrong sums on the executors; so do plans changed to
// copy a block, to add an input twice, or to read a partial sum after arrival.
TEST(ProgramTest, PreArrivalBlocksOnlyWhereTheRoundsAreAReduceScatterNothingElseReads) {
  for (int n = 3; n <= 8; ++n) {
    for (int pieces : {1, 2}) {
      EXPECT_EQ(FindPreArrivalBlocks(*SynthesizeStragglar(n, n / 2, pieces), 0).blocks, n - 1)
          << n << " ranks, " << pieces << " pieces";
    }
    for (int blocks : {1, 2, 4}) {
      EXPECT_EQ(FindPreArrivalBlocks(*SynthesizeLogDepthStragglar(n, n - 1, blocks), 0).blocks, 0)
          << n << " ranks, log-depth in " << blocks << " blocks";
    }
  }
  // A ring ReduceScatter of 4 ready ranks written out, block k from rank k + 1 round the ring to
  // rank k; the same with block 0 starting at its owner, going 0 -> 1 -> 2 -> 0: 4 inputs summed
  // at its owner, but rank 0's twice and rank 3's not at all; and with block 0 starting a round
  // late, which leaves rank 1's input out.
  Plan ring{.algorithm = Algorithm::kStragglar,
            .num_ranks = 5,
            .num_chunks = 4,
            .straggler = 4,
            .pre_arrival_rounds = 3,
            .rounds = std::vector<Round>(3)};
  for (int round = 0; round < 3; ++round) {
    for (int block = 0; block < 4; ++block) {
      ring.rounds[round].transfers.push_back({.src = (block + 1 + round) % 4,
                                              .dst = (block + 2 + round) % 4,
                                              .op = TransferOp::kReduce,
                                              .chunks = {block}});
    }
  }
  EXPECT_EQ(FindPreArrivalBlocks(ring, 0).blocks, 4);
  Plan owner_input_twice = ring;
  owner_input_twice.rounds[0].transfers[0].src = 0;
  owner_input_twice.rounds[0].transfers[0].dst = 1;
  owner_input_twice.rounds[1].transfers[0].src = 1;
  owner_input_twice.rounds[1].transfers[0].dst = 2;
  owner_input_twice.rounds[2].transfers[0].src = 2;
  EXPECT_EQ(FindPreArrivalBlocks(owner_input_twice, 0).blocks, 0);
  Plan input_missing = ring;  // block 0 from rank 2: rank 1's input is not in it
  input_missing.rounds[0].transfers.erase(input_missing.rounds[0].transfers.begin());
  EXPECT_EQ(FindPreArrivalBlocks(input_missing, 0).blocks, 0);

  const Plan flat = *SynthesizeStragglar(5, 4);
  ASSERT_EQ(FindPreArrivalBlocks(flat, 0).blocks, 4);
  std::vector<int> owner(4);
  for (int rank = 0; rank < 4; ++rank) owner[FindPreArrivalBlocks(flat, rank).block] = rank;
  // A rank that adds a block into its own in the first round and does not own it: its chunk is a
  // partial sum from then on.
  const Transfer first = flat.rounds[0].transfers.front();
  ASSERT_NE(owner[first.chunks[0]], first.dst);

  Plan copied = flat;
  copied.rounds[0].transfers.front().op = TransferOp::kCopy;
  EXPECT_EQ(FindPreArrivalBlocks(copied, 0).blocks, 0);

  Plan added_twice = flat;  // the block goes back to where it came from
  added_twice.rounds[1].transfers.push_back(
      {.src = first.dst, .dst = first.src, .op = TransferOp::kReduce, .chunks = first.chunks});
  EXPECT_EQ(FindPreArrivalBlocks(added_twice, 0).blocks, 0);

  // Right after arrival, before the plan's own copies reach it (read at the end, it is the sum).
  const auto after_arrival = [](Plan plan, std::vector<Round> rounds) {
    plan.rounds.insert(plan.rounds.begin() + plan.pre_arrival_rounds, rounds.begin(), rounds.end());
    return plan;
  };
  const Round read_partial{
      .transfers = {{.src = first.dst, .dst = 4, .op = TransferOp::kCopy, .chunks = first.chunks}}};
  EXPECT_EQ(FindPreArrivalBlocks(after_arrival(flat, {read_partial}), 0).blocks, 0);
  const Round add_into_partial{
      .transfers = {
          {.src = 4, .dst = first.dst, .op = TransferOp::kReduce, .chunks = first.chunks}}};
  EXPECT_EQ(FindPreArrivalBlocks(after_arrival(flat, {add_into_partial}), 0).blocks, 0);
  // A copy over the partial sum first: nothing reads it.
  const Round overwrite{.transfers = {{.src = owner[first.chunks[0]],
                                       .dst = first.dst,
                                       .op = TransferOp::kCopy,
                                       .chunks = first.chunks}}};
  const Plan overwritten_first = after_arrival(flat, {overwrite, read_partial});
  EXPECT_EQ(FindPreArrivalBlocks(overwritten_first, 0).blocks, 4);
}

}  // namespace
}  // namespace stragglar
