// Runs our CUDA kernels on the CPU, to check them where no GPU is present (CI, developer
// machines). Include this first in one translation unit compiled by the host compiler, then the
// .cu files to check (kernels/reduce/cuda_reduce.cu, tests/gpu/reduce_check.cu): it makes the CUDA
// keywords plain C++, gives every kernel launch to EmulateLaunch, which runs each block and each
// thread of the grid in turn, and implements the runtime functions those files call with host
// memory ("device" pointers are 256-byte aligned like cudaMalloc's).
//
// This is only valid for kernels whose threads never communicate (no shared memory, barriers,
// warp functions or atomics): ours are element-wise. It checks what the compiler cannot: which
// elements each thread touches, the head/vector/tail split, the alignment paths, and that the
// element rules in every path are the CPU's. It says nothing about speed or about nvcc's code.
#pragma once

#if defined(__CUDACC__)
#error "cuda_emulation.h is for the host compiler; nvcc builds the real kernels"
#endif

#define STRAGGLAR_CUDA_EMULATION 1

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

// nvcc's attributes and built-in variables (host_defines.h already makes __global__, __device__,
// __host__ empty and __forceinline__ an always-inline function for the host compiler).
#define __launch_bounds__(...)
inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;

// The launch `kernel<<<blocks, threads, 0, stream>>>(args...)`, one thread after another.
template <typename... Parameters, typename... Arguments>
void EmulateLaunch(void (*kernel)(Parameters...), int blocks, int threads, cudaStream_t,
                   Arguments&&... arguments) {
  gridDim = dim3(blocks);
  blockDim = dim3(threads);
  for (int block = 0; block < blocks; ++block) {
    for (int thread = 0; thread < threads; ++thread) {
      blockIdx = uint3{static_cast<unsigned>(block), 0, 0};
      threadIdx = uint3{static_cast<unsigned>(thread), 0, 0};
      kernel(arguments...);
    }
  }
}

// SMs of the emulated device: few, so that grid-stride loops go around many times.
inline constexpr int kEmulatedSmCount = 2;

struct CUstream_st {};
struct CUevent_st {
  std::chrono::steady_clock::time_point time;
};

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  *value = attribute == cudaDevAttrMultiProcessorCount ? kEmulatedSmCount : 0;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  std::memset(properties, 0, sizeof(*properties));
  std::strcpy(properties->name, "CPU emulation (tests/gpu/cuda_emulation.h)");
  properties->multiProcessorCount = kEmulatedSmCount;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    default:
      return "emulated CUDA error";
  }
}
const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    default:
      return "cudaErrorUnknown";
  }
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  constexpr size_t kAlignment = 256;
  *pointer = std::aligned_alloc(
      kAlignment, std::max<size_t>(1, (bytes + kAlignment - 1) / kAlignment * kAlignment));
  return *pointer != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* destination, const void* source, size_t bytes, cudaMemcpyKind) {
  if (bytes > 0) std::memcpy(destination, source, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* destination, const void* source, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(destination, source, bytes, kind);
}
cudaError_t cudaMemset(void* pointer, int value, size_t bytes) {
  if (bytes > 0) std::memset(pointer, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t) {
  return cudaMemset(pointer, value, bytes);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  event->time = std::chrono::steady_clock::now();
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  *milliseconds = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return cudaSuccess;
}

}  // extern "C"
