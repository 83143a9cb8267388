#include "kernels/program/device_program.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/program/device_program_check.h"
#include "kernels/synth/synthesizers.h"
#include "tests/in_place_programs.h"

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
    ASSERT_EQ(step.num_extents, 1);
    EXPECT_FALSE(rank1.extents[step.first_extent].through_scratch);
  }
  EXPECT_THAT(rank1.drain, ElementsAre(DeviceReadWait{.reader = 2, .reads = 6}));
  // The AllGather overwrites chunks that rank 2 read earlier: each such receive waits for it.
  const DeviceExtent& last = rank1.extents[rank1.steps[5].first_extent];
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
      for (int32_t p = step.first_extent; p < step.first_extent + step.num_extents; ++p) {
        const DeviceExtent& extent = program.extents[p];
        if (!extent.through_scratch) continue;
        ++exchanges;
        EXPECT_EQ(step.send_peer, step.receive_peer);
        bool waits_for_the_peer = false;
        for (int32_t w = extent.first_wait; w < extent.first_wait + extent.num_waits; ++w) {
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
        for (int32_t p = step.first_extent; p < step.first_extent + step.num_extents; ++p) {
          if (!program.extents[p].own_from_input) continue;
          (step.receive_op == TransferOp::kReduce ? first_reduces : first_copies) +=
              program.extents[p].num_chunks;
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
        // A extent lands in the result only when nothing lends its chunks later, which the
        // chunk's end says.
        for (const DeviceExtent& extent : program.extents) {
          for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c) {
            if (extent.to_result) {
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

// The device kernel's window is its working buffer: it runs programs lowered in place with their
// pre-arrival rounds (what the communicator lowers for work that runs in place), and refuses the
// others with one clear error.
TEST(DeviceProgramTest, OnlyProgramsLoweredInPlaceWithTheirRoundsAreLowered) {
  const Plan plan = *SynthesizeStragglar(4, 3);
  EXPECT_TRUE(LowerForDevice(*LowerPlan(plan, 0, {.in_place = true})).ok());
  const absl::Status out_of_place =
      LowerForDevice(*LowerPlan(plan, 0, {.in_place = false})).status();
  EXPECT_EQ(out_of_place.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_place.message(), HasSubstr("rank 0: the device executor runs programs"));
  EXPECT_THAT(out_of_place.message(), HasSubstr("out of place"));
  const RankProgram native = *LowerPlan(plan, 0, {.in_place = true, .native_pre_arrival = true});
  ASSERT_TRUE(native.placement.native_pre_arrival);
  EXPECT_THAT(LowerForDevice(native).status().message(), HasSubstr("left to NCCL"));
}

// Every rank's program of `plan` in place, and the device programs lowered from them.
struct Lowered {
  std::vector<RankProgram> programs;
  std::vector<DeviceProgram> device;
  absl::Status Check() const { return CheckDevicePrograms(programs, device); }
};
Lowered LowerEveryRank(const Plan& plan) {
  Lowered lowered;
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    lowered.programs.push_back(*LowerPlan(plan, rank, {.in_place = true}));
    lowered.device.push_back(*LowerForDevice(lowered.programs.back()));
  }
  return lowered;
}

std::vector<Plan> EveryFamily() {
  std::vector<Plan> plans;
  for (int n = 2; n <= 9; ++n) {
    plans.push_back(*SynthesizeRing(n));
    plans.push_back(*SynthesizeHalvingDoubling(n));
    for (int straggler : {0, n / 2, n - 1}) {
      plans.push_back(*SynthesizeStragglar(n, straggler));
      plans.push_back(*SynthesizeStragglar(n, straggler, /*pieces=*/2));
      if (n >= 3) plans.push_back(*SynthesizeLogDepthStragglar(n, straggler, /*blocks=*/2));
    }
  }
  plans.push_back(*SynthesizeHierarchicalRing(2, 3));
  plans.push_back(*SynthesizeHierarchicalStragglar(2, 3, 5));
  plans.push_back(*SynthesizeHierarchicalStragglar(3, 2, 1, /*rail_blocks=*/0, /*pieces=*/2));
  return plans;
}

TEST(DeviceProgramCheckTest, EveryFamilysDeviceProgramsPass) {
  for (const Plan& plan : EveryFamily()) {
    const absl::Status status = LowerEveryRank(plan).Check();
    EXPECT_TRUE(status.ok()) << AlgorithmName(plan.algorithm) << " on " << plan.num_ranks
                             << " ranks, straggler " << plan.straggler.value_or(-1) << ": "
                             << status;
  }
}

// Each planted bug in a correct set of device programs is found, with what went wrong. The first
// plan (and rank, and extent) where the bug can be planted is used.
struct Planted {
  const char* name;
  // Plants the bug into `lowered` and returns true, or returns false where it cannot.
  std::function<bool(Lowered&)> plant;
  const char* message;
};

template <typename Predicate, typename Change>
std::function<bool(Lowered&)> OnFirstExtent(Predicate predicate, Change change) {
  return [=](Lowered& lowered) {
    for (DeviceProgram& program : lowered.device) {
      for (DeviceExtent& extent : program.extents) {
        if (predicate(program, extent)) {
          change(program, extent);
          return true;
        }
      }
    }
    return false;
  };
}

// Flips own_from_input on the first extent of a reduce that `predicate` accepts.
template <typename Predicate>
std::function<bool(Lowered&)> OnFirstReduce(Predicate predicate) {
  return [=](Lowered& lowered) {
    for (DeviceProgram& program : lowered.device) {
      for (const DeviceStep& step : program.steps) {
        if (step.receive_peer < 0 || step.receive_op != TransferOp::kReduce) continue;
        for (int32_t e = step.first_extent; e < step.first_extent + step.num_extents; ++e) {
          DeviceExtent& extent = program.extents[e];
          if (predicate(program, extent)) {
            extent.own_from_input = !extent.own_from_input;
            return true;
          }
        }
      }
    }
    return false;
  };
}

TEST(DeviceProgramCheckTest, PlantedBugsAreFound) {
  const std::vector<Planted> bugs = {
      {"a wait dropped",
       OnFirstExtent([](const DeviceProgram&, const DeviceExtent& e) { return e.num_waits > 0; },
                     [](DeviceProgram&, DeviceExtent& e) { e.num_waits = 0; }),
       "of its window without waiting for rank"},
      {"a wait for too few reads",
       OnFirstExtent([](const DeviceProgram&, const DeviceExtent& e) { return e.num_waits > 0; },
                     [](DeviceProgram& p, DeviceExtent& e) { p.waits[e.first_wait].reads -= 1; }),
       "of its window without waiting for rank"},
      {"a write in place that must go through scratch",
       OnFirstExtent([](const DeviceProgram&, const DeviceExtent& e) { return e.through_scratch; },
                     [](DeviceProgram&, DeviceExtent& e) { e.through_scratch = false; }),
       "in place while rank"},
      {"a first reduce that takes its own value from the window",
       OnFirstReduce([](const DeviceProgram& p, const DeviceExtent& e) {
         return e.own_from_input && !(p.chunk_flags[e.first_chunk] & kDeviceCopyIn);
       }),
       "into its window, which holds {garbage}"},
      {"a later reduce that takes its own value from the input",
       OnFirstReduce([](const DeviceProgram&, const DeviceExtent& e) { return !e.own_from_input; }),
       "into its input"},
      {"a write to the result that a later round reads",
       OnFirstExtent([](const DeviceProgram&, const DeviceExtent& e) { return !e.to_result; },
                     [](DeviceProgram&, DeviceExtent& e) { e.to_result = true; }),
       "to the result, but"},
      {"a chunk lent before it is written, not copied in",
       [](Lowered& lowered) {
         for (DeviceProgram& program : lowered.device) {
           for (uint8_t& flags : program.chunk_flags) {
             if (flags & kDeviceCopyIn) {
               flags &= ~kDeviceCopyIn;
               return true;
             }
           }
         }
         return false;
       },
       "'s window, which holds {garbage}"},
      {"a result taken from the input",
       [](Lowered& lowered) {
         lowered.device[0].chunk_flags[0] =
             (lowered.device[0].chunk_flags[0] & kDeviceCopyIn) | kDeviceEndInput;
         return true;
       },
       "rank 0: chunk 0 ends holding {0}"},
      {"a chunk with two places its result comes from",
       [](Lowered& lowered) {
         lowered.device[1].chunk_flags[0] |= kDeviceEndInput | kDeviceEndWindow;
         return true;
       },
       "places its result comes from"},
      {"a drain left out",
       [](Lowered& lowered) {
         lowered.device[0].drain.clear();
         return true;
       },
       "rank 0: returns without waiting for rank"},
      {"a send counted twice",
       [](Lowered& lowered) {
         for (DeviceStep& step : lowered.device[0].steps) {
           if (step.send_peer >= 0) {
             ++step.sends;
             return true;
           }
         }
         return false;
       },
       "sends to rank"},
      {"a step that receives from another peer",
       [](Lowered& lowered) {
         for (DeviceStep& step : lowered.device[0].steps) {
           if (step.receive_peer >= 0) {
             step.receive_peer = (step.receive_peer + 1) % lowered.device[0].num_ranks;
             return true;
           }
         }
         return false;
       },
       "peers or op differ"},
  };
  const std::vector<Plan> plans = EveryFamily();
  for (const Planted& bug : bugs) {
    bool planted = false;
    for (const Plan& plan : plans) {
      Lowered lowered = LowerEveryRank(plan);
      if (!bug.plant(lowered)) continue;
      planted = true;
      const absl::Status status = lowered.Check();
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bug.name;
      EXPECT_THAT(status.message(), HasSubstr(bug.message))
          << bug.name << " in " << AlgorithmName(plan.algorithm) << " on " << plan.num_ranks
          << " ranks";
      break;
    }
    EXPECT_TRUE(planted) << bug.name << ": no plan to plant it in";
  }
}

}  // namespace
}  // namespace stragglar
