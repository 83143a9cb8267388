// CUDA reduction kernels (kernels/cuda_reduce.h). The element rules are reduce_element.h's, the
// same code the CPU kernels run, so a reduction gives the same bits on both; this file only
// decides which elements each GPU thread handles and how it reaches memory.
//
// One kernel template covers every type, operator and path. Each thread walks the buffers with a
// grid stride, kUnroll accesses per step (all loads of a step are issued before its first store,
// to keep enough bytes in flight). The access is one of:
//   - 16 bytes (uint4) when out, first and second sit at the same offset from a 16-byte boundary,
//     the usual case: the elements before the first boundary (the head) and after the last whole
//     vector (the tail), fewer than 16 bytes each, go one at a time;
//   - one element when the three offsets differ (the pointers are still element-aligned);
//   - one element read and written byte by byte when a pointer is not even element-aligned.
// The grid is sized from the device's SM count (kBlocksPerSm blocks of kThreadsPerBlock threads
// per SM, which __launch_bounds__ makes resident), and smaller for small counts.
//
// tests/gpu/reduce_check.cu checks every type x operator x path against the CPU kernels byte for
// byte (on a GPU, and on the CPU through tests/gpu/cuda_emulation.h, which compiles this file as
// plain C++ and runs every block and thread in turn).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda_reduce.h"
#include "kernels/reduce_element.h"

namespace stragglar {
namespace {

using reduce_element::BitCast;
using reduce_element::CodecTag;
using reduce_element::DivideElement;
using reduce_element::OpTag;
using reduce_element::ReduceElement;

constexpr int kThreadsPerBlock = 256;
// Resident blocks per SM the grid is sized for; __launch_bounds__ caps the registers so that they
// fit (1,024 threads per SM: half of an A100's or H100's maximum, plenty for a streaming kernel).
constexpr int kBlocksPerSm = 4;
constexpr int kVectorBytes = 16;

// Which buffers a kernel reads: out = first (op) second, out = out (op) second, or out = f(out).
enum class Operands : uint8_t { kOutOfPlace, kInPlace, kUnary };

// An element at an address that may not be a multiple of its size: read and written as bytes.
template <typename Storage>
struct Unaligned {
  unsigned char bytes[sizeof(Storage)];
};
template <typename T>
inline constexpr bool kIsUnaligned = false;
template <typename Storage>
inline constexpr bool kIsUnaligned<Unaligned<Storage>> = true;

// What one element computes. The second operand of kUnary kernels is the first one again.
template <typename Codec, typename Op>
struct ReduceFunction {
  using Storage = typename Codec::Storage;
  using Operator = Op;
  STRAGGLAR_HOST_DEVICE Storage operator()(Storage first, Storage second) const {
    return ReduceElement<Codec, Op>(first, second);
  }
};

template <typename Codec>
struct DivideFunction {
  using Storage = typename Codec::Storage;
  int divisor;
  STRAGGLAR_HOST_DEVICE Storage operator()(Storage value, Storage) const {
    return DivideElement<Codec>(value, divisor);
  }
};

// Accesses per thread per grid-stride step, all loaded before the first is stored. With 16-byte
// accesses: 4 (x two loads: 128 KiB in flight per SM, several times what hides an A100's or
// H100's memory latency), 2 where an access holds 8 or 16 elements (more would spill under
// __launch_bounds__'s cap). Byte-wise accesses: 1.
template <typename Access, typename Element, typename Function>
inline constexpr int kUnroll = kIsUnaligned<Element>                   ? 1
                               : sizeof(Access) / sizeof(Element) >= 8 ? 2
                                                                       : 4;

template <typename Function>
inline constexpr bool kIsHalfReduction = false;
template <typename Op>
inline constexpr bool kIsHalfReduction<ReduceFunction<reduce_element::HalfCodec, Op>> = true;

// fp16 two lanes at a time: the plain conversions, and the pair rounded at once (0.95 of copy
// bandwidth on an H100, against 0.88 converting lane by lane). A NaN operand can only matter
// through a NaN result (sum and prod propagate it, max and min return it only when both operands
// are NaN), so when either result is NaN (rare) both lanes are redone by ReduceElement, whose NaN
// bits match the CPU's.
template <typename Op>
STRAGGLAR_HOST_DEVICE uint32_t ReduceHalfPair(uint32_t first, uint32_t second) {
  using reduce_element::HalfBitsToFloatLooseNaN;
  const float low = Op::Apply(HalfBitsToFloatLooseNaN(first & 0xffffu),
                              HalfBitsToFloatLooseNaN(second & 0xffffu));
  const float high =
      Op::Apply(HalfBitsToFloatLooseNaN(first >> 16), HalfBitsToFloatLooseNaN(second >> 16));
  if (low == low && high == high) return reduce_element::NonNaNFloatsToHalfPair(low, high);
  using reduce_element::HalfCodec;
  const uint32_t exact_low = ReduceElement<HalfCodec, Op>(first & 0xffffu, second & 0xffffu);
  const uint32_t exact_high = ReduceElement<HalfCodec, Op>(first >> 16, second >> 16);
  return exact_low | (exact_high << 16);
}

// Applies `function` to every element in an access (a uint4, an element or an Unaligned one).
template <typename Storage, typename Access, typename Function>
__device__ __forceinline__ Access ApplyToAccess(const Function& function, const Access& first,
                                                const Access& second) {
  static_assert(sizeof(Access) % sizeof(Storage) == 0);
  if constexpr (kIsHalfReduction<Function> && std::is_same_v<Access, uint4>) {
    using Op = typename Function::Operator;
    return uint4{ReduceHalfPair<Op>(first.x, second.x), ReduceHalfPair<Op>(first.y, second.y),
                 ReduceHalfPair<Op>(first.z, second.z), ReduceHalfPair<Op>(first.w, second.w)};
  }
  constexpr int kLanes = sizeof(Access) / sizeof(Storage);
  struct Lanes {
    Storage lane[kLanes];
  };
  const Lanes a = BitCast<Lanes>(first);
  const Lanes b = BitCast<Lanes>(second);
  Lanes result;
#pragma unroll
  for (int i = 0; i < kLanes; ++i) result.lane[i] = function(a.lane[i], b.lane[i]);
  return BitCast<Access>(result);
}

// out[i] = function(first[i], second[i]) (see Operands) for i in [0, count), where `Element` is
// the element type or Unaligned<element type> and `Access` what one memory access moves: Element,
// or uint4 when all the buffers are 16-byte aligned after their first `head` elements.
template <Operands kOperands, typename Storage, typename Access, typename Element,
          typename Function>
__global__ void __launch_bounds__(kThreadsPerBlock, kBlocksPerSm)
    ElementwiseKernel(Element* __restrict__ out, const Element* __restrict__ first,
                      const Element* __restrict__ second, int64_t count, int64_t head,
                      Function function) {
  constexpr int64_t kLanes = sizeof(Access) / sizeof(Element);
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t accesses = (count - head) / kLanes;

  // In place, `out` is the first operand, read through the same pointer it is written through.
  const Element* const first_elements = kOperands == Operands::kOutOfPlace ? first : out;
  Access* const out_accesses = reinterpret_cast<Access*>(out + head);
  const Access* const first_accesses = reinterpret_cast<const Access*>(first_elements + head);
  const Access* const second_accesses =
      kOperands == Operands::kUnary ? nullptr : reinterpret_cast<const Access*>(second + head);

  constexpr int kSteps = kUnroll<Access, Element, Function>;
  for (int64_t base = thread; base < accesses; base += threads * kSteps) {
    Access a[kSteps] = {};
    Access b[kSteps] = {};
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int64_t index = base + u * threads;
      if (index < accesses) {
        a[u] = first_accesses[index];
        if constexpr (kOperands != Operands::kUnary) b[u] = second_accesses[index];
      }
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int64_t index = base + u * threads;
      if (index < accesses) {
        out_accesses[index] =
            ApplyToAccess<Storage>(function, a[u], kOperands == Operands::kUnary ? a[u] : b[u]);
      }
    }
  }

