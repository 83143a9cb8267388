// The device executor without a GPU: peer memory is host memory (FakePeerMemory), the handle
// exchange an in-process gather, ranks are threads and every kernel launch runs the real control
// code on CPU threads (tests/cpu_device.h). What is left for a GPU is CUDA itself.
#include "kernels/exec/device/device_executor.h"

#include <algorithm>
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/exec/host/host_executor.h"
#include "kernels/synth/synthesizers.h"
#include "tests/cpu_device.h"
#include "tests/host_plan_run.h"
#include "tests/in_place_programs.h"

namespace stragglar {
namespace {

using Bytes = std::vector<std::byte>;
using ::testing::HasSubstr;
using ::testing::Not;

// Host memory standing in for one rank's CUDA: allocations are counted so that a test can check
// that nothing is left behind, and any operation can be made to fail.
class FakePeerMemory final : public PeerMemory {
 public:
  explicit FakePeerMemory(int device) { uuid_.bytes[0] = static_cast<uint8_t>(device); }
  // The GPU this rank is on, by the first byte of its UUID (its rank, unless moved).
  void MoveTo(int device) { uuid_.bytes[0] = static_cast<uint8_t>(device); }

  // The operation that fails ("allocate", "mapped", "copy", "export", "import", "device",
  // "access"), from its `nth` call on (1-based).
  void FailAt(std::string operation, int nth = 1) {
    fail_operation_ = std::move(operation);
    fail_nth_ = nth;
  }
  // Devices this rank's cannot access, by their first UUID byte.
  std::set<int> inaccessible;

  int live() const { return static_cast<int>(live_.size()) + open_imports_; }

  absl::StatusOr<DeviceUuid> OwnDevice() override {
    if (Fails("device")) return absl::InternalError("cudaGetDeviceProperties: planted");
    return uuid_;
  }
  absl::StatusOr<bool> CanAccess(const DeviceUuid& uuid) override {
    if (Fails("access")) return absl::InternalError("cudaDeviceCanAccessPeer: planted");
    return !inaccessible.contains(uuid.bytes[0]);
  }
  absl::StatusOr<void*> AllocateZeroed(size_t bytes) override {
    if (Fails("allocate")) return absl::ResourceExhaustedError("cudaMalloc: planted");
    return Allocate(bytes);
  }
  void Free(void* device) override { Release(device); }
  void Synchronize() override {}  // the tests synchronise their streams themselves
  absl::Status CopyToDevice(void* device, const void* host, size_t bytes) override {
    if (Fails("copy")) return absl::InternalError("cudaMemcpy: planted");
    std::memcpy(device, host, bytes);
    return absl::OkStatus();
  }
  absl::StatusOr<void*> AllocateMapped(size_t bytes, void** device) override {
    if (Fails("mapped")) return absl::ResourceExhaustedError("cudaHostAlloc: planted");
    *device = Allocate(bytes);
    return *device;
  }
  void FreeMapped(void* host) override { Release(host); }
  absl::StatusOr<PeerHandle> Export(void* device) override {
    if (Fails("export")) return absl::InternalError("cudaIpcGetMemHandle: planted");
    PeerHandle handle;
    std::memcpy(handle.bytes.data(), &device, sizeof(device));
    return handle;
  }
  absl::StatusOr<void*> Import(const PeerHandle& handle) override {
    if (Fails("import")) return absl::InternalError("cudaIpcOpenMemHandle: planted");
    void* device = nullptr;
    std::memcpy(&device, handle.bytes.data(), sizeof(device));
    ++open_imports_;
    return device;
  }
  void CloseImported(void*) override { --open_imports_; }

