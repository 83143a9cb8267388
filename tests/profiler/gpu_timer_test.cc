#include "profiler/gpu_timer.h"

#include <cuda_runtime_api.h>
// CUPTI headers for constants only: the test, like the timer, never links libcupti.
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_result.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/profiler/spin_kernel.h"

namespace stragglar {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

using Clock = std::chrono::steady_clock;

double NowS() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// cudaGetDeviceCount's error on a machine without a usable GPU, cudaSuccess with one.
cudaError_t DeviceError() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (err == cudaSuccess && count == 0) return cudaErrorNoDevice;
  return err;
}

bool HaveGpu() { return DeviceError() == cudaSuccess; }

// Set by the gpu_timer_test.*_libcupti checks, whose preloaded shim redirects libcupti's dlopen:
// "hidden" (it fails) or the path of the fake libcupti loaded instead.
std::string LibcuptiRedirect() {
  const char* redirect = std::getenv("STRAGGLAR_TEST_LIBCUPTI");
  return redirect != nullptr ? redirect : "";
}
bool LibcuptiHidden() { return LibcuptiRedirect() == "hidden"; }
bool LibcuptiFake() { return !LibcuptiRedirect().empty() && !LibcuptiHidden(); }

#define REQUIRE_GPU()                                                \
  do {                                                               \
    if (cudaError_t err = DeviceError(); err != cudaSuccess) {       \
      GTEST_SKIP() << "no CUDA device: " << cudaGetErrorString(err); \
    }                                                                \
  } while (0)

// The fallback line: the CUPTI step that failed and why, on one line.
constexpr char kReasonPattern[] =
    "CUPTI unavailable \\((cupti[A-Za-z]+: [^\n]+|dlopen: [^\n]+|dlsym: [^\n]+|another "
    "GpuCallTimer[^\n]+)\\); timing with CUDA events";

TEST(GpuTimerTest, SourceNames) {
  EXPECT_EQ(GpuTimerSourceName(GpuTimerSource::kCupti), "cupti");
  EXPECT_EQ(GpuTimerSourceName(GpuTimerSource::kCudaEvents), "cuda-events");
}

TEST(GpuTimerTest, EventsWhenAskedClearsTheReason) {
  std::string reason = "stale text";
  std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(false, &reason);
  ASSERT_NE(timer, nullptr);
  EXPECT_EQ(timer->source(), GpuTimerSource::kCudaEvents);
  EXPECT_EQ(reason, "");
  std::unique_ptr<GpuCallTimer> quiet = GpuCallTimer::Create(false, nullptr);
  ASSERT_NE(quiet, nullptr);
  EXPECT_EQ(quiet->source(), GpuTimerSource::kCudaEvents);
}

TEST(GpuTimerTest, CuptiOrAOneLineReason) {
  std::string reason = "stale text";
  std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(true, &reason);
  ASSERT_NE(timer, nullptr);
  std::printf("[ source   ] %s%s%s\n", std::string(GpuTimerSourceName(timer->source())).c_str(),
              reason.empty() ? "" : ": ", reason.c_str());
  if (LibcuptiHidden()) {
    // gpu_timer_test.without_libcupti: every dlopen of libcupti fails.
    EXPECT_EQ(timer->source(), GpuTimerSource::kCudaEvents);
    EXPECT_THAT(reason, StartsWith("CUPTI unavailable (dlopen: libcupti.so.13: "));
  } else if (LibcuptiFake()) {
    EXPECT_EQ(timer->source(), GpuTimerSource::kCupti);
  } else if (!HaveGpu()) {
    // No GPU: libcupti loads but cannot subscribe or enable activity (CUPTI_ERROR_UNKNOWN).
    EXPECT_EQ(timer->source(), GpuTimerSource::kCudaEvents);
    EXPECT_THAT(reason, ContainsRegex("\\((cuptiSubscribe|cuptiActivityEnable): CUPTI_ERROR_"));
  }
  if (timer->source() == GpuTimerSource::kCupti) {
    EXPECT_EQ(reason, "");
  } else {
    EXPECT_THAT(reason, MatchesRegex(kReasonPattern));
    EXPECT_THAT(reason, Not(HasSubstr("\n")));
  }
  // Without a reason pointer it still works.
  timer.reset();
  timer = GpuCallTimer::Create(true, nullptr);
  ASSERT_NE(timer, nullptr);
}

