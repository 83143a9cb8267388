// The marks of PendingGpuCalls (runtime/pending_gpu_calls.h) as CUDA events of one device: one
// recorded on the call's stream behind its work, from a pool (created once, without timing, the
// cheapest to record), asked with cudaEventQuery on the watchdog's thread with the device made
// current there first, so that no thread of ours makes a context on another device, and in the
// relaxed capture mode, so that a query never breaks a CUDA graph another thread captures.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/pending_gpu_calls.h"

namespace stragglar {

class CudaEventMarks final : public GpuMarks {
 public:
  explicit CudaEventMarks(int device) : device_(device) {}
  ~CudaEventMarks() override;  // destroys the pool's events
  CudaEventMarks(const CudaEventMarks&) = delete;
  CudaEventMarks& operator=(const CudaEventMarks&) = delete;

  // A mark behind the work enqueued so far on `stream` (of this device, which is current).
  absl::StatusOr<uint64_t> Record(cudaStream_t stream);
  // cudaEventQuery: reached unless it says not ready. A failed query (a context broken by a
  // fault) counts as reached: the work is over, one way or the other. Leaves this device current:
  // for the watchdog's thread, or a caller inside a DeviceScope of this device.
  bool Reached(uint64_t mark) override;
  void Release(uint64_t mark) override;

 private:
  const int device_;
  std::mutex mutex_;
  std::vector<cudaEvent_t> events_;  // the pool; a mark is an index into it
  std::vector<uint64_t> free_;       // indices not in use
};

}  // namespace stragglar
