// A kernel that keeps one GPU thread busy for a given time, for the GPU timer tests.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace stragglar::gpu_test {

// One thread spinning on %globaltimer for `ns`, launched with <<<>>> (cudaLaunchKernel).
cudaError_t LaunchSpin(cudaStream_t stream, uint64_t ns);

// The same kernel launched through the driver's cuLaunchKernelEx, as NCCL launches its kernels
// (the entry point comes from cudaGetDriverEntryPointByVersion: nothing links libcuda).
cudaError_t LaunchSpinDriverEx(cudaStream_t stream, uint64_t ns);

}  // namespace stragglar::gpu_test