TEST(GpuTimerTest, SecondCreateAfterAFailedOneIsClean) {
  std::string first_reason, second_reason, third_reason;
  std::unique_ptr<GpuCallTimer> first = GpuCallTimer::Create(true, &first_reason);
  GpuTimerSource first_source = first->source();
  if (first_source == GpuTimerSource::kCupti) {
    // CUPTI is ours: a second one in the same process falls back, and says why.
    std::unique_ptr<GpuCallTimer> second = GpuCallTimer::Create(true, &second_reason);
    EXPECT_EQ(second->source(), GpuTimerSource::kCudaEvents);
    EXPECT_THAT(second_reason, MatchesRegex(kReasonPattern));
    EXPECT_THAT(second_reason, HasSubstr("another GpuCallTimer"));
    second.reset();
    first.reset();
    // Released: the next one gets CUPTI again.
    std::unique_ptr<GpuCallTimer> third = GpuCallTimer::Create(true, &third_reason);
    EXPECT_EQ(third->source(), GpuTimerSource::kCupti);
    EXPECT_EQ(third_reason, "");
    return;
  }
  // The failed attempt undid what it had set up: a second attempt, with the first timer alive,
  // fails at the same step for the same reason (not "multiple subscribers", not "another
  // GpuCallTimer"), and so does a third once both are gone.
  std::unique_ptr<GpuCallTimer> second = GpuCallTimer::Create(true, &second_reason);
  EXPECT_EQ(second->source(), GpuTimerSource::kCudaEvents);
  EXPECT_EQ(second_reason, first_reason);
  EXPECT_THAT(second_reason, Not(HasSubstr("MULTIPLE_SUBSCRIBERS")));
  EXPECT_THAT(second_reason, Not(HasSubstr("another GpuCallTimer")));
  first.reset();
  second.reset();
  std::unique_ptr<GpuCallTimer> third = GpuCallTimer::Create(true, &third_reason);
  EXPECT_EQ(third->source(), GpuTimerSource::kCudaEvents);
  EXPECT_EQ(third_reason, first_reason);
}

TEST(GpuTimerTest, BeginWithoutGpuIsAClearError) {
  cudaError_t device_error = DeviceError();
  if (device_error == cudaSuccess) GTEST_SKIP() << "a CUDA device is present";
  for (bool prefer_cupti : {false, true}) {
    SCOPED_TRACE(prefer_cupti ? "prefer CUPTI" : "events");
    std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(prefer_cupti, nullptr);
    for (cudaStream_t stream : {cudaStream_t{nullptr}, cudaStreamPerThread}) {
      absl::StatusOr<uint64_t> ticket = timer->Begin(stream);
      ASSERT_FALSE(ticket.ok());
      EXPECT_EQ(ticket.status().code(), absl::StatusCode::kFailedPrecondition);
      // "<the CUDA call>: <cudaGetErrorString>", e.g. "cudaStreamGetDevice: CUDA driver version
      // is insufficient for CUDA runtime version".
      EXPECT_THAT(std::string(ticket.status().message()),
                  MatchesRegex(std::string("cuda[A-Za-z]+: ") + cudaGetErrorString(device_error)));
    }
    GpuTimerStats stats = timer->stats();
    EXPECT_EQ(stats.timed_by_cupti + stats.timed_by_events, 0u);
  }
}

