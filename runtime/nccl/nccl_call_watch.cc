#include "runtime/nccl/nccl_call_watch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace stragglar {

NcclCallWatch::NcclCallWatch(CallWatchdog& watchdog, int device, std::string comm,
                             std::function<void(const std::string&)> on_timeout)
    : watchdog_(watchdog), marks_(device), pending_(marks_) {
  watchdog_.Watch(&progress_, {.comm = std::move(comm),
                               .refresh = [this] { pending_.Refresh(progress_); },
                               .on_timeout = std::move(on_timeout),
                               .ending = "revoking the communicator; its calls fail from now on"});
}

NcclCallWatch::~NcclCallWatch() { Stop(); }

void NcclCallWatch::Stop() { watchdog_.Unwatch(&progress_); }

void NcclCallWatch::Enqueued(const CallDecision& ran, cudaStream_t stream) {
  absl::StatusOr<uint64_t> mark = marks_.Record(stream);
  if (!mark.ok()) {
    LogOnce(LogLevel::kWarn, "watchdog-mark",
            absl::StrCat("the watchdog cannot see a call's GPU work: ", mark.status().message()));
    return;
  }
  pending_.Enqueued(ran.call, static_cast<int>(ran.algorithm), *mark);
}

}  // namespace stragglar
