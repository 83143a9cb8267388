// A thread that watches the calls in progress (kernels/exec/call_progress.h) of a process's
// communicators, so that a call stuck on a peer that never comes is reported instead of waiting
// in silence: one warning once it has waited STRAGGLAR_WARN_AFTER, naming the call, what runs it
// and the rank and round it waits for; and with STRAGGLAR_TIMEOUT one error line, then the
// caller's ending (the MPI library: its outputs written, MPI_Abort; the NCCL library: the
// communicator revoked, its outputs written, its calls failing from then on). The calling thread
// only stores a few atomics per call and round; the watchdog wakes a few times per warning period.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/string_view.h"
#include "base/log.h"
#include "kernels/exec/call_progress.h"

namespace stragglar {

struct WatchdogOptions {
  double warn_after_s = 30;  // 0: never warn
  double timeout_s = 0;      // 0: never end the job
};

// Who has not entered the call in progress, where the caller can know it for the library's own
// collective (whose waits it cannot see), e.g. "rank 3 has not entered it"; null where not.
using AbsentRanks = std::function<std::string()>;

// The line for a call of `comm` that has waited `waited_s`, e.g.
//   world: call 1200 (stragglar) has waited 30 s for rank 3 in round 2
//   world: call 7 (the library's own AllReduce) has waited 30 s (rank 3 has not entered it)
// `absent` says who has not entered the library's own collective; "which ranks have not entered
// it is not known here" without it.
std::string DescribeWait(absl::string_view comm, const CallProgress& progress, double waited_s,
                         const AbsentRanks& absent = nullptr);

class CallWatchdog {
 public:
  // `say` writes a line (Log by default; tests collect them). `on_timeout`, called once on the
  // watchdog's thread after the error line with that line, must end the process; the watchdog
  // stops after it. A communicator watched with an ending of its own takes that instead.
  CallWatchdog(WatchdogOptions options, std::function<void(const std::string&)> on_timeout,
               std::function<void(LogLevel, const std::string&)> say = nullptr);
  ~CallWatchdog();  // Stop()
  // Stops the thread (at exit, before CUDA goes: the NCCL library's checks ask CUDA); Watch and
  // Unwatch still work, and nothing is checked any more. Once or more.
  void Stop();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  // How one communicator's calls are watched. Every function given is called on the watchdog's
  // thread, with the watchdog's lock held, and must be safe there.
  struct WatchOptions {
    std::string comm;    // its name in the lines
    AbsentRanks absent;  // who has not entered the library's own call; null: not known
    // Brings the progress up to date before each check, where the calling thread cannot: NCCL's
    // calls return once enqueued, and only a poll of the GPU says that their work finished.
    std::function<void()> refresh;
    // This communicator's ending on STRAGGLAR_TIMEOUT, in place of the watchdog's (which ends
    // the process), called after the line, which ends with `ending`; the communicator is no
    // longer watched from then on, the others still are.
    std::function<void(const std::string&)> on_timeout;
    std::string ending;
  };
  // Watches `progress` (which must stay alive until Unwatch) under the name `comm`.
  void Watch(const CallProgress* progress, std::string comm, AbsentRanks absent = nullptr);
  void Watch(const CallProgress* progress, WatchOptions options);
  // From then on no function of its WatchOptions is called.
  void Unwatch(const CallProgress* progress);

 private:
  struct Watched {
    WatchOptions options;
    int64_t warned_started_ns = 0;  // the call last warned about (its start)
  };
  void Loop();
  // Checks every watched call once at `now_ns`; true when one timed out (the thread then stops).
  bool CheckAll(int64_t now_ns);

  const WatchdogOptions options_;
  const std::function<void(const std::string&)> on_timeout_;
  const std::function<void(LogLevel, const std::string&)> say_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<const CallProgress*, Watched> watched_;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace stragglar