TEST(GpuTimerTest, UnknownTicketsAreErrorsNotCrashes) {
  for (bool prefer_cupti : {false, true}) {
    SCOPED_TRACE(prefer_cupti ? "prefer CUPTI" : "events");
    std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(prefer_cupti, nullptr);
    EXPECT_EQ(timer->Poll(424242).status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(timer->Wait(424242).status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(timer->End(424242, nullptr).code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(timer->Poll(424242).status().message()), HasSubstr("424242"));
    EXPECT_EQ(timer->Poll(0).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(timer->Wait(0).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(timer->End(0, nullptr).code(), absl::StatusCode::kInvalidArgument);
    timer->Release(424242);
    timer->Release(0);
    EXPECT_EQ(timer->Poll(424242).status().code(), absl::StatusCode::kNotFound);
  }
}

// ---------------------------------------------------------------------------------------------
// With a GPU.

struct Stream {
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { (void)cudaStreamDestroy(stream); }
  cudaStream_t stream = nullptr;
};

constexpr uint64_t kMs = 1000000;

// One call: Begin, a spin of `ns`, End; its timing once the GPU is done.
CallTiming TimedSpin(GpuCallTimer& timer, cudaStream_t stream, uint64_t ns, bool driver = false) {
  absl::StatusOr<uint64_t> ticket = timer.Begin(stream);
  EXPECT_TRUE(ticket.ok()) << ticket.status();
  if (!ticket.ok()) return {};
  cudaError_t err =
      driver ? gpu_test::LaunchSpinDriverEx(stream, ns) : gpu_test::LaunchSpin(stream, ns);
  EXPECT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  EXPECT_TRUE(timer.End(*ticket, stream).ok());
  absl::StatusOr<CallTiming> timing = timer.Wait(*ticket);
  EXPECT_TRUE(timing.ok()) << timing.status();
  // Read twice: the same answer.
  absl::StatusOr<std::optional<CallTiming>> again = timer.Poll(*ticket);
  EXPECT_TRUE(again.ok() && again->has_value());
  if (timing.ok() && again.ok() && again->has_value()) {
    EXPECT_EQ((*again)->arrival_s, timing->arrival_s);
    EXPECT_EQ((*again)->duration_s, timing->duration_s);
  }
  timer.Release(*ticket);
  return timing.ok() ? *timing : CallTiming{};
}

class GpuTimerSourceTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    timer_ = GpuCallTimer::Create(GetParam(), &reason_);
    if (GetParam() && timer_->source() != GpuTimerSource::kCupti) {
      GTEST_SKIP() << reason_;
    }
  }
  std::unique_ptr<GpuCallTimer> timer_;
  std::string reason_;
};

INSTANTIATE_TEST_SUITE_P(Sources, GpuTimerSourceTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Cupti") : std::string("Events");
                         });

TEST_P(GpuTimerSourceTest, SpinIsTimedOnTheHostClock) {
  Stream s;
  TimedSpin(*timer_, s.stream, 1 * kMs);  // warm-up: module load, first reference
  for (uint64_t ns : {2 * kMs, 10 * kMs}) {
    double before = NowS();
    CallTiming timing = TimedSpin(*timer_, s.stream, ns);
    double after = NowS();
    double spin_s = ns / 1e9;
    EXPECT_GE(timing.duration_s, spin_s * 0.999);
    EXPECT_LT(timing.duration_s, spin_s + 2e-3);
    // The stream reached the call after Begin was called (up to the reference's error) and
    // finished before Wait returned.
    EXPECT_GE(timing.arrival_s, before - 50e-6);
    EXPECT_LE(timing.arrival_s + timing.duration_s, after + 50e-6);
  }
  GpuTimerStats stats = timer_->stats();
  if (timer_->source() == GpuTimerSource::kCupti) {
    EXPECT_EQ(stats.timed_by_cupti, 3u);
    EXPECT_EQ(stats.timed_by_events, 0u);
  } else {
    EXPECT_EQ(stats.timed_by_events, 3u);
  }
}

TEST_P(GpuTimerSourceTest, CallsInOrderArriveInOrder) {
  Stream s;
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<uint64_t> ticket = timer_->Begin(s.stream);
    ASSERT_TRUE(ticket.ok()) << ticket.status();
    ASSERT_EQ(gpu_test::LaunchSpin(s.stream, kMs), cudaSuccess);
    ASSERT_TRUE(timer_->End(*ticket, s.stream).ok());
    tickets.push_back(*ticket);
  }
  ASSERT_EQ(cudaStreamSynchronize(s.stream), cudaSuccess);
  double previous_end = 0;
  for (uint64_t ticket : tickets) {
    absl::StatusOr<CallTiming> timing = timer_->Wait(ticket);
    ASSERT_TRUE(timing.ok()) << timing.status();
    EXPECT_GE(timing->arrival_s, previous_end - 2e-6);
    previous_end = timing->arrival_s + timing->duration_s;
    timer_->Release(ticket);
  }
}