 private:
  bool Fails(const std::string& operation) {
    return operation == fail_operation_ && ++calls_[operation] >= fail_nth_;
  }
  void* Allocate(size_t bytes) {
    void* memory = std::aligned_alloc(256, std::max<size_t>(256, (bytes + 255) / 256 * 256));
    std::memset(memory, 0, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(memory);
    return memory;
  }
  void Release(void* memory) {
    std::lock_guard<std::mutex> lock(mutex_);
    EXPECT_EQ(live_.erase(memory), 1u) << "freed twice or never allocated";
    std::free(memory);
  }

  DeviceUuid uuid_;
  std::string fail_operation_;
  int fail_nth_ = 1;
  std::map<std::string, int> calls_;
  std::mutex mutex_;
  std::set<void*> live_;
  int open_imports_ = 0;
};

// An all-gather among threads: every rank's bytes, in rank order, on every rank.
class InProcessGather {
 public:
  explicit InProcessGather(int num_ranks) : slots_(num_ranks), barrier_(num_ranks) {}
  GatherBytes For(int rank) {
    return [this, rank](const void* mine, void* all, size_t bytes) {
      slots_[rank].assign(static_cast<const std::byte*>(mine),
                          static_cast<const std::byte*>(mine) + bytes);
      barrier_.arrive_and_wait();
      for (size_t r = 0; r < slots_.size(); ++r) {
        std::memcpy(static_cast<std::byte*>(all) + r * bytes, slots_[r].data(), bytes);
      }
      barrier_.arrive_and_wait();
      return absl::OkStatus();
    };
  }

