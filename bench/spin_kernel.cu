#include "bench/spin_kernel.h"

namespace stragglar {
namespace {

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void SpinKernel(uint64_t nanoseconds) {
  const uint64_t start = GlobalTimerNs();
  while (GlobalTimerNs() - start < nanoseconds) {
  }
}

}  // namespace

cudaError_t LaunchSpinKernel(int64_t nanoseconds, cudaStream_t stream) {
  if (nanoseconds <= 0) return cudaSuccess;
  SpinKernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(nanoseconds));
  return cudaGetLastError();
}

}  // namespace stragglar