TEST_P(GpuTimerSourceTest, PollDoesNotWaitForTheGpu) {
  Stream s;
  TimedSpin(*timer_, s.stream, kMs);
  absl::StatusOr<uint64_t> ticket = timer_->Begin(s.stream);
  ASSERT_TRUE(ticket.ok()) << ticket.status();
  EXPECT_EQ(timer_->Poll(*ticket).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(gpu_test::LaunchSpin(s.stream, 200 * kMs), cudaSuccess);
  ASSERT_TRUE(timer_->End(*ticket, s.stream).ok());
  EXPECT_EQ(timer_->End(*ticket, s.stream).code(), absl::StatusCode::kFailedPrecondition);
  Clock::time_point start = Clock::now();
  absl::StatusOr<std::optional<CallTiming>> early = timer_->Poll(*ticket);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(5));
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_FALSE(early->has_value());
  std::optional<CallTiming> timing;
  int polls = 0;
  while (!timing.has_value() && Clock::now() - start < std::chrono::seconds(10)) {
    absl::StatusOr<std::optional<CallTiming>> polled = timer_->Poll(*ticket);
    ASSERT_TRUE(polled.ok()) << polled.status();
    timing = *polled;
    ++polls;
  }
  ASSERT_TRUE(timing.has_value());
  EXPECT_GT(polls, 10);
  EXPECT_GE(timing->duration_s, 0.2 * 0.999);
  EXPECT_LT(timing->duration_s, 0.2 + 5e-3);
  timer_->Release(*ticket);

  // A ticket released before its work finished frees its events for the next calls.
  absl::StatusOr<uint64_t> abandoned = timer_->Begin(s.stream);
  ASSERT_TRUE(abandoned.ok());
  ASSERT_EQ(gpu_test::LaunchSpin(s.stream, 20 * kMs), cudaSuccess);
  ASSERT_TRUE(timer_->End(*abandoned, s.stream).ok());
  timer_->Release(*abandoned);
  EXPECT_EQ(timer_->Poll(*abandoned).status().code(), absl::StatusCode::kNotFound);
  CallTiming next = TimedSpin(*timer_, s.stream, 2 * kMs);
  EXPECT_GE(next.duration_s, 2e-3 * 0.999);
}

