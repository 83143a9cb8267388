#include "runtime/pending_gpu_calls.h"

#include <limits>

namespace stragglar {

PendingGpuCalls::~PendingGpuCalls() {
  for (const Pending& pending : calls_) marks_.Release(pending.mark);
}

void PendingGpuCalls::DropFinished(size_t limit) {
  for (size_t asked = 0; asked < limit && !calls_.empty(); ++asked) {
    if (!marks_.Reached(calls_.front().mark)) return;
    marks_.Release(calls_.front().mark);
    calls_.pop_front();
  }
}

void PendingGpuCalls::Enqueued(int64_t call, int algorithm, uint64_t mark) {
  std::lock_guard<std::mutex> lock(mutex_);
  DropFinished(2);
  calls_.push_back(
      {.call = call, .algorithm = algorithm, .enqueued_ns = SteadyNowNs(), .mark = mark});
}

void PendingGpuCalls::Refresh(CallProgress& progress) {
  std::lock_guard<std::mutex> lock(mutex_);
  DropFinished(std::numeric_limits<size_t>::max());
  if (calls_.empty()) {
    progress.Finish();
    return;
  }
  const Pending& oldest = calls_.front();
  if (progress.started_ns.load(std::memory_order_relaxed) == oldest.enqueued_ns) return;
  progress.call.store(oldest.call, std::memory_order_relaxed);
  progress.algorithm.store(oldest.algorithm, std::memory_order_relaxed);
  progress.Waiting(-1, -1);
  progress.on_gpu.store(true, std::memory_order_relaxed);
  progress.started_ns.store(oldest.enqueued_ns, std::memory_order_relaxed);
}

size_t PendingGpuCalls::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_.size();
}

}  // namespace stragglar
