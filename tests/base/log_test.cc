// The log lines every part of the preloads writes (base/log.h): levels, the line's prefix, one
// line per message, and lines that stay whole when threads log at once.
#include "base/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_env.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    SetLogSink(nullptr);
    SetLogLevel(LogLevel::kWarn);
    SetLogRank(-1);
  }
};

TEST_F(LogTest, LevelNames) {
  EXPECT_EQ(LogLevelName(LogLevel::kInfo), "INFO");
  EXPECT_EQ(ParseLogLevel("trace"), LogLevel::kTrace);
  EXPECT_EQ(ParseLogLevel("None"), LogLevel::kNone);
  EXPECT_EQ(ParseLogLevel("verbose"), std::nullopt);
}

TEST_F(LogTest, DefaultLevelIsWarn) { EXPECT_EQ(GetLogLevel(), LogLevel::kWarn); }

TEST_F(LogTest, LevelFiltering) {
  std::ostringstream sink;
  SetLogSink(&sink);
  SetLogLevel(LogLevel::kWarn);
  EXPECT_TRUE(LogEnabled(LogLevel::kWarn));
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  Log(LogLevel::kInfo, "hidden");
  Log(LogLevel::kTrace, "hidden too");
  EXPECT_EQ(sink.str(), "");
  Log(LogLevel::kWarn, "shown");
  EXPECT_THAT(Lines(sink.str()), ElementsAre(Prefix("-", "WARN") + "shown"));

  sink.str("");
  SetLogLevel(LogLevel::kInfo);
  Log(LogLevel::kInfo, "now shown");
  Log(LogLevel::kTrace, "still hidden");
  EXPECT_THAT(Lines(sink.str()), ElementsAre(Prefix("-", "INFO") + "now shown"));

  sink.str("");
  SetLogLevel(LogLevel::kNone);
  EXPECT_FALSE(LogEnabled(LogLevel::kWarn));
  EXPECT_FALSE(LogEnabled(LogLevel::kNone));
  Log(LogLevel::kWarn, "silenced");
  EXPECT_EQ(sink.str(), "");
  LogAlways(LogLevel::kWarn, "always");
  EXPECT_THAT(Lines(sink.str()), ElementsAre(Prefix("-", "WARN") + "always"));
}

TEST_F(LogTest, LineFormat) {
  std::ostringstream sink;
  SetLogSink(&sink);
  SetLogLevel(LogLevel::kTrace);
  Log(LogLevel::kWarn, "before the rank");
  SetLogRank(3);
  Log(LogLevel::kWarn, "straggler is rank 7");
  Log(LogLevel::kTrace, "multi\nline\n");
  const std::string host = SystemHostName();
  ASSERT_FALSE(host.empty());
  EXPECT_THAT(
      Lines(sink.str()),
      ElementsAre(absl::StrCat(host, ":", getpid(), " [-] stragglar WARN before the rank"),
                  absl::StrCat(host, ":", getpid(), " [3] stragglar WARN straggler is rank 7"),
                  absl::StrCat(host, ":", getpid(), " [3] stragglar TRACE multi line")));
}

TEST_F(LogTest, PreservesErrno) {
  std::ostringstream sink;
  SetLogSink(&sink);
  errno = EAGAIN;
  Log(LogLevel::kWarn, "message");
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(LogTest, LogOnceLogsOncePerKey) {
  std::ostringstream sink;
  SetLogSink(&sink);
  SetLogLevel(LogLevel::kWarn);
  // Filtered out: does not use up the key.
  LogOnce(LogLevel::kInfo, "log-once-test-a", "first a");
  SetLogLevel(LogLevel::kInfo);
  for (int i = 0; i < 3; ++i) {
    LogOnce(LogLevel::kInfo, "log-once-test-a", absl::StrCat("a ", i));
    LogOnce(LogLevel::kWarn, "log-once-test-b", absl::StrCat("b ", i));
  }
  EXPECT_THAT(Lines(sink.str()),
              ElementsAre(Prefix("-", "INFO") + "a 0", Prefix("-", "WARN") + "b 0"));
}

constexpr int kThreads = 8;
constexpr int kMessagesPerThread = 500;

void LogFromThreads() {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int m = 0; m < kMessagesPerThread; ++m) {
        // Long enough that a torn write would show.
        Log(LogLevel::kInfo,
            absl::StrCat("thread ", t, " message ", m, " ", std::string(200, 'x')));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

// Every line whole and well-formed, every message exactly once.
void ExpectWholeLines(const std::string& text) {
  const std::vector<std::string> lines = Lines(text);
  EXPECT_EQ(lines.size(), static_cast<size_t>(kThreads * kMessagesPerThread));
  const std::string prefix = Prefix("5", "INFO");
  std::set<std::pair<int, int>> seen;
  for (const std::string& line : lines) {
    ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
    int t = -1;
    int m = -1;
    char tail[256] = {};
    ASSERT_EQ(std::sscanf(line.c_str() + prefix.size(), "thread %d message %d %255s", &t, &m, tail),
              3)
        << line;
    EXPECT_EQ(std::string(tail), std::string(200, 'x')) << line;
    EXPECT_EQ(line.size(),
              prefix.size() + absl::StrCat("thread ", t, " message ", m, " ").size() + 200)
        << line;
    EXPECT_TRUE(seen.emplace(t, m).second) << "duplicate: " << line;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kMessagesPerThread));
}

TEST_F(LogTest, ConcurrentLinesStayWholeOnAStream) {
  std::ostringstream sink;
  SetLogSink(&sink);
  SetLogLevel(LogLevel::kInfo);
  SetLogRank(5);
  LogFromThreads();
  ExpectWholeLines(sink.str());
}

TEST_F(LogTest, ConcurrentLinesStayWholeOnStderr) {
  SetLogLevel(LogLevel::kInfo);
  SetLogRank(5);
  const std::string path = ::testing::TempDir() + "/log_test_stderr.log";
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
  ASSERT_GE(file, 0);
  fflush(stderr);
  const int saved_stderr = dup(STDERR_FILENO);
  ASSERT_GE(saved_stderr, 0);
  ASSERT_GE(dup2(file, STDERR_FILENO), 0);
  LogFromThreads();
  dup2(saved_stderr, STDERR_FILENO);
  close(saved_stderr);
  close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ExpectWholeLines(text.str());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace stragglar
