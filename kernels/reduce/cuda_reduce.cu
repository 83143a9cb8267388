// CUDA reduction kernels (kernels/reduce/cuda_reduce.h). The element rules are reduce_element.h's,
// the same code the CPU kernels run, so a reduction gives the same bits on both; the element loops
// (which elements each GPU thread handles, and how it reaches memory) are cuda_elementwise.h's.
//
// One kernel template covers every type, operator and access path, run by the whole grid. The
// grid is sized from the device's SM count (kBlocksPerSm blocks of kThreadsPerBlock threads
// per SM, which __launch_bounds__ makes resident), and smaller for small counts.
//
// tests/gpu/reduce_check.cu checks every type x operator x path against the CPU kernels byte for
// byte (on a GPU, and on the CPU through tests/gpu/cuda_emulation.h, which compiles this file as
// plain C++ and runs every block and thread in turn).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "kernels/reduce/cuda_elementwise.h"
#include "kernels/reduce/cuda_reduce.h"
#include "kernels/reduce/reduce_element.h"

namespace stragglar {
namespace {

using cuda_elementwise::AccessChoice;
using cuda_elementwise::AccessKind;
using cuda_elementwise::DivideFunction;
using cuda_elementwise::ElementwiseOnThreads;
using cuda_elementwise::kUnroll;
using cuda_elementwise::Operands;
using cuda_elementwise::PickAccess;
using cuda_elementwise::ReduceFunction;
using cuda_elementwise::Unaligned;
using reduce_element::CodecTag;
using reduce_element::OpTag;

constexpr int kThreadsPerBlock = 256;
// Resident blocks per SM the grid is sized for; __launch_bounds__ caps the registers so that they
// fit (1,024 threads per SM: half of an A100's or H100's maximum, plenty for a streaming kernel).
constexpr int kBlocksPerSm = 4;

// The kernel: the whole grid runs ElementwiseOnThreads.
template <Operands kOperands, typename Storage, typename Access, typename Element,
          typename Function>
__global__ void __launch_bounds__(kThreadsPerBlock, kBlocksPerSm)
    ElementwiseKernel(Element* __restrict__ out, const Element* __restrict__ first,
                      const Element* __restrict__ second, int64_t count, int64_t head,
                      Function function) {
  ElementwiseOnThreads<kOperands, Storage, Access, Element>(
      out, first, second, count, head, function,
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
      static_cast<int64_t>(gridDim.x) * blockDim.x);
}

// Blocks that fill the current device: kBlocksPerSm per SM. The SM count is asked once per device.
cudaError_t MaxBlocks(int* blocks) {
  constexpr int kMaxCachedDevices = 64;
  static std::atomic<int> sm_counts[kMaxCachedDevices];
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  const bool cached = device >= 0 && device < kMaxCachedDevices;
  int sm_count = cached ? sm_counts[device].load(std::memory_order_relaxed) : 0;
  if (sm_count <= 0) {
    error = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
    if (error != cudaSuccess) return error;
    if (cached) sm_counts[device].store(sm_count, std::memory_order_relaxed);
  }
  *blocks = std::max(1, sm_count) * kBlocksPerSm;
  return cudaSuccess;
}

template <Operands kOperands, typename Storage, typename Access, typename Element,
          typename Function>
cudaError_t LaunchKernel(void* out, const void* first, const void* second, int64_t count,
                         int64_t head, const Function& function, cudaStream_t stream) {
  int max_blocks = 0;
  const cudaError_t error = MaxBlocks(&max_blocks);
  if (error != cudaSuccess) return error;
  constexpr int64_t kLanes = sizeof(Access) / sizeof(Element);
  constexpr int64_t kAccessesPerBlock =
      int64_t{kThreadsPerBlock} * kUnroll<Access, Element, Function>;
  const int64_t accesses = (count - head) / kLanes;
  // At least one block: the head and tail need up to kLanes - 1 threads each.
  const int64_t wanted =
      std::max<int64_t>(1, (accesses + kAccessesPerBlock - 1) / kAccessesPerBlock);
  const int blocks = static_cast<int>(std::min<int64_t>(wanted, max_blocks));
  auto* const kernel = &ElementwiseKernel<kOperands, Storage, Access, Element, Function>;
  Element* const out_elements = static_cast<Element*>(out);
  const Element* const first_elements = static_cast<const Element*>(first);
  const Element* const second_elements = static_cast<const Element*>(second);
#if defined(STRAGGLAR_CUDA_EMULATION)
  // tests/gpu/cuda_emulation.h: runs every block and thread of the launch on the CPU.
  EmulateLaunch(kernel, blocks, kThreadsPerBlock, stream, out_elements, first_elements,
                second_elements, count, head, function);
#else
  // clang-format 14 would split the launch's >>>.
  // clang-format off
  kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(out_elements, first_elements, second_elements,
                                                  count, head, function);
  // clang-format on
#endif
  return cudaGetLastError();
}

// The kernel for the widest access every buffer's alignment allows (PickAccess).
template <Operands kOperands, typename Storage, typename Function>
cudaError_t LaunchElementwise(void* out, const void* first, const void* second, int64_t count,
                              const Function& function, cudaStream_t stream) {
  const AccessChoice access = PickAccess<kOperands, Storage>(out, first, second, count);
  switch (access.kind) {
    case AccessKind::kVector:
      return LaunchKernel<kOperands, Storage, uint4, Storage>(out, first, second, count,
                                                              access.head, function, stream);
    case AccessKind::kElement:
      return LaunchKernel<kOperands, Storage, Storage, Storage>(out, first, second, count, 0,
                                                                function, stream);
    case AccessKind::kUnaligned:
      break;
  }
  if constexpr (sizeof(Storage) > 1) {
    using Bytes = Unaligned<Storage>;
    return LaunchKernel<kOperands, Storage, Bytes, Bytes>(out, first, second, count, 0, function,
                                                          stream);
  }
  return cudaErrorInvalidValue;  // not reached: single bytes are always aligned
}

}  // namespace

cudaError_t LaunchReduce(DataType type, ReduceOp op, void* out, const void* first,
                         const void* second, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (out == nullptr || second == nullptr) return cudaErrorInvalidValue;
  const bool in_place = first == nullptr || first == out;
  cudaError_t result = cudaErrorInvalidValue;  // unless `type` and `op` are known
  reduce_element::DispatchOnType(type, [&]<typename Codec>(CodecTag<Codec>) {
    reduce_element::DispatchOnNcclOp(op, [&]<typename Op>(OpTag<Op>) {
      using Storage = typename Codec::Storage;
      const auto function = ReduceFunction<Codec, Op>{};
      result = in_place ? LaunchElementwise<Operands::kInPlace, Storage>(out, nullptr, second,
                                                                         count, function, stream)
                        : LaunchElementwise<Operands::kOutOfPlace, Storage>(
                              out, first, second, count, function, stream);
    });
  });
  return result;
}

cudaError_t LaunchFinalizeReduction(DataType type, ReduceOp op, void* data, int64_t count,
                                    int num_ranks, cudaStream_t stream) {
  if (num_ranks < 1) return cudaErrorInvalidValue;
  if (op != ReduceOp::kAvg || num_ranks == 1 || count <= 0) return cudaSuccess;
  if (data == nullptr) return cudaErrorInvalidValue;
  cudaError_t result = cudaErrorInvalidValue;
  reduce_element::DispatchOnType(type, [&]<typename Codec>(CodecTag<Codec>) {
    result = LaunchElementwise<Operands::kUnary, typename Codec::Storage>(
        data, nullptr, nullptr, count, DivideFunction<Codec>{num_ranks}, stream);
  });
  return result;
}

}  // namespace stragglar
