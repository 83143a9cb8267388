#include "runtime/call_watchdog.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/units.h"
#include "kernels/plan/plan.h"

namespace stragglar {
namespace {

// A few checks per warning period, so that a line comes at most a quarter late; never busier
// than every 10 ms nor lazier than every second.
std::chrono::nanoseconds CheckPeriod(const WatchdogOptions& options) {
  double period_s = 1.0;
  for (double limit : {options.warn_after_s, options.timeout_s}) {
    if (limit > 0) period_s = std::min(period_s, limit / 4);
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(std::max(period_s, 0.01) * 1e9));
}

}  // namespace

std::string DescribeWait(absl::string_view comm, const CallProgress& progress, double waited_s,
                         const AbsentRanks& absent) {
  const int algorithm = progress.algorithm.load(std::memory_order_relaxed);
  const int32_t peer = progress.peer.load(std::memory_order_relaxed);
  const int32_t round = progress.round.load(std::memory_order_relaxed);
  std::string runs;
  if (algorithm < 0) {
    runs = "deciding";
  } else if (static_cast<Algorithm>(algorithm) == Algorithm::kNative) {
    runs = "the library's own AllReduce";
  } else {
    runs = std::string(AlgorithmName(static_cast<Algorithm>(algorithm)));
  }
  std::string line = absl::StrCat(comm, ": call ", progress.call.load(std::memory_order_relaxed),
                                  " (", runs, ") has waited ", FormatSeconds(waited_s));
  if (progress.on_gpu.load(std::memory_order_relaxed)) {
    absl::StrAppend(&line, " for its work on the GPU");
  }
  if (peer >= 0) {
    absl::StrAppend(&line, " for rank ", peer);
    if (round >= 0) absl::StrAppend(&line, " in round ", round);
  } else if (algorithm >= 0 && static_cast<Algorithm>(algorithm) == Algorithm::kNative) {
    absl::StrAppend(
        &line, " (",
        absent != nullptr ? absent() : "which ranks have not entered it is not known here", ")");
  }
  return line;
}

CallWatchdog::CallWatchdog(WatchdogOptions options,
                           std::function<void(const std::string&)> on_timeout,
                           std::function<void(LogLevel, const std::string&)> say)
    : options_(options),
      on_timeout_(std::move(on_timeout)),
      say_(say != nullptr ? std::move(say)
                          : [](LogLevel level, const std::string& line) { Log(level, line); }),
      thread_([this] { Loop(); }) {}

CallWatchdog::~CallWatchdog() { Stop(); }

void CallWatchdog::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void CallWatchdog::Watch(const CallProgress* progress, std::string comm, AbsentRanks absent) {
  Watch(progress, {.comm = std::move(comm), .absent = std::move(absent)});
}

void CallWatchdog::Watch(const CallProgress* progress, WatchOptions options) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_[progress] = {.options = std::move(options)};
}

void CallWatchdog::Unwatch(const CallProgress* progress) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_.erase(progress);
}

bool CallWatchdog::CheckAll(int64_t now_ns) {
  for (auto it = watched_.begin(); it != watched_.end();) {
    const CallProgress* progress = it->first;
    Watched& watched = it->second;
    const WatchOptions& options = watched.options;
    if (options.refresh != nullptr) options.refresh();
    const int64_t started = progress->started_ns.load(std::memory_order_relaxed);
    const double waited_s = static_cast<double>(now_ns - started) * 1e-9;
    if (started != 0 && options_.timeout_s > 0 && waited_s >= options_.timeout_s) {
      const bool own_ending = options.on_timeout != nullptr;
      const std::string line =
          absl::StrCat(DescribeWait(options.comm, *progress, waited_s, options.absent),
                       ", longer than STRAGGLAR_TIMEOUT=", FormatSeconds(options_.timeout_s), ": ",
                       own_ending ? options.ending : "ending the job");
      say_(LogLevel::kWarn, line);
      if (!own_ending) {
        on_timeout_(line);
        return true;
      }
      // This communicator's own ending: the others stay watched.
      const std::function<void(const std::string&)> on_timeout = options.on_timeout;
      it = watched_.erase(it);
      on_timeout(line);
      continue;
    }
    if (started != 0 && options_.warn_after_s > 0 && waited_s >= options_.warn_after_s &&
        watched.warned_started_ns != started) {
      watched.warned_started_ns = started;
      say_(LogLevel::kWarn,
           absl::StrCat(DescribeWait(options.comm, *progress, waited_s, options.absent),
                        " (STRAGGLAR_WARN_AFTER=", FormatSeconds(options_.warn_after_s), ")"));
    }
    ++it;
  }
  return false;
}

void CallWatchdog::Loop() {
  const std::chrono::nanoseconds period = CheckPeriod(options_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, period, [this] { return stopping_; });
    if (stopping_) return;
    if (CheckAll(SteadyNowNs())) return;
  }
}

}  // namespace stragglar
