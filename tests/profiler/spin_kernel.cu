#include <cuda.h>

#include "tests/profiler/spin_kernel.h"

namespace stragglar::gpu_test {
namespace {

__device__ uint64_t GlobalTimerNs() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

__global__ void SpinKernel(uint64_t ns) {
  uint64_t start = GlobalTimerNs();
  while (GlobalTimerNs() - start < ns) {
  }
}

using LaunchKernelEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);

}  // namespace

cudaError_t LaunchSpin(cudaStream_t stream, uint64_t ns) {
  SpinKernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

cudaError_t LaunchSpinDriverEx(cudaStream_t stream, uint64_t ns) {
  static LaunchKernelEx launch = nullptr;
  if (launch == nullptr) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &fn, 12000, cudaEnableDefault, &found);
    if (err != cudaSuccess) return err;
    if (found != cudaDriverEntryPointSuccess || fn == nullptr) return cudaErrorSymbolNotFound;
    launch = reinterpret_cast<LaunchKernelEx>(fn);
  }
  cudaFunction_t function;
  if (cudaError_t err = cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(&SpinKernel));
      err != cudaSuccess) {
    return err;
  }
  CUlaunchConfig config = {};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.hStream = reinterpret_cast<CUstream>(stream);
  void* args[] = {&ns};
  CUresult result = launch(&config, reinterpret_cast<CUfunction>(function), args, nullptr);
  return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorLaunchFailure;
}

}  // namespace stragglar::gpu_test
