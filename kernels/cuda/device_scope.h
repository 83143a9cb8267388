// Sets the current CUDA device for a scope and restores the caller's. Streams, events and
// allocations belong to the device that is current when they are made (and must be freed there),
// while the thread we run on belongs to the application (or NCCL), which expects its own device
// to be current when we return.
#pragma once

#include <cuda_runtime_api.h>

namespace stragglar {

// Makes `device` current until the end of the scope, then makes the caller's device current again
// if it no longer is, also when the work inside the scope switched devices itself. Errors are
// ignored: when the current device cannot be read, the scope changes nothing, and when it cannot
// be set, the CUDA calls inside the scope report the failure.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) return;
    previous_ = current;
    if (current != device) (void)cudaSetDevice(device);
  }
  ~DeviceScope() {
    int current = -1;
    if (previous_ >= 0 && cudaGetDevice(&current) == cudaSuccess && current != previous_) {
      (void)cudaSetDevice(previous_);
    }
  }

  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;  // the caller's device; -1 when unknown (nothing to restore)
};

}  // namespace stragglar
