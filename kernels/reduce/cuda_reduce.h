// CUDA reduction kernels: the GPU executor's counterpart of kernels/reduce/reduce.h. The element
// rules (fp16/bf16 computed in float and rounded to nearest even once, NaN handling of max/min,
// wrapping integer sums and products, exactly rounded averages) are the same code on both sides
// (kernels/reduce/reduce_element.h), so a reduction gives the same bits on the CPU and on the GPU,
// with one exception: a NaN that sum, prod or avg produce is NaN on both, but its sign and payload
// are the hardware's. NVIDIA GPUs return the canonical NaN (0x7fffffff for float), x86 the NaN
// operand (the first one when both are; the compiler may swap the operands of a sum or product)
// or the default NaN (0xffc00000, e.g. for inf - inf). max and min select an operand, so their
// NaNs match bit for bit too.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/reduce/reduce.h"

namespace stragglar {

// out[i] = first[i] (op) second[i] for i in [0, count), enqueued on `stream`; `first` == nullptr
// means in place (out[i] = out[i] (op) second[i]). Bit-identical to Reduce() / ReduceInto() for
// every type and operator (kAvg sums; LaunchFinalizeReduction divides). Pointers are device
// memory of the stream's device; any alignment works (16-byte vector accesses when all three
// pointers allow them). `out` must not overlap `first` or `second` otherwise. Returns the launch's
// error (cudaSuccess when enqueued); count <= 0 launches nothing.
cudaError_t LaunchReduce(DataType type, ReduceOp op, void* out, const void* first,
                         const void* second, int64_t count, cudaStream_t stream);

// FinalizeReduction() on the device: kAvg divides every element by num_ranks (with the CPU's
// rounding); other operators launch nothing.
cudaError_t LaunchFinalizeReduction(DataType type, ReduceOp op, void* data, int64_t count,
                                    int num_ranks, cudaStream_t stream);

}  // namespace stragglar