TEST_P(GpuTimerSourceTest, CallsOnTwoThreadsKeepTheirOwnKernels) {
  // Thread t spins (t + 1) * 300 µs per call on its own stream: a kernel attributed to the wrong
  // call would stretch or shrink its duration.
  std::atomic<int> failures{0};
  auto run = [&](int t) {
    Stream s;
    uint64_t ns = (t + 1) * 300000;
    for (int i = 0; i < 30; ++i) {
      CallTiming timing = TimedSpin(*timer_, s.stream, ns);
      if (timing.duration_s < ns / 1e9 * 0.999 || timing.duration_s > ns / 1e9 + 1e-3) {
        ++failures;
        ADD_FAILURE() << "thread " << t << " call " << i << ": " << timing.duration_s;
      }
    }
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(GpuTimerSourceTest, OverheadPerCall) {
  Stream s;
  TimedSpin(*timer_, s.stream, kMs);
  constexpr int kCalls = 10000;
  std::vector<uint64_t> tickets(kCalls);
  // Steady state: the event pool already holds what the calls need.
  for (int round = 0; round < 2; ++round) {
    Clock::time_point start = Clock::now();
    for (int i = 0; i < kCalls; ++i) {
      absl::StatusOr<uint64_t> ticket = timer_->Begin(s.stream);
      ASSERT_TRUE(ticket.ok()) << ticket.status();
      ASSERT_TRUE(timer_->End(*ticket, s.stream).ok());
      tickets[i] = *ticket;
    }
    double begin_end_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    ASSERT_EQ(cudaStreamSynchronize(s.stream), cudaSuccess);
    start = Clock::now();
    for (uint64_t ticket : tickets) ASSERT_TRUE(timer_->Wait(ticket).ok());
    double read_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    for (uint64_t ticket : tickets) timer_->Release(ticket);
    if (round == 1) {
      std::printf(
          "[ overhead ] %s: Begin+End %.2f us/call, Wait (after sync) %.2f us/call, "
          "over %d calls\n",
          std::string(GpuTimerSourceName(timer_->source())).c_str(), begin_end_us / kCalls,
          read_us / kCalls, kCalls);
    }
  }
}

// CUPTI-specific behaviour.
class GpuTimerCuptiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    std::string reason;
    cupti_ = GpuCallTimer::Create(true, &reason);
    if (cupti_->source() != GpuTimerSource::kCupti) GTEST_SKIP() << reason;
    events_ = GpuCallTimer::Create(false, nullptr);
  }
  std::unique_ptr<GpuCallTimer> cupti_;
  std::unique_ptr<GpuCallTimer> events_;
};

TEST_F(GpuTimerCuptiTest, AgreesWithEvents) {
  Stream s;
  TimedSpin(*cupti_, s.stream, kMs);
  for (bool driver : {false, true}) {
    SCOPED_TRACE(driver ? "cuLaunchKernelEx" : "<<<>>>");
    for (int i = 0; i < 5; ++i) {
      absl::StatusOr<uint64_t> outer = events_->Begin(s.stream);
      absl::StatusOr<uint64_t> inner = cupti_->Begin(s.stream);
      ASSERT_TRUE(outer.ok() && inner.ok());
      ASSERT_EQ(driver ? gpu_test::LaunchSpinDriverEx(s.stream, 3 * kMs)
                       : gpu_test::LaunchSpin(s.stream, 3 * kMs),
                cudaSuccess);
      ASSERT_TRUE(cupti_->End(*inner, s.stream).ok());
      ASSERT_TRUE(events_->End(*outer, s.stream).ok());
      absl::StatusOr<CallTiming> by_events = events_->Wait(*outer);
      absl::StatusOr<CallTiming> by_cupti = cupti_->Wait(*inner);
      ASSERT_TRUE(by_events.ok()) << by_events.status();
      ASSERT_TRUE(by_cupti.ok()) << by_cupti.status();
      std::printf("[ compare  ] %s: arrival cupti-events %+.1f us, duration %+.1f us\n",
                  driver ? "driver" : "runtime", (by_cupti->arrival_s - by_events->arrival_s) * 1e6,
                  (by_cupti->duration_s - by_events->duration_s) * 1e6);
      // The kernel starts just after the begin event and ends just before the end event.
      EXPECT_NEAR(by_cupti->arrival_s, by_events->arrival_s, 200e-6);
      EXPECT_NEAR(by_cupti->duration_s, by_events->duration_s, 200e-6);
      EXPECT_GE(by_cupti->duration_s, 3e-3 * 0.999);
      cupti_->Release(*inner);
      events_->Release(*outer);
    }
  }
  GpuTimerStats stats = cupti_->stats();
  EXPECT_EQ(stats.timed_by_cupti, 11u);  // the records arrived, driver launches included
  EXPECT_EQ(stats.timed_by_events, 0u);
}

