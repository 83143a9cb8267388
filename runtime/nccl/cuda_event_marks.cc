#include "runtime/nccl/cuda_event_marks.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_scope.h"

namespace stragglar {

CudaEventMarks::~CudaEventMarks() {
  DeviceScope scope(device_);
  for (cudaEvent_t event : events_) cudaEventDestroy(event);
}

absl::StatusOr<uint64_t> CudaEventMarks::Record(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) {
    cudaEvent_t event = nullptr;
    if (cudaError_t code = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
        code != cudaSuccess) {
      return absl::InternalError(
          absl::StrCat("cudaEventCreateWithFlags (watchdog mark): ", cudaGetErrorString(code)));
    }
    free_.push_back(events_.size());
    events_.push_back(event);
  }
  const uint64_t mark = free_.back();
  if (cudaError_t code = cudaEventRecord(events_[mark], stream); code != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("cudaEventRecord (watchdog mark): ", cudaGetErrorString(code)));
  }
  free_.pop_back();
  return mark;
}

bool CudaEventMarks::Reached(uint64_t mark) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    event = events_[mark];
  }
  // The watchdog's own thread: the device is set and left set. A scope would restore device 0,
  // a fresh thread's, and make a context there.
  (void)cudaSetDevice(device_);
  // Relaxed for this thread: a query in the default (global) mode would invalidate a graph that
  // another thread of the job is capturing.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  const bool reached = cudaEventQuery(event) != cudaErrorNotReady;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  return reached;
}

void CudaEventMarks::Release(uint64_t mark) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(mark);
}

}  // namespace stragglar
