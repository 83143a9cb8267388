#include "runtime/nccl/nccl_text_broadcast.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_scope.h"
#include "runtime/nccl/nccl_api.h"

namespace stragglar {

absl::StatusOr<std::string> BroadcastTextAtCreation(ncclComm_t comm, int device, std::string mine,
                                                    size_t capacity, absl::string_view what) {
  DeviceScope scope(device);
  std::vector<char> host(capacity, '\0');
  if (mine.size() < capacity) mine.copy(host.data(), capacity - 1);
  cudaStream_t stream = nullptr;
  char* buffer = nullptr;
  cudaError_t cuda = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (cuda == cudaSuccess) cuda = cudaMalloc(&buffer, capacity);
  ncclResult_t nccl = ncclSuccess;
  if (cuda == cudaSuccess) {
    cuda = cudaMemcpyAsync(buffer, host.data(), capacity, cudaMemcpyHostToDevice, stream);
  }
  if (cuda == cudaSuccess) {
    nccl = Api().broadcast(buffer, buffer, capacity, ncclUint8, 0, comm, stream);
  }
  if (cuda == cudaSuccess && nccl == ncclSuccess) {
    cuda = cudaMemcpyAsync(host.data(), buffer, capacity, cudaMemcpyDeviceToHost, stream);
  }
  if (cuda == cudaSuccess && nccl == ncclSuccess) cuda = cudaStreamSynchronize(stream);
  if (buffer != nullptr) cudaFree(buffer);
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (nccl != ncclSuccess) {
    return absl::InternalError(absl::StrCat("ncclBroadcast (", what, ") failed: ", nccl));
  }
  if (cuda != cudaSuccess) {
    return absl::InternalError(absl::StrCat("sharing ", what, ": ", cudaGetErrorString(cuda)));
  }
  host.back() = '\0';
  return std::string(host.data());
}

}  // namespace stragglar