TEST_F(GpuTimerCuptiTest, CallWithoutKernelsUsesItsEvents) {
  Stream s;
  absl::StatusOr<uint64_t> ticket = cupti_->Begin(s.stream);
  ASSERT_TRUE(ticket.ok());
  ASSERT_TRUE(cupti_->End(*ticket, s.stream).ok());
  absl::StatusOr<CallTiming> timing = cupti_->Wait(*ticket);
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_LT(timing->duration_s, 1e-3);
  EXPECT_NEAR(timing->arrival_s, NowS(), 1.0);
  cupti_->Release(*ticket);
  GpuTimerStats stats = cupti_->stats();
  EXPECT_EQ(stats.cupti_no_launch, 1u);
  EXPECT_EQ(stats.timed_by_events, 1u);
  // Kernels outside any call are not counted.
  ASSERT_EQ(gpu_test::LaunchSpin(s.stream, kMs), cudaSuccess);
  CallTiming inside = TimedSpin(*cupti_, s.stream, 2 * kMs);
  EXPECT_GE(inside.duration_s, 2e-3 * 0.999);
  EXPECT_LT(inside.duration_s, 3e-3);
  EXPECT_EQ(cupti_->stats().timed_by_cupti, 1u);
}

// ---------------------------------------------------------------------------------------------
// CUPTI set-up and teardown against the fake libcupti (gpu_timer_test.fake_libcupti).

struct FakeCupti {
  void (*fail)(const char* function, int result);
  long (*count)(const char* what);
  uint64_t (*timestamp)();
  void (*add_kernel)(uint32_t correlation_id, uint64_t start, uint64_t end);
  int (*api_callback)(int domain, int cbid, int exit, uint32_t correlation_id, int result);
  int (*flush_all)(uint32_t flag);
};

const FakeCupti* LoadFake() {
  static const FakeCupti* fake = []() -> const FakeCupti* {
    if (!LibcuptiFake()) return nullptr;
    // The same path the timer's dlopen is redirected to: one library, one state.
    void* handle = dlopen(LibcuptiRedirect().c_str(), RTLD_NOW);
    if (handle == nullptr) return nullptr;
    auto* loaded = new FakeCupti;
    auto resolve = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      return fn != nullptr;
    };
    if (!resolve(loaded->fail, "fake_cupti_fail") || !resolve(loaded->count, "fake_cupti_count") ||
        !resolve(loaded->timestamp, "fake_cupti_timestamp") ||
        !resolve(loaded->add_kernel, "fake_cupti_add_kernel") ||
        !resolve(loaded->api_callback, "fake_cupti_api_callback") ||
        !resolve(loaded->flush_all, "cuptiActivityFlushAll")) {
      return nullptr;
    }
    return loaded;
  }();
  return fake;
}

class FakeCuptiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = LoadFake();
    if (fake_ == nullptr) GTEST_SKIP() << "runs as ctest gpu_timer_test.fake_libcupti";
    fake_->fail("", 0);
  }
  void TearDown() override {
    if (fake_ != nullptr) fake_->fail("", 0);
  }
  long Count(const char* what) const { return fake_->count(what); }
  const FakeCupti* fake_ = nullptr;
};

constexpr int kCuptiErrorUnknown = CUPTI_ERROR_UNKNOWN;
constexpr int kCuptiErrorMultipleSubscribers = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
constexpr int kDriverDomain = CUPTI_CB_DOMAIN_DRIVER_API;
constexpr int kRuntimeDomain = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr int kCuLaunchKernelEx = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx;
constexpr int kCudaLaunchKernel = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;

