// What every executor shares (kernels/exec/): the check of a call's arguments against its program,
// where its chunks lie, and the library's error code carried in a Status to the preload's edge.
#include <cstddef>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/exec/all_reduce_args.h"
#include "kernels/exec/call_buffers.h"
#include "kernels/exec/library_code.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

RankProgram RingProgram(int rank, bool in_place) {
  return *LowerPlan(*SynthesizeRing(3), rank, {.in_place = in_place});
}

TEST(CheckAllReduceArgsTest, EachBadArgumentIsOneErrorNamingTheRank) {
  std::vector<float> send(10), recv(10);
  const RankProgram out_of_place = RingProgram(1, false);
  const AllReduceArgs good{.send = send.data(), .recv = recv.data(), .count = 10};
  EXPECT_TRUE(CheckAllReduceArgs(out_of_place, good).ok());
  EXPECT_TRUE(CheckAllReduceArgs(out_of_place, {.count = 0}).ok()) << "no data, no buffers";
  struct Case {
    AllReduceArgs args;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{.send = send.data(), .recv = recv.data(), .count = -1}, "rank 1: count must be >= 0"},
      {{.send = send.data(), .recv = recv.data(), .count = int64_t{1} << 62},
       "rank 1: count 4611686018427387904 overflows the byte size"},
      {{.send = nullptr, .recv = recv.data(), .count = 10}, "rank 1: send buffer is null"},
      {{.send = send.data(), .recv = nullptr, .count = 10}, "rank 1: recv buffer is null"},
      {{.send = recv.data(), .recv = recv.data(), .count = 10},
       "rank 1: the program was lowered for out-of-place buffers"},
      {{.send = send.data(), .recv = recv.data(), .count = 10, .type = static_cast<DataType>(99)},
       "rank 1: unknown data type 99"},
      {{.send = send.data(), .recv = recv.data(), .count = 10, .op = static_cast<ReduceOp>(42)},
       "rank 1: unknown reduce op 42"},
  };
  for (const Case& each : cases) {
    const absl::Status status = CheckAllReduceArgs(out_of_place, each.args);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << each.says;
    EXPECT_THAT(status.message(), HasSubstr(each.says));
  }
  EXPECT_THAT(CheckAllReduceArgs(RingProgram(2, true), good).message(),
              HasSubstr("rank 2: the program was lowered for in-place buffers"));
}

TEST(CallBuffersTest, ChunksLieWhereTheOffsetsSay) {
  // 10 floats in 3 chunks: 3, 3 and 4 elements (the last takes the remainder, ChunkElements).
  std::vector<float> send(10), recv(10);
  const RankProgram program = RingProgram(0, false);
  ASSERT_EQ(program.num_chunks, 3);
  const AllReduceArgs args{.send = send.data(), .recv = recv.data(), .count = 10};
  const CallBuffers buffers(program, args);
  EXPECT_EQ(buffers.element_size(), 4);
  EXPECT_EQ(buffers.offsets(), (std::vector<int64_t>{0, 12, 24, 40}));
  EXPECT_EQ(buffers.ChunkBytes(0), 12);
  EXPECT_EQ(buffers.ChunkBytes(2), 16);
  EXPECT_EQ(buffers.ChunksBytes(1, 2), 28);
  EXPECT_EQ(buffers.Own(Buffer::kInput, 1), reinterpret_cast<const std::byte*>(send.data() + 3));
  EXPECT_EQ(buffers.Own(Buffer::kResult, 2), reinterpret_cast<const std::byte*>(recv.data() + 6));
  EXPECT_EQ(buffers.ResultChunk(1), reinterpret_cast<std::byte*>(recv.data() + 3));
  int64_t all_extents = 0;
  for (const ProgramExtent& extent : program.extents) {
    all_extents += buffers.ChunksBytes(extent.first_chunk, extent.num_chunks);
  }
  EXPECT_EQ(buffers.ExtentsBytes(0, static_cast<int32_t>(program.extents.size())), all_extents);
}

TEST(LibraryCodeTest, TheLibrarysCodeTravelsWithTheStatus) {
  const absl::Status failed = WithLibraryCode(absl::InternalError("ncclSend failed"), 6);
  EXPECT_EQ(LibraryCode(failed), 6);
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(failed.message(), "ncclSend failed");
  // Copied and returned along, it stays; our own failures and OK carry none.
  const absl::Status passed_on = failed;
  EXPECT_EQ(LibraryCode(passed_on), 6);
  EXPECT_EQ(LibraryCode(absl::InvalidArgumentError("bad")), std::nullopt);
  EXPECT_EQ(LibraryCode(absl::OkStatus()), std::nullopt);
  EXPECT_EQ(LibraryCode(WithLibraryCode(absl::UnknownError("x"), -3)), -3);
}

}  // namespace
}  // namespace stragglar
