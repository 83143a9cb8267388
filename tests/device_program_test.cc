#include "kernels/program/device_program.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<DeviceProgram> LowerAll(const Plan& plan) {
  std::vector<DeviceProgram> programs;
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    absl::StatusOr<DeviceProgram> program = LowerPlanForDevice(plan, rank);
    EXPECT_TRUE(program.ok()) << program.status();
    programs.push_back(*std::move(program));
  }
  return programs;
}

TEST(DeviceProgramTest, RingCountsEveryTransferOfAPair) {
  const absl::StatusOr<Plan> plan = SynthesizeRing(4);
  ASSERT_TRUE(plan.ok());
  const std::vector<DeviceProgram> programs = LowerAll(*plan);
  const DeviceProgram& rank1 = programs[1];
  ASSERT_EQ(rank1.steps.size(), 6u);  // 2(n - 1) rounds, each sending and receiving
  for (uint32_t i = 0; i < 6; ++i) {
    const DeviceStep& step = rank1.steps[i];
    EXPECT_EQ(step.send_peer, 2);
    EXPECT_EQ(step.receive_peer, 0);
    EXPECT_EQ(step.sends, i + 1);
    EXPECT_EQ(step.receives, i + 1);
    EXPECT_EQ(step.receive_op, i < 3 ? TransferOp::kReduce : TransferOp::kCopy);
    ASSERT_EQ(step.num_pieces, 1);
    EXPECT_FALSE(rank1.pieces[step.first_piece].through_scratch);
  }
  EXPECT_THAT(rank1.drain, ElementsAre(DeviceReadWait{.reader = 2, .reads = 6}));
  // The AllGather overwrites chunks that rank 2 read earlier: each such receive waits for it.
  const DevicePiece& last = rank1.pieces[rank1.steps[5].first_piece];
  ASSERT_EQ(last.num_waits, 1);
  EXPECT_EQ(rank1.waits[last.first_wait].reader, 2);
}

TEST(DeviceProgramTest, EveryPairAgreesOnItsCountsForEveryFamily) {
  for (int n = 2; n <= 12; ++n) {
    std::vector<Plan> plans;
    for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kHalvingDoubling}) {
      plans.push_back(*SynthesizePlan(algorithm, n, std::nullopt));
    }
    for (int straggler = 0; straggler < n; ++straggler) {
      plans.push_back(*SynthesizeStragglar(n, straggler));
    }
    for (const Plan& plan : plans) {
      const std::vector<DeviceProgram> programs = LowerAll(plan);
      std::map<std::pair<int, int>, uint32_t> sent, received;  // (from, to)
      for (const DeviceProgram& program : programs) {
        for (const DeviceStep& step : program.steps) {
          if (step.send_peer >= 0) {
            const uint32_t sends = ++sent[std::pair(program.rank, step.send_peer)];
            EXPECT_EQ(step.sends, sends);
          }
          if (step.receive_peer >= 0) {
            const uint32_t receives = ++received[std::pair(step.receive_peer, program.rank)];
            EXPECT_EQ(step.receives, receives);
          }
        }
        for (const DeviceReadWait& wait : program.waits) {
          EXPECT_LE(wait.reads, sent[std::pair(program.rank, wait.reader)]);
        }
        for (const DeviceReadWait& wait : program.drain) {
          EXPECT_EQ(wait.reads, sent[std::pair(program.rank, wait.reader)]);
        }
      }
      EXPECT_EQ(sent, received) << AlgorithmName(plan.algorithm) << " n=" << n;
    }
  }
}

TEST(DeviceProgramTest, ExchangesWithTheStragglerGoThroughScratch) {
  // After arrival the straggler swaps a chunk with a ready rank: both pull the other's copy of
  // the same chunk, so neither may overwrite its own before the other has read it.
  const absl::StatusOr<Plan> plan = SynthesizeStragglar(4, 3);
  ASSERT_TRUE(plan.ok());
  const std::vector<DeviceProgram> programs = LowerAll(*plan);
  int exchanges = 0;
  for (const DeviceProgram& program : programs) {
    for (const DeviceStep& step : program.steps) {
      for (int32_t p = step.first_piece; p < step.first_piece + step.num_pieces; ++p) {
        const DevicePiece& piece = program.pieces[p];
        if (!piece.through_scratch) continue;
        ++exchanges;
        EXPECT_EQ(step.send_peer, step.receive_peer);
        bool waits_for_the_peer = false;
        for (int32_t w = piece.first_wait; w < piece.first_wait + piece.num_waits; ++w) {
          waits_for_the_peer = waits_for_the_peer || (program.waits[w].reader == step.send_peer &&
                                                      program.waits[w].reads == step.sends);
        }
        EXPECT_TRUE(waits_for_the_peer) << "rank " << program.rank;
      }
    }
  }
  EXPECT_GT(exchanges, 0);
}