TEST_F(FakeCuptiTest, SetsUpTheLaunchCallbacksAndKernelActivityThenUndoesThem) {
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "first" : "again");
    std::string reason = "stale";
    std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(true, &reason);
    EXPECT_EQ(timer->source(), GpuTimerSource::kCupti);
    EXPECT_EQ(reason, "");
    EXPECT_EQ(Count("subscribed"), 1);
    EXPECT_EQ(Count("driver_callbacks"), 6);   // cuLaunchKernel{,Ex,Cooperative}{,_ptsz}
    EXPECT_EQ(Count("runtime_callbacks"), 6);  // cudaLaunchKernel{,ExC,Cooperative}{,_ptsz}
    EXPECT_EQ(Count("kernel_activity"), 1);
    EXPECT_EQ(Count("buffer_callbacks"), 1);
    EXPECT_EQ(Count("timestamp_callback"), 1);
    timer.reset();
    EXPECT_EQ(Count("subscribed"), 0);
    EXPECT_EQ(Count("kernel_activity"), 0);
  }
}

TEST_F(FakeCuptiTest, OneTimerHoldsCupti) {
  std::unique_ptr<GpuCallTimer> first = GpuCallTimer::Create(true, nullptr);
  ASSERT_EQ(first->source(), GpuTimerSource::kCupti);
  long subscribes = Count("cuptiSubscribe");
  std::string reason;
  std::unique_ptr<GpuCallTimer> second = GpuCallTimer::Create(true, &reason);
  EXPECT_EQ(second->source(), GpuTimerSource::kCudaEvents);
  EXPECT_EQ(reason,
            "CUPTI unavailable (another GpuCallTimer in this process holds the CUPTI "
            "subscription); timing with CUDA events");
  EXPECT_EQ(Count("cuptiSubscribe"), subscribes);  // not even tried
  second.reset();
  EXPECT_EQ(Count("subscribed"), 1);  // the events timer touched nothing of the first's
  EXPECT_EQ(Count("kernel_activity"), 1);
}

TEST_F(FakeCuptiTest, EachFailedStepIsUndone) {
  for (const char* step : {"cuptiSubscribe", "cuptiEnableCallback",
                           "cuptiActivityRegisterCallbacks", "cuptiActivityEnable"}) {
    SCOPED_TRACE(step);
    fake_->fail(step, kCuptiErrorUnknown);
    std::string reason;
    std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(true, &reason);
    EXPECT_EQ(timer->source(), GpuTimerSource::kCudaEvents);
    EXPECT_EQ(reason, absl::StrCat("CUPTI unavailable (", step,
                                   ": CUPTI_ERROR_UNKNOWN); timing with CUDA events"));
    EXPECT_EQ(Count("subscribed"), 0);
    EXPECT_EQ(Count("kernel_activity"), 0);
    fake_->fail("", 0);
    timer = GpuCallTimer::Create(true, &reason);
    EXPECT_EQ(timer->source(), GpuTimerSource::kCupti) << reason;
  }
}

TEST_F(FakeCuptiTest, AnotherToolsSubscriptionIsLeftAlone) {
  // Nsight holds the subscription and the activity buffers: nothing of those may be touched.
  const char* activity[] = {"cuptiActivityRegisterCallbacks",
                            "cuptiActivityEnable",
                            "cuptiActivityDisable",
                            "cuptiActivityRegisterTimestampCallback",
                            "cuptiActivityFlushAll",
                            "cuptiEnableCallback",
                            "cuptiUnsubscribe"};
  std::vector<long> before;
  for (const char* name : activity) before.push_back(Count(name));
  fake_->fail("cuptiSubscribe", kCuptiErrorMultipleSubscribers);
  std::string reason;
  std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(true, &reason);
  EXPECT_EQ(timer->source(), GpuTimerSource::kCudaEvents);
  EXPECT_EQ(reason,
            "CUPTI unavailable (cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED); "
            "timing with CUDA events");
  timer.reset();
  for (size_t i = 0; i < std::size(activity); ++i) {
    EXPECT_EQ(Count(activity[i]), before[i]) << activity[i];
  }
}

