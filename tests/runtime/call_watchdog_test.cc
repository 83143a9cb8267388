// The call watchdog (runtime/call_watchdog.h): the line it writes for a stuck call, one warning
// per call, the timeout's line and ending, and its settings; and the calls whose GPU work has not
// finished (runtime/pending_gpu_calls.h), which it watches on NCCL.
#include "runtime/call_watchdog.h"

#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/plan.h"
#include "runtime/env_config.h"
#include "runtime/pending_gpu_calls.h"
#include "tests/fake_env.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A call started `ago_s` ago, run by `algorithm` (-1: not decided), waiting on peer and round.
void StartCall(CallProgress& progress, int64_t call, int algorithm, int peer, int round,
               double ago_s = 0) {
  progress.Finish();
  progress.call.store(call);
  progress.algorithm.store(algorithm);
  progress.on_gpu.store(false);
  progress.Waiting(peer, round);
  // Last, as PendingGpuCalls does: a watchdog that sees the start sees the rest.
  progress.started_ns.store(SteadyNowNs() - static_cast<int64_t>(ago_s * 1e9));
}

TEST(DescribeWaitTest, NamesTheCallWhatRunsItAndWhatItWaitsFor) {
  CallProgress progress;
  StartCall(progress, 1200, static_cast<int>(Algorithm::kStragglar), 3, 2);
  EXPECT_EQ(DescribeWait("world", progress, 30),
            "world: call 1200 (stragglar) has waited 30 s for rank 3 in round 2");
  StartCall(progress, 7, static_cast<int>(Algorithm::kNative), -1, -1);
  EXPECT_EQ(DescribeWait("world", progress, 2.5),
            "world: call 7 (the library's own AllReduce) has waited 2.5 s (which ranks have not "
            "entered it is not known here)");
  // Where the caller knows who has not entered the library's own call, it is named.
  EXPECT_EQ(DescribeWait("world", progress, 2.5, [] { return "rank 3 has not entered it"; }),
            "world: call 7 (the library's own AllReduce) has waited 2.5 s (rank 3 has not entered "
            "it)");
  StartCall(progress, 8, -1, -1, -1);
  EXPECT_EQ(DescribeWait("c1", progress, 1), "c1: call 8 (deciding) has waited 1 s");
  // A call whose host side has returned, waiting on the GPU (NCCL's calls only enqueue).
  StartCall(progress, 9, static_cast<int>(Algorithm::kStragglar), -1, -1);
  progress.on_gpu.store(true);
  EXPECT_EQ(DescribeWait("comm0", progress, 30),
            "comm0: call 9 (stragglar) has waited 30 s for its work on the GPU");
  progress.algorithm.store(static_cast<int>(Algorithm::kNative));
  EXPECT_EQ(DescribeWait("comm0", progress, 30),
            "comm0: call 9 (the library's own AllReduce) has waited 30 s for its work on the GPU "
            "(which ranks have not entered it is not known here)");
  progress.Start();
  EXPECT_FALSE(progress.on_gpu.load()) << "a new call starts on the host";
}

// Marks that the test reaches by hand; asked from the watchdog's thread.
class FakeMarks final : public GpuMarks {
 public:
  bool Reached(uint64_t mark) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++asked_;
    return reached_.contains(mark);
  }
  void Release(uint64_t mark) override {
    std::lock_guard<std::mutex> lock(mutex_);
    released_.push_back(mark);
  }
  void Reach(uint64_t mark) {
    std::lock_guard<std::mutex> lock(mutex_);
    reached_.insert(mark);
  }
  std::vector<uint64_t> released() {
    std::lock_guard<std::mutex> lock(mutex_);
    return released_;
  }
  int asked() {
    std::lock_guard<std::mutex> lock(mutex_);
    return asked_;
  }

 private:
  std::mutex mutex_;
  std::set<uint64_t> reached_;
  std::vector<uint64_t> released_;
  int asked_ = 0;
};

