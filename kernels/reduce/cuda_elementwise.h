// The element loops of our CUDA kernels, shared by the reduction kernels (cuda_reduce.cu, over a
// whole grid) and the device executor (device_kernel.cu, over one CTA): which elements each thread
// handles and how it reaches memory. The element rules are reduce_element.h's.
//
// Each thread walks the buffers with a stride of the thread count, kUnroll accesses per step
// (all loads of a step are issued before its first store, to keep enough bytes in flight). The
// access is one of (PickAccess):
//   - 16 bytes (uint4) when out, first and second sit at the same offset from a 16-byte boundary,
//     the usual case: the elements before the first boundary (the head) and after the last whole
//     vector (the tail), fewer than 16 bytes each, go one at a time;
//   - one element when the three offsets differ (the pointers are still element-aligned);
//   - one element read and written byte by byte when a pointer is not even element-aligned.
//
// For .cu files, and for the host compiler under tests/gpu/cuda_emulation.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/reduce/reduce_element.h"

namespace stragglar::cuda_elementwise {

using reduce_element::BitCast;
using reduce_element::DivideElement;
using reduce_element::ReduceElement;

constexpr int kVectorBytes = 16;

// Which buffers a kernel reads: out = first (op) second, out = out (op) second, or out = f(out).
// out = f(first, second), out = f(out, second), out = f(out), or out = f(first).
enum class Operands : uint8_t { kOutOfPlace, kInPlace, kUnary, kCopy };
template <Operands kOperands>
inline constexpr bool kReadsFirst =
    kOperands == Operands::kOutOfPlace || kOperands == Operands::kCopy;
template <Operands kOperands>
inline constexpr bool kReadsSecond =
    kOperands == Operands::kOutOfPlace || kOperands == Operands::kInPlace;

// An element at an address that may not be a multiple of its size: read and written as bytes.
template <typename Storage>
struct Unaligned {
  unsigned char bytes[sizeof(Storage)];
};
template <typename T>
inline constexpr bool kIsUnaligned = false;
template <typename Storage>
inline constexpr bool kIsUnaligned<Unaligned<Storage>> = true;

// What one element computes. The second operand of kUnary and kCopy kernels is the first one
// again.
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

template <typename Storage>
struct CopyFunction {
  STRAGGLAR_HOST_DEVICE Storage operator()(Storage value, Storage) const { return value; }
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

// No __restrict__ here: the device executor reads peers' memory that changes during the kernel,
// which the read-only (non-coherent) loads __restrict__ allows would not see; the reduction
// kernels' own parameters carry it.
//
// out[i] = function(first[i], second[i]) (see Operands) for i in [0, count), done by threads
// [0, threads) of which this is `thread`, where `Element` is the element type or
// Unaligned<element type> and `Access` what one memory access moves: Element, or uint4 when all
// the buffers are 16-byte aligned after their first `head` elements.
template <Operands kOperands, typename Storage, typename Access, typename Element,
          typename Function>
__device__ __forceinline__ void ElementwiseOnThreads(Element* out, const Element* first,
                                                     const Element* second, int64_t count,
                                                     int64_t head, const Function& function,
                                                     int64_t thread, int64_t threads) {
  constexpr int64_t kLanes = sizeof(Access) / sizeof(Element);
  const int64_t accesses = (count - head) / kLanes;

  // In place, `out` is the first operand, read through the same pointer it is written through.
  const Element* const first_elements = kReadsFirst<kOperands> ? first : out;
  Access* const out_accesses = reinterpret_cast<Access*>(out + head);
  const Access* const first_accesses = reinterpret_cast<const Access*>(first_elements + head);
  const Access* const second_accesses =
      kReadsSecond<kOperands> ? reinterpret_cast<const Access*>(second + head) : nullptr;

  constexpr int kSteps = kUnroll<Access, Element, Function>;
  for (int64_t base = thread; base < accesses; base += threads * kSteps) {
    Access a[kSteps] = {};
    Access b[kSteps] = {};
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int64_t index = base + u * threads;
      if (index < accesses) {
        a[u] = first_accesses[index];
        if constexpr (kReadsSecond<kOperands>) b[u] = second_accesses[index];
      }
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int64_t index = base + u * threads;
      if (index < accesses) {
        out_accesses[index] =
            ApplyToAccess<Storage>(function, a[u], kReadsSecond<kOperands> ? b[u] : a[u]);
      }
    }
  }

  if constexpr (kLanes > 1) {
    // The head and the tail: fewer than kLanes elements each, one per thread.
    auto apply_one = [&](int64_t i) {
      const Element x = first_elements[i];
      const Element y = kReadsSecond<kOperands> ? second[i] : x;
      out[i] = ApplyToAccess<Storage>(function, x, y);
    };
    const int64_t tail = head + accesses * kLanes;
    if (thread < head) apply_one(thread);
    if (thread < count - tail) apply_one(tail + thread);
  }
}

// The widest access every buffer's alignment allows, and the head before the first 16-byte
// boundary. `first` and `second` are ignored where kOperands says they are not read.
enum class AccessKind : uint8_t { kUnaligned, kElement, kVector };
struct AccessChoice {
  AccessKind kind;
  int64_t head;
};
template <Operands kOperands, typename Storage>
STRAGGLAR_HOST_DEVICE AccessChoice PickAccess(const void* out, const void* first,
                                              const void* second, int64_t count) {
  const uintptr_t out_address = reinterpret_cast<uintptr_t>(out);
  const uintptr_t first_address =
      kReadsFirst<kOperands> ? reinterpret_cast<uintptr_t>(first) : out_address;
  const uintptr_t second_address =
      kReadsSecond<kOperands> ? reinterpret_cast<uintptr_t>(second) : out_address;
  if (sizeof(Storage) > 1 &&
      (out_address | first_address | second_address) % sizeof(Storage) != 0) {
    return {AccessKind::kUnaligned, 0};
  }
  const uintptr_t phase = out_address % kVectorBytes;
  if (first_address % kVectorBytes == phase && second_address % kVectorBytes == phase) {
    const int64_t head =
        static_cast<int64_t>((kVectorBytes - phase) % kVectorBytes / sizeof(Storage));
    return {AccessKind::kVector, head < count ? head : count};
  }
  return {AccessKind::kElement, 0};
}

// ElementwiseOnThreads with the access PickAccess chooses.
template <Operands kOperands, typename Storage, typename Function>
__device__ __forceinline__ void ElementwiseAnyAlignment(void* out, const void* first,
                                                        const void* second, int64_t count,
                                                        const Function& function, int64_t thread,
                                                        int64_t threads) {
  const AccessChoice access = PickAccess<kOperands, Storage>(out, first, second, count);
  auto run = [&]<typename Access, typename Element>() {
    ElementwiseOnThreads<kOperands, Storage, Access, Element>(
        static_cast<Element*>(out), static_cast<const Element*>(first),
        static_cast<const Element*>(second), count, access.head, function, thread, threads);
  };
  if (access.kind == AccessKind::kVector) {
    run.template operator()<uint4, Storage>();
  } else if (access.kind == AccessKind::kElement || sizeof(Storage) == 1) {
    run.template operator()<Storage, Storage>();
  } else {
    run.template operator()<Unaligned<Storage>, Unaligned<Storage>>();
  }
}

}  // namespace stragglar::cuda_elementwise