TEST_F(FakeCuptiTest, ResultWithoutAName) {
  fake_->fail("cuptiActivityEnable", 12345);
  std::string reason;
  std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(true, &reason);
  EXPECT_EQ(timer->source(), GpuTimerSource::kCudaEvents);
  EXPECT_EQ(reason,
            "CUPTI unavailable (cuptiActivityEnable: CUPTI error 12345); timing with CUDA events");
}

TEST_F(FakeCuptiTest, TimestampsAreOnTheSteadyClock) {
  std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(true, nullptr);
  ASSERT_EQ(timer->source(), GpuTimerSource::kCupti);
  // The records' timestamps come from the callback the timer registered: steady_clock ns.
  double steady_s = NowS();
  double cupti_s = fake_->timestamp() / 1e9;
  EXPECT_NEAR(cupti_s, steady_s, 1e-3);
  // Without the callback (an older libcupti), the timer measures an offset instead.
  timer.reset();
  fake_->fail("cuptiActivityRegisterTimestampCallback", kCuptiErrorUnknown);
  long timestamps = Count("cuptiGetTimestamp");
  timer = GpuCallTimer::Create(true, nullptr);
  EXPECT_EQ(timer->source(), GpuTimerSource::kCupti);
  EXPECT_GE(Count("cuptiGetTimestamp"), timestamps + 1);
}

TEST_F(FakeCuptiTest, LaunchesAndRecordsOutsideCallsAreIgnored) {
  std::unique_ptr<GpuCallTimer> timer = GpuCallTimer::Create(true, nullptr);
  ASSERT_EQ(timer->source(), GpuTimerSource::kCupti);
  // No GPU here: Begin fails cleanly and opens no call on this thread.
  if (!HaveGpu()) {
    EXPECT_FALSE(timer->Begin(nullptr).ok());
  }
  // A runtime launch with the driver launch inside it, then one that failed; then their records.
  EXPECT_EQ(fake_->api_callback(kRuntimeDomain, kCudaLaunchKernel, 0, 11, 0), 1);
  EXPECT_EQ(fake_->api_callback(kDriverDomain, kCuLaunchKernelEx, 0, 12, 0), 1);
  EXPECT_EQ(fake_->api_callback(kDriverDomain, kCuLaunchKernelEx, 1, 12, 0), 1);
  EXPECT_EQ(fake_->api_callback(kRuntimeDomain, kCudaLaunchKernel, 1, 11, 0), 1);
  EXPECT_EQ(fake_->api_callback(kDriverDomain, kCuLaunchKernelEx, 0, 13, 0), 1);
  EXPECT_EQ(fake_->api_callback(kDriverDomain, kCuLaunchKernelEx, 1, 13, 1), 1);
  // An exit whose entry came before the subscription.
  EXPECT_EQ(fake_->api_callback(kRuntimeDomain, kCudaLaunchKernel, 1, 14, 0), 1);
  long completed = Count("buffers_completed");
  fake_->add_kernel(11, 1000, 2000);
  fake_->add_kernel(12, 0, 0);
  EXPECT_EQ(fake_->flush_all(0), 0);
  EXPECT_EQ(Count("buffers_completed"), completed + 1);
  // Records still held at teardown are delivered to it; later ones find no timer, and their
  // buffers are recycled.
  fake_->add_kernel(15, 3000, 4000);
  timer.reset();
  EXPECT_EQ(Count("buffers_completed"), completed + 2);
  for (int i = 0; i < 8; ++i) {
    fake_->add_kernel(16 + i, 5000, 6000);
    EXPECT_EQ(fake_->flush_all(0), 0);
  }
  EXPECT_EQ(Count("buffers_completed"), completed + 10);
}

}  // namespace
}  // namespace stragglar