TEST(PendingGpuCallsTest, ShowsTheOldestCallTheGpuHasNotFinished) {
  FakeMarks marks;
  CallProgress progress;
  {
    PendingGpuCalls pending(marks);
    pending.Refresh(progress);
    EXPECT_EQ(progress.started_ns.load(), 0) << "nothing enqueued: no call in progress";
    const int64_t before = SteadyNowNs();
    pending.Enqueued(10, static_cast<int>(Algorithm::kStragglar), 100);
    pending.Enqueued(11, static_cast<int>(Algorithm::kNative), 101);
    pending.Enqueued(12, static_cast<int>(Algorithm::kRing), 102);
    pending.Refresh(progress);
    EXPECT_EQ(progress.call.load(), 10);
    EXPECT_EQ(progress.algorithm.load(), static_cast<int>(Algorithm::kStragglar));
    EXPECT_TRUE(progress.on_gpu.load());
    EXPECT_EQ(progress.peer.load(), -1);
    EXPECT_GE(progress.started_ns.load(), before) << "started when its work was enqueued";
    const int64_t first_started = progress.started_ns.load();
    // The second finishes before the first (another stream): the first is still shown.
    marks.Reach(101);
    pending.Refresh(progress);
    EXPECT_EQ(progress.call.load(), 10);
    EXPECT_EQ(progress.started_ns.load(), first_started);
    marks.Reach(100);
    pending.Refresh(progress);
    EXPECT_EQ(progress.call.load(), 12) << "10 and 11 are done";
    EXPECT_EQ(progress.algorithm.load(), static_cast<int>(Algorithm::kRing));
    EXPECT_GT(progress.started_ns.load(), first_started);
    EXPECT_THAT(marks.released(), ElementsAre(100, 101));
    EXPECT_EQ(pending.pending(), 1u);
    marks.Reach(102);
    pending.Refresh(progress);
    EXPECT_EQ(progress.started_ns.load(), 0) << "every call finished";
    EXPECT_EQ(pending.pending(), 0u);
    pending.Enqueued(13, static_cast<int>(Algorithm::kRing), 103);
  }
  EXPECT_THAT(marks.released(), ElementsAre(100, 101, 102, 103)) << "the last, at destruction";
}

TEST(PendingGpuCallsTest, EnqueuingKeepsTheListShortAskingAtMostTwoMarks) {
  FakeMarks marks;
  PendingGpuCalls pending(marks);
  for (uint64_t mark = 0; mark < 1000; ++mark) marks.Reach(mark);
  for (int call = 0; call < 1000; ++call) {
    pending.Enqueued(call, 0, static_cast<uint64_t>(call));
    ASSERT_LE(pending.pending(), 2u) << "call " << call;
  }
  EXPECT_LE(marks.asked(), 2 * 1000);
  EXPECT_EQ(marks.released().size(), 999u);
}

