#include "kernels/cuda/cuda_peer_memory.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(PeerHandle::bytes));

absl::Status CudaError(absl::string_view call, cudaError_t code) {
  return absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorString(code)));
}

absl::StatusOr<DeviceUuid> UuidOf(int device) {
  cudaDeviceProp properties;
  if (cudaError_t code = cudaGetDeviceProperties(&properties, device); code != cudaSuccess) {
    return CudaError("cudaGetDeviceProperties", code);
  }
  DeviceUuid uuid;
  std::memcpy(uuid.bytes.data(), properties.uuid.bytes, uuid.bytes.size());
  return uuid;
}

}  // namespace

CudaPeerMemory::~CudaPeerMemory() {
  for (void* stream : streams_) {
    if (stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }
}

absl::StatusOr<void*> CudaPeerMemory::PrivateStream() {
  int device = 0;
  if (cudaError_t code = cudaGetDevice(&device); code != cudaSuccess) {
    return CudaError("cudaGetDevice", code);
  }
  if (device < 0 || device >= kMaxDevices) return absl::InternalError("device index too large");
  if (streams_[device] == nullptr) {
    cudaStream_t stream = nullptr;
    if (cudaError_t code = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        code != cudaSuccess) {
      return CudaError("cudaStreamCreateWithFlags", code);
    }
    streams_[device] = stream;
  }
  return streams_[device];
}

void CudaPeerMemory::Synchronize() { cudaDeviceSynchronize(); }

absl::StatusOr<DeviceUuid> CudaPeerMemory::OwnDevice() {
  int device = 0;
  if (cudaError_t code = cudaGetDevice(&device); code != cudaSuccess) {
    return CudaError("cudaGetDevice", code);
  }
  return UuidOf(device);
}

absl::StatusOr<bool> CudaPeerMemory::CanAccess(const DeviceUuid& uuid) {
  int own = 0, count = 0;
  if (cudaError_t code = cudaGetDevice(&own); code != cudaSuccess) {
    return CudaError("cudaGetDevice", code);
  }
  if (cudaError_t code = cudaGetDeviceCount(&count); code != cudaSuccess) {
    return CudaError("cudaGetDeviceCount", code);
  }
  // The peer's GPU as this process numbers its devices (CUDA_VISIBLE_DEVICES may differ).
  for (int device = 0; device < count; ++device) {
    absl::StatusOr<DeviceUuid> candidate = UuidOf(device);
    if (!candidate.ok()) return candidate.status();
    if (!(*candidate == uuid)) continue;
    if (device == own) return true;
    int can_access = 0;
    if (cudaError_t code = cudaDeviceCanAccessPeer(&can_access, own, device); code != cudaSuccess) {
      return CudaError("cudaDeviceCanAccessPeer", code);
    }
    return can_access != 0;
  }
  return false;  // not visible here
}

absl::StatusOr<void*> CudaPeerMemory::AllocateZeroed(size_t bytes) {
  absl::StatusOr<void*> stream = PrivateStream();
  if (!stream.ok()) return stream.status();
  void* device = nullptr;
  if (cudaError_t code = cudaMalloc(&device, bytes); code != cudaSuccess) {
    return CudaError("cudaMalloc", code);
  }
  const cudaStream_t own = static_cast<cudaStream_t>(*stream);
  if (cudaError_t code = cudaMemsetAsync(device, 0, bytes, own);
      code != cudaSuccess || (code = cudaStreamSynchronize(own)) != cudaSuccess) {
    cudaFree(device);
    return CudaError("cudaMemsetAsync", code);
  }
  return device;
}

void CudaPeerMemory::Free(void* device) { cudaFree(device); }

absl::Status CudaPeerMemory::CopyToDevice(void* device, const void* host, size_t bytes) {
  absl::StatusOr<void*> stream = PrivateStream();
  if (!stream.ok()) return stream.status();
  const cudaStream_t own = static_cast<cudaStream_t>(*stream);
  if (cudaError_t code = cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, own);
      code != cudaSuccess || (code = cudaStreamSynchronize(own)) != cudaSuccess) {
    return CudaError("cudaMemcpyAsync", code);
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaPeerMemory::AllocateMapped(size_t bytes, void** device) {
  void* host = nullptr;
  if (cudaError_t code = cudaHostAlloc(&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
      code != cudaSuccess) {
    return CudaError("cudaHostAlloc", code);
  }
  std::memset(host, 0, bytes);
  if (cudaError_t code = cudaHostGetDevicePointer(device, host, 0); code != cudaSuccess) {
    cudaFreeHost(host);
    return CudaError("cudaHostGetDevicePointer", code);
  }
  return host;
}

void CudaPeerMemory::FreeMapped(void* host) { cudaFreeHost(host); }

absl::StatusOr<PeerHandle> CudaPeerMemory::Export(void* device) {
  cudaIpcMemHandle_t handle;
  if (cudaError_t code = cudaIpcGetMemHandle(&handle, device); code != cudaSuccess) {
    return CudaError("cudaIpcGetMemHandle", code);
  }
  PeerHandle exported;
  std::memcpy(exported.bytes.data(), &handle, sizeof(handle));
  return exported;
}

absl::StatusOr<void*> CudaPeerMemory::Import(const PeerHandle& handle) {
  cudaIpcMemHandle_t imported;
  std::memcpy(&imported, handle.bytes.data(), sizeof(imported));
  void* device = nullptr;
  if (cudaError_t code = cudaIpcOpenMemHandle(&device, imported, cudaIpcMemLazyEnablePeerAccess);
      code != cudaSuccess) {
    return CudaError("cudaIpcOpenMemHandle", code);
  }
  return device;
}

void CudaPeerMemory::CloseImported(void* device) { cudaIpcCloseMemHandle(device); }

}  // namespace stragglar
