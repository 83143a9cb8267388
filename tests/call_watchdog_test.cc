// The call watchdog (runtime/call_watchdog.h): the line it writes for a stuck call, one warning
// per call, the timeout's line and ending, and its settings.
#include "runtime/call_watchdog.h"

#include <chrono>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/plan.h"
#include "runtime/env_config.h"
#include "tests/fake_env.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A call started `ago_s` ago, run by `algorithm` (-1: not decided), waiting on peer and round.
void StartCall(CallProgress& progress, int64_t call, int algorithm, int peer, int round,
               double ago_s = 0) {
  progress.Start();
  progress.started_ns.store(SteadyNowNs() - static_cast<int64_t>(ago_s * 1e9));
  progress.call.store(call);
  progress.algorithm.store(algorithm);
  progress.Waiting(peer, round);
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