// The lines a watchdog wrote, collected from its thread.
class Said {
 public:
  std::function<void(LogLevel, const std::string&)> Sink() {
    return [this](LogLevel, const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.push_back(line);
    };
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }
  // Waits (at most 10 s, a bound for a loaded machine) until `count` lines have come.
  bool WaitFor(size_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (lines().size() < count && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return lines().size() >= count;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST(CallWatchdogTest, WarnsOncePerCallThatWaitedTooLong) {
  Said said;
  CallProgress idle, stuck;
  CallWatchdog watchdog(
      {.warn_after_s = 0.02, .timeout_s = 0},
      [](const std::string&) { ADD_FAILURE() << "no timeout is set"; }, said.Sink());
  watchdog.Watch(&idle, "idle");
  watchdog.Watch(&stuck, "world");
  StartCall(stuck, 5, static_cast<int>(Algorithm::kRing), 1, 0, /*ago_s=*/1);
  ASSERT_TRUE(said.WaitFor(1));
  // Many more checks of the same call: still one line.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(said.lines().size(), 1u);
  EXPECT_THAT(said.lines()[0], HasSubstr("world: call 5 (ring) has waited "));
  EXPECT_THAT(said.lines()[0], HasSubstr(" for rank 1 in round 0 (STRAGGLAR_WARN_AFTER=20 ms)"));
  // The next call stuck too: its own line.
  StartCall(stuck, 6, static_cast<int>(Algorithm::kRing), 2, 1, /*ago_s=*/1);
  ASSERT_TRUE(said.WaitFor(2));
  EXPECT_THAT(said.lines()[1], HasSubstr("world: call 6 (ring)"));
  // A finished call is never reported.
  stuck.Finish();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(said.lines().size(), 2u);
}

TEST(CallWatchdogTest, TimeoutSaysWhyThenEndsOnce) {
  Said said;
  std::promise<std::string> ended;
  int endings = 0;
  CallProgress stuck;
  {
    CallWatchdog watchdog(
        {.warn_after_s = 0, .timeout_s = 0.05},
        [&](const std::string& line) {
          if (++endings == 1) ended.set_value(line);
        },
        said.Sink());
    watchdog.Watch(&stuck, "world");
    StartCall(stuck, 42, static_cast<int>(Algorithm::kStragglar), 3, 4, /*ago_s=*/0.06);
    std::future<std::string> line = ended.get_future();
    ASSERT_EQ(line.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_THAT(line.get(), HasSubstr("world: call 42 (stragglar) has waited "));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(endings, 1) << "the thread stops after ending";
  ASSERT_EQ(said.lines().size(), 1u);
  EXPECT_THAT(said.lines()[0],
              HasSubstr(" for rank 3 in round 4, longer than STRAGGLAR_TIMEOUT=50 ms: ending "
                        "the job"));
}

// NCCL's calls: the progress is what the GPU has not finished, brought up to date by the
// watchdog itself before each check.
TEST(CallWatchdogTest, WarnsOfWorkTheGpuHasNotFinished) {
  Said said;
  FakeMarks marks;
  CallProgress progress;
  PendingGpuCalls pending(marks);
  CallWatchdog watchdog(
      {.warn_after_s = 0.02, .timeout_s = 0},
      [](const std::string&) { ADD_FAILURE() << "no timeout is set"; }, said.Sink());
  watchdog.Watch(&progress, {.comm = "comm0", .refresh = [&] { pending.Refresh(progress); }});
  pending.Enqueued(7, static_cast<int>(Algorithm::kStragglar), 1);
  ASSERT_TRUE(said.WaitFor(1));
  EXPECT_THAT(said.lines()[0], HasSubstr("comm0: call 7 (stragglar) has waited "));
  EXPECT_THAT(said.lines()[0], HasSubstr(" for its work on the GPU (STRAGGLAR_WARN_AFTER=20 ms)"));
  // Its work finishes: the next call, finished at once, is never reported.
  marks.Reach(1);
  marks.Reach(2);
  pending.Enqueued(8, static_cast<int>(Algorithm::kStragglar), 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(said.lines().size(), 1u);
  watchdog.Unwatch(&progress);
}

// A communicator with an ending of its own (NCCL's: revoke it) ends alone; the watchdog goes on
// watching the others, and never calls the process's ending.
TEST(CallWatchdogTest, OwnEndingEndsThatCommunicatorOnly) {
  Said said;
  CallProgress first, second;
  std::mutex mutex;
  std::vector<std::string> ended;
  auto ending = [&](std::string comm) {
    return [&, comm](const std::string&) {
      std::lock_guard<std::mutex> lock(mutex);
      ended.push_back(comm);
    };
  };
  CallWatchdog watchdog(
      {.warn_after_s = 0, .timeout_s = 0.05},
      [](const std::string&) { ADD_FAILURE() << "the process's ending"; }, said.Sink());
  watchdog.Watch(&first, {.comm = "comm0", .on_timeout = ending("comm0"), .ending = "revoking"});
  watchdog.Watch(&second, {.comm = "comm1", .on_timeout = ending("comm1"), .ending = "revoking"});
  StartCall(first, 3, static_cast<int>(Algorithm::kRing), -1, -1, /*ago_s=*/1);
  ASSERT_TRUE(said.WaitFor(1));
  EXPECT_THAT(said.lines()[0], HasSubstr("comm0: call 3 (ring) has waited "));
  EXPECT_THAT(said.lines()[0], HasSubstr(", longer than STRAGGLAR_TIMEOUT=50 ms: revoking"));
  // Still stuck, but no longer watched: one ending. The other is still watched.
  StartCall(second, 4, static_cast<int>(Algorithm::kRing), -1, -1, /*ago_s=*/1);
  ASSERT_TRUE(said.WaitFor(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(said.lines().size(), 2u);
  EXPECT_THAT(said.lines()[1], HasSubstr("comm1: call 4 (ring)"));
  // The ending follows its line; waited for with a bound, as the lines are.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto ended_now = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return ended;
  };
  while (ended_now().size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_THAT(ended_now(), ElementsAre("comm0", "comm1"));
}

TEST(CallWatchdogTest, StopsPromptlyWithNothingToDo) {
  const auto start = std::chrono::steady_clock::now();
  {
    CallWatchdog watchdog({.warn_after_s = 3600, .timeout_s = 0}, [](const std::string&) {});
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(CallWatchdogSettingsTest, DefaultsAndBadValues) {
  EXPECT_EQ(PreloadConfig().warn_after_s, 30);
  EXPECT_EQ(PreloadConfig().timeout_s, 0);
  std::ostringstream log;
  PreloadConfig config = PreloadConfigFromValues(
      {{"STRAGGLAR_WARN_AFTER", "2m"}, {"STRAGGLAR_TIMEOUT", "0.5s"}}, &log);
  EXPECT_EQ(config.warn_after_s, 120);
  EXPECT_EQ(config.timeout_s, 0.5);
  EXPECT_EQ(log.str(), "");
  config = PreloadConfigFromValues({{"STRAGGLAR_WARN_AFTER", "soon"}, {"STRAGGLAR_TIMEOUT", "-1s"}},
                                   &log);
  EXPECT_EQ(config.warn_after_s, 30);
  EXPECT_EQ(config.timeout_s, 0);
  EXPECT_THAT(Lines(log.str()),
              ElementsAre("STRAGGLAR_WARN_AFTER=\"soon\" is invalid (accepted: a duration up to a "
                          "day, e.g. 30s or 5m, or 0 for never); using 30 s",
                          "STRAGGLAR_TIMEOUT=\"-1s\" is invalid (accepted: a duration up to a day, "
                          "e.g. 30s or 5m, or 0 for never); using never"));
}

}  // namespace
}  // namespace stragglar
