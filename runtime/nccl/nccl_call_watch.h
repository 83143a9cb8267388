// What the call watchdog (runtime/call_watchdog.h) sees of one NCCL communicator's calls: each
// handled call leaves a CUDA event behind its work (runtime/nccl/cuda_event_marks.h), and the
// watchdog's thread shows the oldest call whose work the GPU has not finished as the call in
// progress (runtime/pending_gpu_calls.h): NCCL's calls return once enqueued, so a call stuck on a
// peer shows only on the GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "runtime/call_watchdog.h"
#include "runtime/comm_backend.h"
#include "runtime/nccl/cuda_event_marks.h"
#include "runtime/pending_gpu_calls.h"

namespace stragglar {

class NcclCallWatch {
 public:
  // Watched by `watchdog` (which must outlive this) under `comm` from now until destroyed; the
  // calls' work runs on `device`. `on_timeout`, on the watchdog's thread after the
  // STRAGGLAR_TIMEOUT line, ends the communicator (revokes it): the process is the job's.
  NcclCallWatch(CallWatchdog& watchdog, int device, std::string comm,
                std::function<void(const std::string&)> on_timeout);
  ~NcclCallWatch();  // unwatched first: no check runs on it from then on
  // Unwatched now, from any thread but the watchdog's: returns once an ending in progress
  // (`on_timeout`, which runs under the watchdog's lock) has returned, and none comes after.
  // Once or more; Enqueued stays safe on the calling thread.
  void Stop();
  NcclCallWatch(const NcclCallWatch&) = delete;
  NcclCallWatch& operator=(const NcclCallWatch&) = delete;

  // On the calling thread: `ran` has enqueued its work on `stream` (of `device`, current). A call
  // whose mark cannot be recorded is not watched (said once).
  void Enqueued(const CallDecision& ran, cudaStream_t stream);

 private:
  CallWatchdog& watchdog_;
  CudaEventMarks marks_;
  PendingGpuCalls pending_;  // after marks_, whose marks it releases
  CallProgress progress_;
};

}  // namespace stragglar
