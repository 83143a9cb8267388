// The calls of a communicator whose work the GPU has not finished, oldest first, so that the call
// watchdog (runtime/call_watchdog.h) can see a call stuck on the GPU: NCCL's calls return once
// their work is enqueued, and a peer that never comes leaves that work waiting on the device
// while the host goes on, or blocks in the user's own synchronisation, where no code of ours
// runs. Each call leaves a mark behind its work on its stream (a CUDA event); the watchdog's
// thread asks the marks, oldest first, without waiting, and shows the oldest call whose mark the
// GPU has not reached as the call in progress. CUDA-free: the marks are an interface.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>

#include "kernels/exec/call_progress.h"

namespace stragglar {

// Points in streams' work (CUDA events), made by the caller, asked and freed here.
class GpuMarks {
 public:
  virtual ~GpuMarks() = default;
  // Whether the GPU has finished the work before `mark`; never waits. Safe on any thread.
  virtual bool Reached(uint64_t mark) = 0;
  // The mark is no longer asked about.
  virtual void Release(uint64_t mark) = 0;
};

class PendingGpuCalls {
 public:
  // `marks` must outlive this.
  explicit PendingGpuCalls(GpuMarks& marks) : marks_(marks) {}
  ~PendingGpuCalls();  // releases the marks still held
  PendingGpuCalls(const PendingGpuCalls&) = delete;
  PendingGpuCalls& operator=(const PendingGpuCalls&) = delete;

  // On the calling thread: call `call`, run by `algorithm` (an Algorithm as an int), has enqueued
  // its work up to `mark`. Also drops the oldest calls already finished (at most two marks asked),
  // so that the list stays short between the watchdog's checks.
  void Enqueued(int64_t call, int algorithm, uint64_t mark);
  // On the watchdog's thread: drops the finished calls, oldest first, and shows the oldest that
  // has not finished in `progress` (started when its work was enqueued, waiting on the GPU), or
  // no call when every one has.
  void Refresh(CallProgress& progress);
  size_t pending() const;

 private:
  struct Pending {
    int64_t call;
    int algorithm;
    int64_t enqueued_ns;  // SteadyNowNs
    uint64_t mark;
  };
  // Drops finished calls from the front, asking at most `limit` marks; the lock is held.
  void DropFinished(size_t limit);

  GpuMarks& marks_;
  mutable std::mutex mutex_;
  std::deque<Pending> calls_;
};

}  // namespace stragglar