// How many chunks of `program` have `flag`.
int ChunksWith(const DeviceProgram& program, uint8_t flag) {
  return static_cast<int>(std::count_if(program.chunk_flags.begin(), program.chunk_flags.end(),
                                        [&](uint8_t flags) { return (flags & flag) != 0; }));
}

TEST(DeviceProgramTest, RingCopiesOnlyWhatItLendsBeforeWritingAndLandsItsLastChunkInTheResult) {
  for (int n : {2, 3, 4, 8}) {
    const std::vector<DeviceProgram> programs = LowerAll(*SynthesizeRing(n));
    for (const DeviceProgram& program : programs) {
      SCOPED_TRACE(absl::StrCat("n=", n, " rank ", program.rank));
      // Its own chunk, sent in the first round before anything is written into it.
      EXPECT_EQ(ChunksWith(program, kDeviceCopyIn), 1);
      // The AllGather forwards every chunk it receives but the last one, which lands in the
      // result; the others end in the window.
      EXPECT_EQ(ChunksWith(program, kDeviceEndResult), 1);
      EXPECT_EQ(ChunksWith(program, kDeviceEndWindow), n - 1);
      EXPECT_EQ(ChunksWith(program, kDeviceEndInput), 0);
      // Every chunk is written once for the first time: n - 1 reduces of the ReduceScatter, whose
      // own value comes from the input, and the copy of its own chunk in the AllGather.
      int first_reduces = 0, first_copies = 0;
      for (const DeviceStep& step : program.steps) {
        for (int32_t p = step.first_piece; p < step.first_piece + step.num_pieces; ++p) {
          if (!program.pieces[p].own_from_input) continue;
          (step.receive_op == TransferOp::kReduce ? first_reduces : first_copies) +=
              program.pieces[p].num_chunks;
        }
      }
      EXPECT_EQ(first_reduces, n - 1);
      EXPECT_EQ(first_copies, 1);
    }
  }
}

TEST(DeviceProgramTest, EveryChunkEndsOneWay) {
  for (int n = 2; n <= 9; ++n) {
    for (const Plan& plan : {*SynthesizeStragglar(n, n / 2), *SynthesizeHalvingDoubling(n)}) {
      for (const DeviceProgram& program : LowerAll(plan)) {
        for (uint8_t flags : program.chunk_flags) {
          const int ends = ((flags & kDeviceEndInput) != 0) + ((flags & kDeviceEndWindow) != 0) +
                           ((flags & kDeviceEndResult) != 0);
          EXPECT_EQ(ends, 1) << AlgorithmName(plan.algorithm) << " n=" << n;
        }
        // A piece lands in the result only when nothing lends its chunks later, which the
        // chunk's end says.
        for (const DevicePiece& piece : program.pieces) {
          for (int32_t c = piece.first_chunk; c < piece.first_chunk + piece.num_chunks; ++c) {
            if (piece.to_result) {
              EXPECT_TRUE(program.chunk_flags[c] & kDeviceEndResult);
            }
          }
        }
      }
    }
  }
}

TEST(DeviceProgramTest, BadInputIsOneClearError) {
  const absl::StatusOr<Plan> plan = SynthesizeRing(3);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(LowerPlanForDevice(*plan, 3).status().message(), HasSubstr("rank 3"));
  Plan broken = *plan;
  broken.rounds[0].transfers[0].dst = broken.rounds[0].transfers[0].src;
  const absl::Status status =
      LowerPlanForDevice(broken, broken.rounds[0].transfers[0].src).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("round 0"));
}

}  // namespace
}  // namespace stragglar
