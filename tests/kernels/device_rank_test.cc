// The device executor's control code (kernels/exec/device/device_rank.h) run on the CPU: every rank
// is `ctas` threads, one per emulated CTA, over windows and signal arrays in shared memory, and
// ranks start late by random amounts. Results must equal the host executor's bit for bit, on
// every rank, for every call of a sequence that reuses the windows. Planted bugs in the
// signalling must be caught.
#include "kernels/exec/device/device_rank.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstring>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/exec/host/host_executor.h"
#include "kernels/reduce/exact_data.h"
#include "kernels/synth/synthesizers.h"
#include "tests/cpu_device.h"
#include "tests/host_plan_run.h"
#include "tests/in_place_programs.h"
#include "tests/sanitizer_sweep.h"

namespace stragglar {
namespace {

using exact_data::Bytes;

struct Scenario {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int64_t count = 0;
  int64_t window_elements = 1 << 20;
  int32_t ctas = 2;
  bool in_place = false;
  int calls = 2;
  absl::Duration max_start_delay = absl::Microseconds(300);
  std::optional<int> late_rank;  // starts every call this much later than the others
  absl::Duration late_by = absl::ZeroDuration();
  std::optional<int> absent_rank;  // never starts
  bool jitter = false;
  absl::Duration give_up_after = absl::Seconds(60);
  uint64_t seed = 1;
};

struct DeviceRun {
  std::vector<std::vector<Bytes>> inputs;   // [call][rank]
  std::vector<std::vector<Bytes>> results;  // [call][rank]
  std::vector<GaveUp> gave_up;              // [rank]
};

// Inputs whose reductions are order-sensitive but never NaN: floats uniform in [-1, 1] (sums
// round differently in another order), integers of random bits (their sums and products wrap).
Bytes RandomInput(DataType type, int64_t count, uint64_t seed) {
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBfloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      return exact_data::MakeRandomFloatInput(type, /*rank=*/0, count, seed);
    default:
      break;
  }
  std::mt19937_64 random(seed);
  Bytes bytes(count * DataTypeSize(type));
  for (std::byte& byte : bytes) byte = static_cast<std::byte>(random());
  return bytes;
}

// One CTA of one rank for every call, with the codec and operator of the setup.
template <DeviceFault kFault>
GaveUp RunBlock(const Scenario& setup, const DeviceProgram& program,
                const std::vector<std::byte*>& windows, const std::vector<uint64_t*>& signals,
                std::byte* scratch, std::barrier<>& kernel_boundary, DeviceRun& run, int32_t cta) {
  const int rank = program.rank;
  std::mt19937_64 random(exact_data::SplitMix64(setup.seed * 1000 + rank * 10 + cta));
  const absl::Time give_up_at = absl::Now() + setup.give_up_after;
  const DeviceProgramView view = ViewOf(program);
  const int64_t slices = DeviceLayoutOf(setup.count, program.num_chunks, setup.window_elements,
                                        DataTypeSize(setup.type))
                             .slices;
  GaveUp gave_up;
  auto run_calls = [&]<typename Codec, typename Op>() {
    CpuCta<Codec, kFault> platform({.give_up_at = give_up_at,
                                    .seed = random(),
                                    .jitter = setup.jitter,
                                    .read_slots = signals[rank] + setup.ctas * program.num_ranks});
    for (int call = 0; call < setup.calls; ++call) {
      const int64_t delay_us = absl::ToInt64Microseconds(setup.max_start_delay);
      absl::Duration delay = absl::Microseconds(delay_us > 0 ? random() % delay_us : 0);
      if (setup.late_rank == rank) delay += setup.late_by;
      absl::SleepFor(delay);
      std::byte* result = run.results[call][rank].data();
      const DeviceCall device_call{
          .windows = windows.data(),
          .signals = signals.data(),
          .scratch = scratch,
          .input = setup.in_place ? result : run.inputs[call][rank].data(),
          .result = result,
          .count = setup.count,
          .window_elements = setup.window_elements,
          .first_sequence = static_cast<uint32_t>(1 + call * slices),
          .num_ranks_divisor = setup.op == ReduceOp::kAvg ? program.num_ranks : 0};
      if (!RunDeviceRank<Codec, Op>(platform, view, device_call, cta, setup.ctas)) {
        gave_up = platform.gave_up();
        kernel_boundary.arrive_and_drop();
        return;
      }
      // The next call's kernel starts once every CTA of this one has ended (stream order).
      kernel_boundary.arrive_and_wait();
    }
  };
  if constexpr (kFault != DeviceFault::kNone) {
    run_calls.template operator()<reduce_element::NativeCodec<float>, reduce_element::SumOp>();
  } else {
    reduce_element::DispatchOnType(setup.type, [&]<typename Codec>(reduce_element::Tag<Codec>) {
      reduce_element::DispatchOnOp(setup.op, [&]<typename Op>(reduce_element::Tag<Op>) {
        run_calls.template operator()<Codec, Op>();
      });
    });
  }
  return gave_up;
}

template <DeviceFault kFault = DeviceFault::kNone>
DeviceRun RunOnDevice(const Plan& plan, const Scenario& setup) {
  const int n = plan.num_ranks;
  const int size = DataTypeSize(setup.type);
  DeviceRun run;
  run.gave_up.resize(n);
  std::vector<DeviceProgram> programs;
  for (int rank = 0; rank < n; ++rank) {
    absl::StatusOr<DeviceProgram> program = LowerPlanForDevice(plan, rank);
    EXPECT_TRUE(program.ok()) << program.status();
    programs.push_back(*std::move(program));
  }
  for (int call = 0; call < setup.calls; ++call) {
    run.inputs.emplace_back();
    run.results.emplace_back();
    for (int rank = 0; rank < n; ++rank) {
      run.inputs[call].push_back(
          RandomInput(setup.type, setup.count, setup.seed * 7919 + call * 131 + rank));
      // In place the result starts as the input; out of place as a pattern no call produces.
      run.results[call].push_back(setup.in_place ? run.inputs[call][rank]
                                                 : Bytes(setup.count * size, std::byte{0xa5}));
    }
  }
  // Windows start as garbage; signal arrays as zeros, as the executor allocates them.
  const int64_t window_bytes = (setup.window_elements * size + 15) / 16 * 16;
  std::vector<std::vector<uint64_t>> window_storage(n, std::vector<uint64_t>(window_bytes / 8));
  std::vector<std::vector<uint64_t>> scratch_storage = window_storage;
  std::vector<std::vector<uint64_t>> signal_storage(
      n, std::vector<uint64_t>(DeviceSignalSlots(setup.ctas, n), 0));
  std::vector<std::byte*> windows;
  std::vector<uint64_t*> signals;
  for (int rank = 0; rank < n; ++rank) {
    std::memset(window_storage[rank].data(), 0x5a, window_bytes);
    windows.push_back(reinterpret_cast<std::byte*>(window_storage[rank].data()));
    signals.push_back(signal_storage[rank].data());
  }
  std::vector<std::thread> threads;
  std::vector<std::vector<GaveUp>> gave_up(n, std::vector<GaveUp>(setup.ctas));
  std::deque<std::barrier<>> kernel_boundaries;
  for (int rank = 0; rank < n; ++rank) kernel_boundaries.emplace_back(setup.ctas);
  for (int rank = 0; rank < n; ++rank) {
    if (setup.absent_rank == rank) continue;
    for (int32_t cta = 0; cta < setup.ctas; ++cta) {
      threads.emplace_back([&, rank, cta] {
        gave_up[rank][cta] =
            RunBlock<kFault>(setup, programs[rank], windows, signals,
                             reinterpret_cast<std::byte*>(scratch_storage[rank].data()),
                             kernel_boundaries[rank], run, cta);
      });
    }
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < n; ++rank) {
    for (const GaveUp& each : gave_up[rank]) {
      if (each.peer >= 0) run.gave_up[rank] = each;
    }
  }
  return run;
}

// The host executor's result of the same call: the reference, bit for bit.
std::vector<Bytes> RunOnHost(const Plan& plan, const Scenario& setup,
                             const std::vector<Bytes>& inputs) {
  const int n = plan.num_ranks;
  std::vector<Bytes> results(n, Bytes(setup.count * DataTypeSize(setup.type)));
  HostTransport transport(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      const AllReduceArgs args{.send = inputs[rank].data(),
                               .recv = results[rank].data(),
                               .count = setup.count,
                               .type = setup.type,
                               .op = setup.op};
      const absl::Status status = ExecutePlanOnHost(plan, rank, args, transport);
      EXPECT_TRUE(status.ok()) << status;
    });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

// How many (call, rank) results differ from the host executor's; every difference is reported
// unless `quiet` (planted bugs).
int CountWrongResults(const Plan& plan, const Scenario& setup, const DeviceRun& run,
                      const std::string& context, bool quiet = false) {
  int wrong = 0;
  for (int call = 0; call < setup.calls; ++call) {
    const std::vector<Bytes> expected = RunOnHost(plan, setup, run.inputs[call]);
    for (int rank = 0; rank < plan.num_ranks; ++rank) {
      if (run.results[call][rank] == expected[rank]) continue;
      ++wrong;
      if (quiet) continue;
      int64_t first = 0;
      while (run.results[call][rank][first] == expected[rank][first]) ++first;
      ADD_FAILURE() << context << ": call " << call << ", rank " << rank << " differs from byte "
                    << first << " of " << expected[rank].size();
    }
  }
  return wrong;
}

Plan MakePlan(Algorithm algorithm, int n, int straggler = 0, int pieces = 1) {
  absl::StatusOr<Plan> plan = algorithm == Algorithm::kStragglar
                                  ? SynthesizeStragglar(n, straggler, pieces)
                                  : SynthesizePlan(algorithm, n, std::nullopt);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

std::string Describe(const Plan& plan, const Scenario& setup) {
  return absl::StrCat(AlgorithmName(plan.algorithm), " n=", plan.num_ranks,
                      " straggler=", plan.straggler.value_or(-1), " chunks=", plan.num_chunks, " ",
                      DataTypeName(setup.type), " ", ReduceOpName(setup.op), " count=", setup.count,
                      " window=", setup.window_elements, " ctas=", setup.ctas,
                      setup.in_place ? " in place" : " out of place");
}

void ExpectMatchesHost(const Plan& plan, const Scenario& setup) {
  const DeviceRun run = RunOnDevice(plan, setup);
  const std::string context = Describe(plan, setup);
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    EXPECT_EQ(run.gave_up[rank].peer, -1) << context << ": rank " << rank << " gave up";
  }
  EXPECT_EQ(CountWrongResults(plan, setup, run, context), 0) << context;
}

// ---------------------------------------------------------------------------------------------

TEST(DeviceRankTest, TheWindowLayoutMovesEveryElementOnceAndCtasKeepTheirPositions) {
  for (int64_t count : {0, 1, 5, 37, 1000, 4099}) {
    for (int32_t chunks : {1, 3, 7, 16}) {
      for (int64_t window : {16, 50, 1024}) {
        for (int32_t ctas : {1, 2, 3, 8}) {
          for (int64_t element_size : {1, 2, 4, 8}) {
            const DeviceWindowLayout layout = DeviceLayoutOf(count, chunks, window, element_size);
            ASSERT_GT(layout.region, 0);
            ASSERT_LE(layout.region * chunks, window);
            const int64_t align = DeviceAlignElements(element_size);
            std::vector<int> moved(count, 0);
            std::vector<int32_t> owner(window, -1);  // the CTA that uses each position
            for (int64_t slice = 0; slice < layout.slices; ++slice) {
              for (int32_t chunk = 0; chunk < chunks; ++chunk) {
                const ElementRange whole = ChunkElements(count, chunks, chunk);
                for (int32_t cta = 0; cta < ctas; ++cta) {
                  const device_rank::Part part =
                      device_rank::PartOf(count, chunks, chunk, layout, slice, cta, ctas, align);
                  if (layout.region >= align) {
                    EXPECT_EQ(part.window % align, 0);
                  }
                  for (int64_t i = 0; i < part.elements; ++i) {
                    ASSERT_GE(part.message + i, whole.begin);
                    ASSERT_LT(part.message + i, whole.end);
                    ++moved[part.message + i];
                    ASSERT_LT(part.window + i, (chunk + 1) * layout.region);
                    int32_t& position = owner[part.window + i];
                    ASSERT_TRUE(position == -1 || position == cta) << "position " << i;
                    position = cta;
                  }
                }
              }
            }
            EXPECT_EQ(std::count(moved.begin(), moved.end(), 1), count)
                << count << " elements, " << chunks << " chunks, window " << window;
          }
        }
      }
    }
  }
}

TEST(DeviceRankTest, EveryFamilyEveryStragglerMatchesTheHostExecutor) {
  for (int n = 2; n <= 16; ++n) {
    std::vector<Plan> plans = {MakePlan(Algorithm::kRing, n),
                               MakePlan(Algorithm::kHalvingDoubling, n)};
    // Every position up to 8 ranks (but under a sanitizer); above, where a plan around any rank
    // is a relabelling of the canonical one (synthesizer_test), the first, middle and last.
    for (int straggler : n <= 8 ? PositionsOf(n) : std::vector<int>{0, n / 2, n - 1}) {
      plans.push_back(MakePlan(Algorithm::kStragglar, n, straggler));
    }
    if (n >= 3) plans.push_back(MakePlan(Algorithm::kStragglar, n, n / 2, /*pieces=*/2));
    for (size_t i = 0; i < plans.size(); ++i) {
      // An odd count, windows of about a third of it (three slices, the last one short), and
      // both placements.
      const int64_t count = 3 * plans[i].num_chunks + 11;
      ExpectMatchesHost(plans[i], {.count = count,
                                   .window_elements = count / 3 + 1,
                                   .in_place = i % 2 == 1,
                                   .seed = static_cast<uint64_t>(n * 100 + i)});
    }
  }
}

// StragglAR's plans for scale, where the device executor applies (every rank on one host, which
// a machine of nodes emulated with STRAGGLAR_TOPOLOGY is): log-depth StragglAR in 1, 2 and 4
// blocks, and hierarchical StragglAR with flat and log-depth rails, the straggler late.
TEST(DeviceRankTest, LogDepthAndHierarchicalPlansMatchTheHostExecutor) {
  std::vector<Plan> plans;
  for (int n : {3, 5, 8}) {
    for (int blocks : {1, 2, 4}) {
      absl::StatusOr<Plan> plan = SynthesizeLogDepthStragglar(n, blocks % n, blocks);
      ASSERT_TRUE(plan.ok()) << plan.status();
      plans.push_back(*std::move(plan));
    }
  }
  for (const auto& [nodes, per_node] : {std::pair{2, 2}, std::pair{2, 4}, std::pair{3, 2}}) {
    for (int rail_blocks : {0, 2}) {
      absl::StatusOr<Plan> plan =
          SynthesizeHierarchicalStragglar(nodes, per_node, nodes * per_node / 2, rail_blocks);
      ASSERT_TRUE(plan.ok()) << plan.status();
      plans.push_back(*std::move(plan));
    }
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& plan = plans[i];
    const int64_t count = 3 * plan.num_chunks + 11;
    ExpectMatchesHost(plan, {.type = i % 2 == 0 ? DataType::kFloat32 : DataType::kBfloat16,
                             .op = i % 3 == 0 ? ReduceOp::kMax : ReduceOp::kSum,
                             .count = count,
                             .window_elements = count / 3 + 1,
                             .in_place = i % 2 == 1,
                             .late_rank = plan.straggler,
                             .late_by = absl::Milliseconds(2),
                             .seed = static_cast<uint64_t>(700 + i)});
  }
}

TEST(DeviceRankTest, EveryTypeAndOperatorMatchesTheHostExecutor) {
  const std::vector<Plan> plans = {MakePlan(Algorithm::kStragglar, 5, 2),
                                   MakePlan(Algorithm::kHalvingDoubling, 6),
                                   MakePlan(Algorithm::kRing, 3)};
  for (const Plan& plan : plans) {
    for (DataType type : kAllDataTypes) {
      // Under a sanitizer, one operator for each plan and type, in turn.
      for (ReduceOp op :
           SweepOf<ReduceOp>(kAllReduceOps, static_cast<size_t>(type) + plan.num_ranks)) {
        for (bool in_place : {false, true}) {
          ExpectMatchesHost(plan, {.type = type,
                                   .op = op,
                                   .count = 97,
                                   .window_elements = 40,
                                   .in_place = in_place,
                                   .max_start_delay = absl::Microseconds(100)});
        }
      }
    }
  }
}

TEST(DeviceRankTest, SmallCountsTinyWindowsAndManyCtas) {
  const Plan plan = MakePlan(Algorithm::kStragglar, 6, 3);
  for (int64_t count : {0, 1, 4, 5, 13}) {
    for (int64_t window : {5, 7, 64}) {
      for (int32_t ctas : {1, 3}) {
        ExpectMatchesHost(plan, {.type = DataType::kFloat16,
                                 .count = count,
                                 .window_elements = window,
                                 .ctas = ctas,
                                 .calls = 3,
                                 .max_start_delay = absl::ZeroDuration()});
      }
    }
  }
  // Many CTAs over a large count: each CTA's share is cut at 16-byte boundaries.
  ExpectMatchesHost(
      plan, {.type = DataType::kBfloat16, .count = 10'007, .window_elements = 4'096, .ctas = 5});
}

TEST(DeviceRankTest, ReadyRanksFinishThePreArrivalRoundsWithoutTheStraggler) {
  // The straggler never comes, and every wait is given up on after 2 s. Each ready rank must
  // have given up only on a post-arrival transfer: every pre-arrival one completed without it.
  // The pre-arrival rounds take milliseconds; 200 ms was once not enough under ThreadSanitizer
  // beside other suites on 2 cores.
  for (int straggler : {0, 3, 5}) {
    const Plan plan = MakePlan(Algorithm::kStragglar, 6, straggler, /*pieces=*/2);
    const DeviceRun run = RunOnDevice(
        plan,
        {.count = 1'000, .calls = 1, .absent_rank = straggler, .give_up_after = absl::Seconds(2)});
    for (int rank = 0; rank < plan.num_ranks; ++rank) {
      if (rank == straggler) continue;
      const GaveUp& gave_up = run.gave_up[rank];
      ASSERT_GE(gave_up.peer, 0) << "rank " << rank << " finished without the straggler";
      // Transfers of that kind between the two ranks before the straggler arrives.
      uint32_t pre_arrival = 0;
      for (int round = 0; round < plan.pre_arrival_rounds; ++round) {
        for (const Transfer& transfer : plan.rounds[round].transfers) {
          const int from = gave_up.read ? rank : gave_up.peer;
          const int to = gave_up.read ? gave_up.peer : rank;
          if (transfer.src == from && transfer.dst == to) ++pre_arrival;
        }
      }
      EXPECT_GT(gave_up.transfers, pre_arrival)
          << "straggler " << straggler << ": rank " << rank << " gave up on pre-arrival transfer "
          << gave_up.transfers << (gave_up.read ? " read by " : " from ") << gave_up.peer;
    }
  }
}

TEST(DeviceRankTest, ARankThatNeverComesIsNamedAndNoResultIsWritten) {
  const Plan plan = MakePlan(Algorithm::kRing, 4);
  const Scenario setup{
      .count = 64, .calls = 1, .absent_rank = 2, .give_up_after = absl::Milliseconds(100)};
  const DeviceRun run = RunOnDevice(plan, setup);
  EXPECT_EQ(run.gave_up[3].peer, 2);  // rank 3 receives from rank 2 first
  EXPECT_FALSE(run.gave_up[3].read);
  for (int rank = 0; rank < 4; ++rank) {
    if (rank == 2) continue;
    EXPECT_GE(run.gave_up[rank].peer, 0) << "rank " << rank;
    // A chunk lands in the result at its last write, which no rank gets to without rank 2.
    EXPECT_EQ(run.results[0][rank], Bytes(64 * 4, std::byte{0xa5})) << "rank " << rank;
  }
}

TEST(DeviceRankTest, AfterAGiveUpALaunchWritesAndSignalsNothing) {
  // A CTA of this rank gave up earlier (the claim is set): the next launch must not touch the
  // window, the signals or the result, and must not wait.
  const Plan plan = MakePlan(Algorithm::kRing, 3);
  const absl::StatusOr<DeviceProgram> program = LowerPlanForDevice(plan, 1);
  ASSERT_TRUE(program.ok());
  std::vector<Bytes> windows(3, Bytes(256, std::byte{0x11}));
  std::vector<std::vector<uint64_t>> signals(3, std::vector<uint64_t>(DeviceSignalSlots(1, 3)));
  std::vector<std::byte*> window_pointers;
  std::vector<uint64_t*> signal_pointers;
  for (int r = 0; r < 3; ++r) {
    window_pointers.push_back(windows[r].data());
    signal_pointers.push_back(signals[r].data());
  }
  Bytes scratch(256), input(64, std::byte{1}), result(64, std::byte{0xa5});
  uint32_t abort = 0, claim = 1;
  DeviceFailure failure;
  const DeviceWatch watch{.abort = &abort, .claim = &claim, .failure = &failure};
  CpuCta<reduce_element::NativeCodec<float>> cta({.watch = &watch});
  const DeviceCall call{.windows = window_pointers.data(),
                        .signals = signal_pointers.data(),
                        .scratch = scratch.data(),
                        .input = input.data(),
                        .result = result.data(),
                        .count = 16,
                        .window_elements = 64};
  EXPECT_FALSE((RunDeviceRank<reduce_element::NativeCodec<float>, reduce_element::SumOp>(
      cta, ViewOf(*program), call, 0, 1)));
  EXPECT_EQ(result, Bytes(64, std::byte{0xa5}));
  EXPECT_EQ(windows[1], Bytes(256, std::byte{0x11}));
  for (const auto& each : signals) EXPECT_THAT(each, testing::Each(0u));
  claim = 0;
  abort = 1;  // an abort stops it alike
  EXPECT_FALSE((RunDeviceRank<reduce_element::NativeCodec<float>, reduce_element::SumOp>(
      cta, ViewOf(*program), call, 0, 1)));
  EXPECT_EQ(result, Bytes(64, std::byte{0xa5}));
}

// ---------------------------------------------------------------------------------------------
// Planted bugs: each must make some run give a wrong result (or hang until given up on).

template <DeviceFault kFault>
bool Caught() {
  const std::vector<Plan> plans = {MakePlan(Algorithm::kStragglar, 5, 1),
                                   MakePlan(Algorithm::kRing, 4),
                                   MakePlan(Algorithm::kHalvingDoubling, 4)};
  for (int attempt = 0; attempt < 5; ++attempt) {
    for (const Plan& plan : plans) {
      const Scenario setup{.count = 4'000,
                           .window_elements = 1'500,
                           .calls = 3,
                           .late_rank = 1,
                           .late_by = absl::Milliseconds(2),
                           .jitter = true,
                           .give_up_after = absl::Seconds(1),
                           .seed = static_cast<uint64_t>(attempt + 1)};
      const DeviceRun run = RunOnDevice<kFault>(plan, setup);
      for (const GaveUp& gave_up : run.gave_up) {
        if (gave_up.peer >= 0) return true;
      }
      if (CountWrongResults(plan, setup, run, "", /*quiet=*/true) > 0) return true;
    }
  }
  return false;
}

class PlantedBugTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kUnderThreadSanitizer) GTEST_SKIP() << "planted bugs are data races by design";
  }
};

TEST_F(PlantedBugTest, TheScenarioPassesWithoutABug) { EXPECT_FALSE(Caught<DeviceFault::kNone>()); }
TEST_F(PlantedBugTest, ASkippedReadyWaitIsCaught) {
  EXPECT_TRUE(Caught<DeviceFault::kSkipReadyWait>());
}
TEST_F(PlantedBugTest, AReadyPostedBeforeItsWritesIsCaught) {
  EXPECT_TRUE(Caught<DeviceFault::kReadyBeforeWrites>());
}
TEST_F(PlantedBugTest, AStaleSequenceNumberIsCaught) {
  EXPECT_TRUE(Caught<DeviceFault::kStaleSequence>());
}
TEST_F(PlantedBugTest, OverwritingLentChunksIsCaught) {
  EXPECT_TRUE(Caught<DeviceFault::kSkipLoanWaits>());
}

}  // namespace
}  // namespace stragglar
