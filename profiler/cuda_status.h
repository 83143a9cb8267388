// CUDA runtime errors as absl::Status, for the GPU call timer's files.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stragglar::gpu_timer_internal {

// `call` failed with `error`: FailedPrecondition when there is no usable GPU, Internal otherwise.
inline absl::Status CudaError(absl::string_view call, cudaError_t error) {
  // The failing call set the runtime's last error to ours; clear it so that the application's own
  // cudaGetLastError() checks do not blame their next launch for it (sticky errors stay).
  (void)cudaGetLastError();
  std::string message = absl::StrCat(call, ": ", cudaGetErrorString(error));
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace stragglar::gpu_timer_internal