  if constexpr (kLanes > 1) {
    // The head and the tail: fewer than kLanes elements each, one per thread.
    auto apply_one = [&](int64_t i) {
      const Element x = first_elements[i];
      const Element y = kOperands == Operands::kUnary ? x : second[i];
      out[i] = ApplyToAccess<Storage>(function, x, y);
    };
    const int64_t tail = head + accesses * kLanes;
    if (thread < head) apply_one(thread);
    if (thread < count - tail) apply_one(tail + thread);
  }
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

// Picks the widest access that every buffer's alignment allows (see the top of the file).
// `first` and `second` are ignored where kOperands says they are not read.
template <Operands kOperands, typename Storage, typename Function>
cudaError_t LaunchElementwise(void* out, const void* first, const void* second, int64_t count,
                              const Function& function, cudaStream_t stream) {
  const uintptr_t out_address = reinterpret_cast<uintptr_t>(out);
  const uintptr_t first_address =
      kOperands == Operands::kOutOfPlace ? reinterpret_cast<uintptr_t>(first) : out_address;
  const uintptr_t second_address =
      kOperands == Operands::kUnary ? out_address : reinterpret_cast<uintptr_t>(second);
  if constexpr (sizeof(Storage) > 1) {
    if ((out_address | first_address | second_address) % sizeof(Storage) != 0) {
      using Bytes = Unaligned<Storage>;
      return LaunchKernel<kOperands, Storage, Bytes, Bytes>(out, first, second, count, 0, function,
                                                            stream);
    }
  }
  const uintptr_t phase = out_address % kVectorBytes;
  if (first_address % kVectorBytes == phase && second_address % kVectorBytes == phase) {
    const int64_t head = std::min<int64_t>(
        count, static_cast<int64_t>((kVectorBytes - phase) % kVectorBytes / sizeof(Storage)));
    return LaunchKernel<kOperands, Storage, uint4, Storage>(out, first, second, count, head,
                                                            function, stream);
  }
  return LaunchKernel<kOperands, Storage, Storage, Storage>(out, first, second, count, 0, function,
                                                            stream);
}

}  // namespace

cudaError_t LaunchReduce(DataType type, ReduceOp op, void* out, const void* first,
                         const void* second, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (out == nullptr || second == nullptr) return cudaErrorInvalidValue;
  const bool in_place = first == nullptr || first == out;
  cudaError_t result = cudaErrorInvalidValue;  // unless `type` and `op` are known
  reduce_element::DispatchOnType(type, [&]<typename Codec>(CodecTag<Codec>) {
    reduce_element::DispatchOnOp(op, [&]<typename Op>(OpTag<Op>) {
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
