#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <ostream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace stragglar {
namespace {

// Constant-initialized, so logging works from static constructors and atexit handlers of the
// preload libraries, whatever the order of initialization.
std::atomic<LogLevel> g_level{LogLevel::kWarn};
std::atomic<int> g_rank{-1};
std::atomic<std::ostream*> g_sink{nullptr};
std::mutex g_sink_mutex;
std::mutex g_once_mutex;

// Never destroyed: a LogOnce during exit must not touch a destroyed set.
std::set<std::string, std::less<>>& OnceKeys() {
  static auto* keys = new std::set<std::string, std::less<>>();
  return *keys;
}

void WriteAll(int fd, absl::string_view data) {
  // One write in practice; the loop only finishes a partial write or retries an interrupted one.
  while (!data.empty()) {
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere to report a failure to log
    }
    data.remove_prefix(static_cast<size_t>(written));
  }
}

void WriteLine(LogLevel level, absl::string_view message) {
  const int saved_errno = errno;
  while (absl::ConsumeSuffix(&message, "\n")) {
  }
  const int rank = g_rank.load(std::memory_order_relaxed);
  std::string line = absl::StrCat(HostName(), ":", static_cast<long>(getpid()), " [",
                                  rank >= 0 ? absl::StrCat(rank) : std::string("-"), "] stragglar ",
                                  LogLevelName(level), " ");
  const size_t message_start = line.size();
  absl::StrAppend(&line, message, "\n");
  for (size_t i = message_start; i + 1 < line.size(); ++i) {
    if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
  }
  std::ostream* sink = g_sink.load(std::memory_order_acquire);
  if (sink == nullptr) {
    WriteAll(STDERR_FILENO, line);
  } else {
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    sink->write(line.data(), static_cast<std::streamsize>(line.size()));
    sink->flush();
  }
  errno = saved_errno;
}

}  // namespace

const std::string& HostName() {
  static const std::string* const name = [] {
    char buffer[256] = {};
    if (gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') {
      return new std::string("unknown-host");
    }
    return new std::string(buffer);
  }();
  return *name;
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kNone:
      return "NONE";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kTrace:
      return "TRACE";
  }
  return "UNKNOWN";
}

std::optional<LogLevel> ParseLogLevel(absl::string_view name) {
  for (LogLevel level : {LogLevel::kNone, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kTrace}) {
    if (absl::EqualsIgnoreCase(name, LogLevelName(level))) return level;
  }
  return std::nullopt;
}

void SetLogLevel(LogLevel level) { g_level.store(level, std::memory_order_relaxed); }
LogLevel GetLogLevel() { return g_level.load(std::memory_order_relaxed); }
void SetLogRank(int rank) { g_rank.store(rank < 0 ? -1 : rank, std::memory_order_relaxed); }
void SetLogSink(std::ostream* sink) { g_sink.store(sink, std::memory_order_release); }

bool LogEnabled(LogLevel level) {
  return level != LogLevel::kNone && level <= g_level.load(std::memory_order_relaxed);
}

void Log(LogLevel level, absl::string_view message) {
  if (LogEnabled(level)) WriteLine(level, message);
}

void LogAlways(LogLevel level, absl::string_view message) { WriteLine(level, message); }

void LogOnce(LogLevel level, absl::string_view key, absl::string_view message) {
  if (!LogEnabled(level)) return;
  {
    std::lock_guard<std::mutex> lock(g_once_mutex);
    if (!OnceKeys().emplace(key).second) return;
  }
  WriteLine(level, message);
}

}  // namespace stragglar