 private:
  std::vector<Bytes> slots_;
  std::barrier<> barrier_;
};

// Destroyed stream first (it runs what is queued), then the executor, then the memory.
struct Rank {
  explicit Rank(int rank) : memory(rank) {}
  FakePeerMemory memory;
  std::unique_ptr<DeviceExecutor> executor;
  CpuStream stream;
  absl::Status setup;
};

// Sets up every rank's executor at once (as each rank's first eligible call would). `tweak` plants
// a fault in a rank's memory or host before the setup.
std::vector<std::unique_ptr<Rank>> SetUpRanks(
    int n, const PeerWindowsOptions& options, uint64_t timeout_ns = 0,
    const std::function<void(int, FakePeerMemory&, uint64_t&)>& tweak = nullptr,
    const std::vector<uint64_t>& timeouts_by_rank = {}, DeviceLauncher* launcher_used = nullptr) {
  static CpuLauncher cpu_launcher;
  DeviceLauncher& launcher = launcher_used != nullptr ? *launcher_used : cpu_launcher;
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<Rank>(r));
  InProcessGather gather(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Rank& rank = *ranks[r];
      uint64_t host = 42;
      if (tweak) tweak(r, rank.memory, host);
      absl::StatusOr<std::unique_ptr<PeerWindows>> windows =
          PeerWindows::Create(r, n, host, options, rank.memory, gather.For(r));
      rank.setup = windows.status();
      if (windows.ok()) {
        rank.executor = std::make_unique<DeviceExecutor>(
            *std::move(windows), rank.memory, launcher,
            timeouts_by_rank.empty() ? timeout_ns : timeouts_by_rank[r]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return ranks;
}

Bytes RandomFloats(int64_t count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> value(-2, 2);
  Bytes bytes(count * sizeof(float));
  for (int64_t i = 0; i < count; ++i) {
    const float x = value(random);
    std::memcpy(bytes.data() + i * sizeof(float), &x, sizeof(x));
  }
  return bytes;
}

std::vector<Bytes> HostReference(const Plan& plan, const std::vector<Bytes>& inputs, int64_t count,
                                 ReduceOp op) {
  std::vector<Bytes> results(plan.num_ranks, Bytes(count * sizeof(float)));
  HostTransport transport(plan.num_ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < plan.num_ranks; ++r) {
    threads.emplace_back([&, r] {
      EXPECT_TRUE(
          ExecutePlanOnHost(
              plan, r,
              {.send = inputs[r].data(), .recv = results[r].data(), .count = count, .op = op},
              transport)
              .ok());
    });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

TEST(DeviceExecutorTest, CallsOfEveryFamilyMatchTheHostExecutorBitForBit) {
  constexpr int kRanks = 5;
  InPlacePrograms programs;  // outlives the executors
  // A 1 KiB window: the larger calls run in several slices.
  auto ranks = SetUpRanks(kRanks, {.window_bytes = 1024, .ctas = 3}, /*timeout_ns=*/30e9);
  for (const auto& rank : ranks) ASSERT_TRUE(rank->setup.ok()) << rank->setup;
  std::vector<Plan> plans = {*SynthesizeRing(kRanks), *SynthesizeStragglar(kRanks, 2),
                             *SynthesizeHalvingDoubling(kRanks),
                             *SynthesizeStragglar(kRanks, 4, /*pieces=*/2)};
  struct Call {
    const Plan* plan;
    int64_t count;
    ReduceOp op;
    bool in_place;
  };
  std::vector<Call> calls;
  for (const Plan& plan : plans) {
    calls.push_back({&plan, 1001, ReduceOp::kSum, false});
    calls.push_back({&plan, 37, ReduceOp::kAvg, true});
    calls.push_back({&plan, 3, ReduceOp::kMax, false});
  }
  // Every call is enqueued before any is checked: the launches run back to back on each stream.
  std::vector<std::vector<Bytes>> inputs(calls.size()), results(calls.size());
  for (size_t c = 0; c < calls.size(); ++c) {
    for (int r = 0; r < kRanks; ++r) {
      inputs[c].push_back(RandomFloats(calls[c].count, c * 100 + r));
      results[c].push_back(calls[c].in_place ? inputs[c][r]
                                             : Bytes(inputs[c][r].size(), std::byte{0xa5}));
    }
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (size_t c = 0; c < calls.size(); ++c) {
        const AllReduceArgs args{
            .send = calls[c].in_place ? results[c][r].data() : inputs[c][r].data(),
            .recv = results[c][r].data(),
            .count = calls[c].count,
            .op = calls[c].op};
        EXPECT_TRUE(
            ranks[r]->executor->Run(programs.Of(*calls[c].plan, r), args, &ranks[r]->stream).ok());
      }
      ranks[r]->stream.Synchronize();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t c = 0; c < calls.size(); ++c) {
    const std::vector<Bytes> expected =
        HostReference(*calls[c].plan, inputs[c], calls[c].count, calls[c].op);
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(results[c][r] == expected[r])
          << "call " << c << " (" << AlgorithmName(calls[c].plan->algorithm) << ", "
          << calls[c].count << " elements) on rank " << r;
    }
  }
  for (const auto& rank : ranks) EXPECT_EQ(rank->executor->launches(), 12);
}

// Every rank's setup fails with `message`, and leaves nothing allocated or imported.
// The setup-failure tests need windows, not large ones: the default 64 MiB per rank, allocated and
// zeroed 14 times over, made one of them take 11 s (73 s under ThreadSanitizer).
constexpr PeerWindowsOptions kSmallWindows = {.window_bytes = 4096, .ctas = 2};

void ExpectFallback(const std::vector<std::unique_ptr<Rank>>& ranks, const std::string& message) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r]->setup.code(), absl::StatusCode::kFailedPrecondition) << "rank " << r;
    EXPECT_THAT(ranks[r]->setup.message(), HasSubstr(message)) << "rank " << r;
    EXPECT_EQ(ranks[r]->memory.live(), 0) << "rank " << r << " left memory behind";
  }
}

TEST(DeviceExecutorTest, RanksOnSeveralHostsFallBackAlike) {
  auto ranks = SetUpRanks(4, kSmallWindows, 0, [](int r, FakePeerMemory&, uint64_t& host) {
    if (r == 2) host = 7;
  });
  ExpectFallback(ranks, "device executor unavailable: rank 0 is not on the same host as rank 2");
}

TEST(DeviceExecutorTest, AGpuWithoutPeerAccessFallsBackAlike) {
  auto ranks = SetUpRanks(4, kSmallWindows, 0, [](int r, FakePeerMemory& memory, uint64_t&) {
    if (r == 1) memory.inaccessible = {3};
  });
  ExpectFallback(ranks, "rank 1's GPU cannot access rank 3's GPU");
}

TEST(DeviceExecutorTest, EachSetupFailureFallsBackAloneAndLosesNothing) {
  for (const char* operation :
       {"device", "access", "allocate", "mapped", "export", "import", "copy"}) {
    for (int nth : {1, 2}) {
      SCOPED_TRACE(absl::StrCat(operation, " #", nth));
      auto ranks = SetUpRanks(3, kSmallWindows, 0, [&](int r, FakePeerMemory& memory, uint64_t&) {
        if (r == 2) memory.FailAt(operation, nth);
      });
      if (ranks[2]->setup.ok()) {
        // "device" and "copy" are called once: their second call never comes.
        EXPECT_EQ(nth, 2);
        continue;
      }
      ExpectFallback(ranks, "rank 2 could not set up its peer memory");
      EXPECT_THAT(ranks[2]->setup.message(), HasSubstr("planted"));
      EXPECT_THAT(ranks[0]->setup.message(), Not(HasSubstr("planted")));
    }
  }
}

// Runs one Ring call on every rank but `absent`; returns each rank's next call's status.
std::vector<absl::Status> CallWithoutRank(std::vector<std::unique_ptr<Rank>>& ranks,
                                          InPlacePrograms& programs, int absent, bool abort) {
  const int n = static_cast<int>(ranks.size());
  const Plan plan = *SynthesizeRing(n);
  std::vector<Bytes> buffers(n, RandomFloats(64, 1));
  std::vector<absl::Status> next(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (r == absent) continue;
    threads.emplace_back([&, r] {
      const AllReduceArgs args{.send = buffers[r].data(), .recv = buffers[r].data(), .count = 64};
      DeviceExecutor& executor = *ranks[r]->executor;
      EXPECT_TRUE(executor.Run(programs.Of(plan, r), args, &ranks[r]->stream).ok());  // not waiting
      if (abort) {
        absl::SleepFor(absl::Milliseconds(50));
        executor.Abort();
      }
      ranks[r]->stream.Synchronize();
      next[r] = executor.Run(programs.Of(plan, r), args, &ranks[r]->stream);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return next;
}

TEST(DeviceExecutorTest, AKernelThatTimesOutFailsTheNextCallNamingTheRankItWaitedFor) {
  InPlacePrograms programs;
  auto ranks = SetUpRanks(4, {.window_bytes = 4096, .ctas = 2}, /*timeout_ns=*/100'000'000);
  const std::vector<absl::Status> next =
      CallWithoutRank(ranks, programs, /*absent=*/2, /*abort=*/false);
  // Rank 3 receives from rank 2 in the ring's first round.
  EXPECT_EQ(next[3].code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(next[3].message(), HasSubstr("timed out after 0.1 s waiting for rank 2"));
  for (int r : {0, 1}) EXPECT_EQ(next[r].code(), absl::StatusCode::kUnavailable) << r;
  // Lasting: the ranks' signals are out of step.
  const int launches = ranks[3]->executor->launches();
  const Plan plan = *SynthesizeRing(4);
  Bytes buffer = RandomFloats(8, 2);
  const absl::Status again = ranks[3]->executor->Run(
      programs.Of(plan, 3), {.send = buffer.data(), .recv = buffer.data(), .count = 8},
      &ranks[3]->stream);
  EXPECT_EQ(again.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ranks[3]->executor->launches(), launches);
}

TEST(DeviceExecutorTest, AbortStopsAKernelThatWouldWaitForever) {
  InPlacePrograms programs;
  auto ranks = SetUpRanks(3, {.window_bytes = 4096, .ctas = 2}, /*timeout_ns=*/0);
  const std::vector<absl::Status> next =
      CallWithoutRank(ranks, programs, /*absent=*/0, /*abort=*/true);
  for (int r : {1, 2}) {
    EXPECT_EQ(next[r].code(), absl::StatusCode::kUnavailable) << r;
    EXPECT_THAT(next[r].message(), HasSubstr("aborted")) << r;
  }
}

// Every rank enqueues `calls` Ring calls back to back (rank `late` 300 ms late, `broken` with a
// null buffer in its first call), then synchronises. Returns each rank's call after those.
struct Enqueued {
  std::vector<std::vector<Bytes>> results;  // [call][rank]
  std::vector<absl::Status> first, next;    // [rank]: its first call, and the call after all
};
Enqueued EnqueueCalls(std::vector<std::unique_ptr<Rank>>& ranks, InPlacePrograms& programs,
                      int calls, int late, int broken) {
  const int n = static_cast<int>(ranks.size());
  const Plan plan = *SynthesizeRing(n);
  Enqueued out;
  out.results.assign(calls, std::vector<Bytes>(n, Bytes(64 * sizeof(float), std::byte{0xa5})));
  out.first.resize(n);
  out.next.resize(n);
  const std::vector<Bytes> inputs(n, RandomFloats(64, 5));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      if (r == late) absl::SleepFor(absl::Milliseconds(300));
      for (int c = 0; c < calls; ++c) {
        const AllReduceArgs args{.send = r == broken && c == 0 ? nullptr : inputs[r].data(),
                                 .recv = out.results[c][r].data(),
                                 .count = 64};
        const absl::Status status =
            ranks[r]->executor->Run(programs.Of(plan, r), args, &ranks[r]->stream);
        if (c == 0) out.first[r] = status;
      }
      ranks[r]->stream.Synchronize();
      out.next[r] = ranks[r]->executor->Run(
          programs.Of(plan, r),
          {.send = inputs[r].data(), .recv = out.results[0][r].data(), .count = 64},
          &ranks[r]->stream);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return out;
}

// No call wrote a result: every one gave up before its only slice ended.
void ExpectNothingWritten(const Enqueued& enqueued) {
  for (size_t c = 0; c < enqueued.results.size(); ++c) {
    for (size_t r = 0; r < enqueued.results[c].size(); ++r) {
      EXPECT_EQ(enqueued.results[c][r], Bytes(64 * sizeof(float), std::byte{0xa5}))
          << "call " << c << " wrote rank " << r << "'s result";
    }
  }
}

TEST(DeviceExecutorTest, KernelsEnqueuedAfterOneGaveUpWriteNothing) {
  // Rank 0 gives up on rank 3 after 100 ms; its second kernel is already enqueued and must exit
  // without writing; the others give up on their peers after 1 s.
  InPlacePrograms programs;
  auto ranks = SetUpRanks(4, {.window_bytes = 4096, .ctas = 2}, 0, nullptr,
                          {100'000'000, 1'000'000'000, 1'000'000'000, 1'000'000'000});
  const Enqueued enqueued = EnqueueCalls(ranks, programs, /*calls=*/2, /*late=*/3, /*broken=*/-1);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(enqueued.first[r].ok()) << r;  // enqueued before anything gave up
    EXPECT_EQ(enqueued.next[r].code(), absl::StatusCode::kUnavailable) << r;
  }
  EXPECT_THAT(enqueued.next[0].message(), HasSubstr("waiting for rank 3"));
  ExpectNothingWritten(enqueued);
}

TEST(DeviceExecutorTest, AFailureOfOneRankIsFinalAndItsPeersGiveUp) {
  // Rank 2's first call has a null buffer: it fails there (its place in the sequence taken), and
  // launches nothing from then on; its peers wait for it and give up.
  InPlacePrograms programs;
  auto ranks = SetUpRanks(4, {.window_bytes = 4096, .ctas = 2}, /*timeout_ns=*/200'000'000);
  const Enqueued enqueued = EnqueueCalls(ranks, programs, /*calls=*/2, /*late=*/-1, /*broken=*/2);
  EXPECT_THAT(enqueued.first[2].message(), HasSubstr("a null buffer"));
  EXPECT_EQ(ranks[2]->executor->launches(), 0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(enqueued.next[r].code(), absl::StatusCode::kUnavailable) << r;
  }
  EXPECT_THAT(enqueued.next[3].message(), HasSubstr("waiting for rank 2"));
  ExpectNothingWritten(enqueued);
}

TEST(DeviceExecutorTest, ASignalOfALaterSliceNeverSatisfiesAWait) {
  const uint64_t awaited = DeviceSignal(7, 3);
  EXPECT_EQ(CheckSignal(DeviceSignal(7, 2), awaited), SignalState::kWaiting);
  EXPECT_EQ(CheckSignal(DeviceSignal(6, 900), awaited), SignalState::kWaiting);
  EXPECT_EQ(CheckSignal(DeviceSignal(7, 3), awaited), SignalState::kReached);
  EXPECT_EQ(CheckSignal(DeviceSignal(7, 4), awaited), SignalState::kReached);
  EXPECT_EQ(CheckSignal(DeviceSignal(8, 0), awaited), SignalState::kOutOfStep);
  EXPECT_EQ(CheckSignal(0, DeviceSignal(1, 1)), SignalState::kWaiting);
}

TEST(DeviceExecutorTest, BadArgumentsAreOneClearErrorAndLoseNothing) {
  constexpr int kRanks = 3;
  InPlacePrograms programs;
  auto ranks = SetUpRanks(kRanks, {.window_bytes = 64, .ctas = 1});
  const Plan ring = *SynthesizeRing(kRanks);
  const Plan too_many_chunks = *SynthesizeStragglar(kRanks, 1, /*pieces=*/12);  // 24 chunks
  const Plan other_size = *SynthesizeRing(kRanks + 1);
  std::vector<Bytes> buffers(kRanks, RandomFloats(10, 3));
  const std::vector<Bytes> inputs = buffers;
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      DeviceExecutor& executor = *ranks[r]->executor;
      void* stream = &ranks[r]->stream;
      Bytes& buffer = buffers[r];
      const AllReduceArgs args{.send = buffer.data(), .recv = buffer.data(), .count = 10};
      AllReduceArgs negative = args;
      negative.count = -1;
      EXPECT_EQ(executor.Run(programs.Of(ring, r), negative, stream).code(),
                absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(executor.Run(programs.Of(too_many_chunks, r), args, stream).message(),
                  HasSubstr("a 64-byte window cannot hold 24 chunks of float32"));
      EXPECT_THAT(executor.Run(programs.Of(other_size, r), args, stream).message(),
                  HasSubstr("of 4 on rank " + std::to_string(r) + " of a communicator of 3"));
      // A program lowered out of place, or with its pre-arrival left to NCCL.
      const RankProgram out_of_place = *LowerPlan(ring, r, {.in_place = false});
      EXPECT_THAT(executor.Run(out_of_place, args, stream).message(), HasSubstr("out of place"));
      EXPECT_EQ(executor.launches(), 0);
      // Nothing was lost: the next call runs, in step with the other ranks.
      EXPECT_TRUE(executor.Run(programs.Of(ring, r), args, stream).ok());
      ranks[r]->stream.Synchronize();
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::vector<Bytes> expected = HostReference(ring, inputs, 10, ReduceOp::kSum);
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(buffers[r] == expected[r]) << r;
}

// The CPU launcher, plus what the GPU's kernel adds to the timeline: `stamps_per_call` stamps,
// the first at the call's first slice's sequence number times 1000 ns.
class StampingLauncher final : public DeviceLauncher {
 public:
  explicit StampingLauncher(uint32_t stamps_per_call) : stamps_per_call_(stamps_per_call) {}
  absl::Status Launch(DataType type, ReduceOp op, const DeviceProgramView& program,
                      const DeviceCall& call, const DeviceWatch& watch, int ctas, void* stream,
                      void** order) override {
    if (call.stamps != nullptr) {
      DeviceStampWriter writer(call.stamps, call.stamps->at);
      for (uint32_t i = 0; i < stamps_per_call_; ++i) {
        writer.Take(DeviceStampEvent::kWaitBegin, program.rank, call.first_sequence * 1000 + i);
      }
      writer.Finish();
    }
    return cpu_.Launch(type, op, program, call, watch, ctas, stream, order);
  }

 private:
  const uint32_t stamps_per_call_;
  CpuLauncher cpu_;
};

TEST(DeviceExecutorTest, TheTimelineKeepsTheLastCallsWithTheHostsTimes) {
  constexpr int kRanks = 2;
  constexpr int kCalls = 5;
  constexpr int32_t kKept = 3;
  StampingLauncher launcher(kDeviceStampsPerCall + 2);
  auto ranks = SetUpRanks(kRanks, {.window_bytes = 1024, .ctas = 1}, 0, nullptr, {}, &launcher);
  InPlacePrograms programs;
  const Plan ring = *SynthesizeRing(kRanks);
  std::vector<Bytes> buffers(kRanks, RandomFloats(10, 5));
  const std::string prefix = ::testing::TempDir() + "/timeline";
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      DeviceExecutor& executor = *ranks[r]->executor;
      EXPECT_EQ(executor.WriteTimeline(prefix).status().code(),
                absl::StatusCode::kFailedPrecondition);
      ASSERT_TRUE(executor.StartTimeline(kKept).ok());
      const AllReduceArgs args{.send = buffers[r].data(), .recv = buffers[r].data(), .count = 10};
      for (int call = 0; call < kCalls; ++call) {
        EXPECT_TRUE(executor.Run(programs.Of(ring, r), args, &ranks[r]->stream).ok());
      }
      ranks[r]->stream.Synchronize();
      absl::StatusOr<DeviceTimeline::Written> written =
          executor.WriteTimeline(absl::StrCat(prefix, r, ".csv"));
      ASSERT_TRUE(written.ok()) << written.status();
      EXPECT_EQ(written->calls, kKept);
      EXPECT_EQ(written->stamps_not_kept, 2 * kKept);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int r = 0; r < kRanks; ++r) {
    std::ifstream file(absl::StrCat(prefix, r, ".csv"));
    std::string line;
    ASSERT_TRUE(std::getline(file, line));
    EXPECT_EQ(line, "call,source,event,ns,peer");
    std::map<std::string, int> rows;  // "call,source,event" -> rows
    std::map<int, uint64_t> first_gpu_ns;
    while (std::getline(file, line)) {
      const std::vector<std::string> fields = absl::StrSplit(line, ',');
      ASSERT_EQ(fields.size(), 5u) << line;
      ++rows[absl::StrCat(fields[0], ",", fields[1], ",", fields[2])];
      if (fields[1] == "gpu") {
        EXPECT_EQ(fields[4], std::to_string(r)) << line;
        first_gpu_ns.emplace(std::stoi(fields[0]), std::stoull(fields[3]));
      }
    }
    // The last kKept calls, each with its host times and the stamps its slot can hold; the call
    // numbers are the launches', so call c ran slice c + 1 (one slice per call).
    std::map<std::string, int> expected;
    for (int call = kCalls - kKept; call < kCalls; ++call) {
      expected[absl::StrCat(call, ",host,run")] = 1;
      expected[absl::StrCat(call, ",host,launched")] = 1;
      expected[absl::StrCat(call, ",gpu,wait_begin")] = kDeviceStampsPerCall;
      EXPECT_EQ(first_gpu_ns[call], (call + 1) * 1000u) << call;
    }
    EXPECT_EQ(rows, expected) << r;
  }
}

// The CPU launcher, keeping the signal scope of every call it runs.
class ScopeRecordingLauncher final : public DeviceLauncher {
 public:
  absl::Status Launch(DataType type, ReduceOp op, const DeviceProgramView& program,
                      const DeviceCall& call, const DeviceWatch& watch, int ctas, void* stream,
                      void** order) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      scopes_.push_back(call.scope);
    }
    return cpu_.Launch(type, op, program, call, watch, ctas, stream, order);
  }
  std::vector<DeviceSignalScope> scopes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return scopes_;
  }

 private:
  std::mutex mutex_;
  std::vector<DeviceSignalScope> scopes_;
  CpuLauncher cpu_;
};

// The GPU's scope orders only what that GPU's threads do: it is taken only when every rank's
// window is on this rank's GPU, and every call carries it to the kernel; the results do not
// depend on it.
TEST(DeviceExecutorTest, SignalsReachOnlyAsFarAsThePeersGpus) {
  constexpr int kRanks = 4;
  struct Case {
    const char* name;
    int odd_rank_device;  // the GPU of rank 3; the others are on GPU 0
    bool system_scope;    // STRAGGLAR_DEVICE_SCOPE=system
    DeviceSignalScope expected;
  };
  for (const Case& c : {Case{"one GPU", 0, false, DeviceSignalScope::kGpu},
                        Case{"rank 3 on another GPU", 1, false, DeviceSignalScope::kSystem},
                        Case{"one GPU, system forced", 0, true, DeviceSignalScope::kSystem}}) {
    SCOPED_TRACE(c.name);
    ScopeRecordingLauncher launcher;
    auto ranks = SetUpRanks(
        kRanks, {.window_bytes = 4096, .ctas = 2, .system_scope = c.system_scope}, 0,
        [&](int r, FakePeerMemory& memory, uint64_t&) {
          memory.MoveTo(r == kRanks - 1 ? c.odd_rank_device : 0);
        },
        {}, &launcher);
    InPlacePrograms programs;
    const Plan plan = *SynthesizeStragglar(kRanks, kRanks - 1);
    std::vector<Bytes> inputs;
    for (int r = 0; r < kRanks; ++r) inputs.push_back(RandomFloats(101, 11 + r));
    const std::vector<Bytes> expected = HostReference(plan, inputs, 101, ReduceOp::kSum);
    std::vector<Bytes> buffers = inputs;
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(ranks[r]->setup.ok()) << ranks[r]->setup;
      threads.emplace_back([&, r] {
        const AllReduceArgs args{
            .send = buffers[r].data(), .recv = buffers[r].data(), .count = 101};
        EXPECT_TRUE(ranks[r]->executor->Run(programs.Of(plan, r), args, &ranks[r]->stream).ok());
        ranks[r]->stream.Synchronize();
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(launcher.scopes(), std::vector<DeviceSignalScope>(kRanks, c.expected));
    EXPECT_EQ(buffers, expected);
  }
}

TEST(DeviceExecutorTest, ATimelineKeepsAtLeastOneCall) {
  FakePeerMemory memory(0);
  EXPECT_THAT(DeviceTimeline::Create(memory, 0).status().message(),
              HasSubstr("keeps at least one call, not 0"));
}

}  // namespace
}  // namespace stragglar
