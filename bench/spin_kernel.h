// The injected straggler of stragglar-bench: a kernel that keeps one stream busy for a given time
// before the rank's AllReduce, like a rank whose compute ran long.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace stragglar {

// Enqueues a one-thread kernel on `stream` that spins until `nanoseconds` have passed on the GPU's
// global timer (%globaltimer: nanoseconds, advancing in steps of about 1 us on current GPUs).
// One thread of one block: it occupies a single SM slot, so other work may run beside it. Returns
// the launch's error (cudaSuccess when enqueued); nanoseconds <= 0 launches nothing.
cudaError_t LaunchSpinKernel(int64_t nanoseconds, cudaStream_t stream);

}  // namespace stragglar
