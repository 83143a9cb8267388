// The per-element rules of a reduction, shared by the CPU kernels (reduce.cc) and the CUDA kernels
// (cuda_reduce.cu), so that both give the same bits by construction: the fp16 / bf16 conversions
// (compute in float, round to nearest even once per element), the element codecs, the operators
// (wrapping integer sums and products, max and min with their NaN rules, every one symmetric bit
// for bit) and the average's division.
//
// Everything here is STRAGGLAR_HOST_DEVICE: `__host__ __device__ __forceinline__` under nvcc, a
// forced-inline function for the host compiler. It is written for both: no library calls, and
// __builtin_bit_cast (which GCC and nvcc both provide, on the device too) instead of std::bit_cast,
// a constexpr host function that device code could only call with --expt-relaxed-constexpr. The
// code also stays branch-free so that the CPU loops calling it vectorize (see SelectBits). Compile
// device code without fast-math and with --fmad=false (as stragglar_cuda_kernels does): the rules
// assume IEEE division and no contraction of a multiply and an add into one rounding.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/reduce/reduce.h"

#if defined(__CUDACC__)
#define STRAGGLAR_HOST_DEVICE __host__ __device__ __forceinline__
#else
#include "absl/base/attributes.h"
#define STRAGGLAR_HOST_DEVICE ABSL_ATTRIBUTE_ALWAYS_INLINE inline
#endif

namespace stragglar::reduce_element {

template <typename To, typename From>
STRAGGLAR_HOST_DEVICE To BitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  return __builtin_bit_cast(To, from);
}

// ---------------------------------------------------------------------------------------------
// fp16 / bf16 conversions. Branch-free so that a loop calling them vectorizes: every lane
// computes every case and keeps the one that applies.

inline constexpr uint32_t kFloatSignMask = 0x80000000u;
inline constexpr uint32_t kFloatInfinityBits = 0x7f800000u;

// `condition ? if_true : if_false` written with masks. A plain ?: lets GCC sink a floating-point
// operation that only one case needs into a branch, and it will not turn that branch back into a
// select (the operation "could trap" under the default -ftrapping-math), so the loop would not
// vectorize.
STRAGGLAR_HOST_DEVICE uint32_t SelectBits(bool condition, uint32_t if_true, uint32_t if_false) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (if_true & mask) | (if_false & ~mask);
}

// The conversions take and return 16-bit patterns in the low half of a uint32_t, and compare
// non-negative values as int32_t: SSE2 has no unsigned 32-bit compare or unsigned int-to-float
// conversion, and emulating them would cost several instructions per lane.

STRAGGLAR_HOST_DEVICE float HalfBitsToFloat(uint32_t half) {
#if defined(__CUDA_ARCH__)
  // The GPU converts in one instruction (exact, subnormals included); only NaN is redone here,
  // to carry the payload exactly as the CPU code below does.
  float converted;
  asm("cvt.f32.f16 %0, %1;" : "=f"(converted) : "h"(static_cast<unsigned short>(half)));
  const uint32_t nan = ((half & 0x8000u) << 16) | kFloatInfinityBits | ((half & 0x3ffu) << 13);
  return BitCast<float>(SelectBits((half & 0x7fffu) > 0x7c00u, nan, BitCast<uint32_t>(converted)));
#else
  const uint32_t sign = (half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  // Normal numbers: move the fields into place and rebias the exponent from 15 to 127.
  const uint32_t normal = ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  // Infinity and NaN: all-ones exponent; the payload moves along, so NaN stays NaN.
  const uint32_t inf_or_nan = kFloatInfinityBits | (mantissa << 13);
  // Zero and subnormals are mantissa * 2^-24. The int-to-float conversion and the scaling are
  // exact and never touch float subnormals (so they are right even if the FPU flushes them).
  const uint32_t subnormal =
      BitCast<uint32_t>(static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f);
  const uint32_t magnitude =
      SelectBits(exponent == 0, subnormal, SelectBits(exponent == 0x1f, inf_or_nan, normal));
  return BitCast<float>(sign | magnitude);
#endif
}

STRAGGLAR_HOST_DEVICE uint32_t FloatToHalfBits(float value) {
  const uint32_t bits = BitCast<uint32_t>(value);
  const uint32_t sign = (bits & kFloatSignMask) >> 16;
  const uint32_t magnitude = bits & ~kFloatSignMask;
  // NaN keeps the top of its payload and gets the quiet bit, so it cannot turn into infinity.
  const uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x3ffu);
#if defined(__CUDA_ARCH__)
  // The GPU rounds to nearest even in one instruction (overflow to infinity and subnormals as
  // below); only NaN, which it makes canonical, is redone.
  unsigned short converted;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(converted) : "f"(value));
  return SelectBits(magnitude > kFloatInfinityBits, sign | nan, converted);
#else
  const int32_t signed_magnitude = static_cast<int32_t>(magnitude);  // >= 0
  // 65520 is halfway between the largest half (65504) and the next power of two; ties go to the
  // even neighbour, which is infinity, so everything from there up (float infinity included)
  // becomes infinity.
  constexpr int32_t kFirstOverflow = 0x477ff000;       // 65520.0f
  constexpr int32_t kSmallestNormalHalf = 0x38800000;  // 2^-14
  // Normal halves: rebias the exponent and round the 13 dropped mantissa bits to nearest even
  // (adding just under half, plus one if the kept part is odd). A carry out of the mantissa
  // correctly bumps the exponent.
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  const uint32_t normal = (rounded - ((127u - 15u) << 23)) >> 13;
  // Subnormal halves are multiples of 2^-24, which is exactly the spacing of floats in
  // [0.5, 1). Adding 0.5f makes the FPU round to that spacing (to nearest even), and the low
  // bits of the sum are then the half's bit pattern (0x400, the smallest normal, included).
  const uint32_t subnormal =
      BitCast<uint32_t>(BitCast<float>(magnitude) + 0.5f) - BitCast<uint32_t>(0.5f);
  const uint32_t finite = SelectBits(signed_magnitude >= kSmallestNormalHalf, normal, subnormal);
  const uint32_t result =
      SelectBits(signed_magnitude > static_cast<int32_t>(kFloatInfinityBits), nan,
                 SelectBits(signed_magnitude >= kFirstOverflow, 0x7c00u, finite));
  return sign | result;
#endif
}

// For the GPU kernels' 16-byte fp16 accesses, which work on pairs packed in a uint32_t (lane 0 in
// the low half): a half to float where a NaN may become any NaN, and two floats that are not NaN
// to a pair of halves, each rounded to nearest even. One instruction each on the GPU (two lanes at
// once for the pair), the exact code above elsewhere.
STRAGGLAR_HOST_DEVICE float HalfBitsToFloatLooseNaN(uint32_t half) {
#if defined(__CUDA_ARCH__)
  float converted;
  asm("cvt.f32.f16 %0, %1;" : "=f"(converted) : "h"(static_cast<unsigned short>(half)));
  return converted;
#else
  return HalfBitsToFloat(half);
#endif
}

STRAGGLAR_HOST_DEVICE uint32_t NonNaNFloatsToHalfPair(float low, float high) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t pair;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(high), "f"(low));
  return pair;
#else
  return FloatToHalfBits(low) | (FloatToHalfBits(high) << 16);
#endif
}

STRAGGLAR_HOST_DEVICE float Bfloat16BitsToFloat(uint32_t value) {
  return BitCast<float>(value << 16);
}

STRAGGLAR_HOST_DEVICE uint32_t FloatToBfloat16Bits(float value) {
  const uint32_t bits = BitCast<uint32_t>(value);
  // bf16 is the top half of a float, so rounding is integer arithmetic on the low 16 bits; it
  // covers subnormals, and overflow carries into the exponent to produce infinity.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  // NaN: truncate and set the quiet bit, which keeps it NaN even if the payload was all low bits.
  const uint32_t nan = (bits >> 16) | 0x40u;
  const bool is_nan =
      static_cast<int32_t>(bits & ~kFloatSignMask) > static_cast<int32_t>(kFloatInfinityBits);
  return SelectBits(is_nan, nan, rounded);
}

// ---------------------------------------------------------------------------------------------
// Element codecs: how a stored element becomes the value the operator computes with, and back.

template <typename T>
struct NativeCodec {
  using Storage = T;
  using Compute = T;
  STRAGGLAR_HOST_DEVICE static T Load(T value) { return value; }
  STRAGGLAR_HOST_DEVICE static T Store(T value) { return value; }
  STRAGGLAR_HOST_DEVICE static bool IsNan(T value) { return value != value; }  // false for ints
};

// The 16-bit float codecs take and return bit patterns widened to uint32_t (see above).
struct HalfCodec {
  using Storage = uint16_t;
  using Compute = float;
  STRAGGLAR_HOST_DEVICE static float Load(uint32_t bits) { return HalfBitsToFloat(bits); }
  STRAGGLAR_HOST_DEVICE static uint32_t Store(float value) { return FloatToHalfBits(value); }
  STRAGGLAR_HOST_DEVICE static bool IsNan(uint16_t bits) { return (bits & 0x7fffu) > 0x7c00u; }
};

struct Bfloat16Codec {
  using Storage = uint16_t;
  using Compute = float;
  STRAGGLAR_HOST_DEVICE static float Load(uint32_t bits) { return Bfloat16BitsToFloat(bits); }
  STRAGGLAR_HOST_DEVICE static uint32_t Store(float value) { return FloatToBfloat16Bits(value); }
  STRAGGLAR_HOST_DEVICE static bool IsNan(uint16_t bits) { return (bits & 0x7fffu) > 0x7f80u; }
};

template <typename Codec>
inline constexpr bool kIsSixteenBitFloat =
    std::is_same_v<Codec, HalfCodec> || std::is_same_v<Codec, Bfloat16Codec>;

// ---------------------------------------------------------------------------------------------
// Operators.
//
// Every reduction is symmetric bit for bit: a (op) b and b (op) a have the same bits. Plans finish
// a chunk on two ranks at once (StragglAR's exchange with the straggler, a Halving-Doubling
// pair), each with its own operand first, and an AllReduce must leave every rank with the same
// bytes: replicas whose parameters differ in one NaN's payload or one zero's sign stay different.
//  - A max or min must choose between +0 and -0 and between two NaNs: each choice here depends on
//    the values only (ExtremeOp).
//  - IEEE arithmetic is symmetric but for which NaN a sum or product of two NaNs returns. The GPU
//    returns one canonical NaN; x86 returns the first operand's. The CPU loops (reduce.cc) check
//    each block for two NaNs meeting and reduce such a block with NanSymmetric<Op>, so that the
//    common block pays one compare per element.

// The unsigned integer of a floating-point type's width.
template <typename T>
using BitsOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// `condition ? if_true : if_false` on bits, written with masks (see SelectBits).
template <typename Bits>
STRAGGLAR_HOST_DEVICE Bits Select(bool condition, Bits if_true, Bits if_false) {
  const Bits mask = Bits{0} - static_cast<Bits>(condition);
  return (if_true & mask) | (if_false & ~mask);
}

// Of two NaNs, the one with the larger bit pattern once both are quiet (the top bit of the
// mantissa set), quiet: the same whichever comes first, and whichever of them an earlier
// operation quieted (arithmetic does, and so does storing a NaN as fp16 or bf16), so that max and
// min stay associative.
template <typename T>
STRAGGLAR_HOST_DEVICE BitsOf<T> LargerNanBits(T first, T second) {
  constexpr BitsOf<T> kQuiet = BitsOf<T>{1} << (sizeof(T) == 4 ? 22 : 51);
  const BitsOf<T> a = BitCast<BitsOf<T>>(first) | kQuiet, b = BitCast<BitsOf<T>>(second) | kQuiet;
  return a > b ? a : b;
}

// `result` of first (op) second, except that two NaN operands give LargerNanBits: the hardware
// returns one of the two payloads by position.
template <typename T>
STRAGGLAR_HOST_DEVICE T WithSymmetricNan(T result, T first, T second) {
  const bool both_nan = first != first && second != second;
  return BitCast<T>(Select(both_nan, LargerNanBits(first, second), BitCast<BitsOf<T>>(result)));
}

// Integer sums and products run in an unsigned type at least as wide as `unsigned`, where
// overflow is defined to wrap; converting back to T keeps the low bits (two's complement).
template <typename T>
using WrappingType = std::make_unsigned_t<std::common_type_t<T, unsigned>>;

struct SumOp {
  static constexpr bool kArithmetic = true;
  template <typename T>
  STRAGGLAR_HOST_DEVICE static T Apply(T accumulated, T incoming) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrappingType<T>>(accumulated) +
                            static_cast<WrappingType<T>>(incoming));
    } else {
      return accumulated + incoming;
    }
  }
};

struct ProdOp {
  static constexpr bool kArithmetic = true;
  template <typename T>
  STRAGGLAR_HOST_DEVICE static T Apply(T accumulated, T incoming) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrappingType<T>>(accumulated) *
                            static_cast<WrappingType<T>>(incoming));
    } else {
      return accumulated * incoming;
    }
  }
};

// `Op` (SumOp or ProdOp) with two NaN operands giving LargerNanBits: what the CPU loops apply to a
// block in which two NaNs meet.
template <typename Op>
struct NanSymmetric {
  static constexpr bool kArithmetic = false;  // needs no check of its own
  template <typename T>
  STRAGGLAR_HOST_DEVICE static T Apply(T accumulated, T incoming) {
    if constexpr (std::is_floating_point_v<T>) {
      return WithSymmetricNan(Op::Apply(accumulated, incoming), accumulated, incoming);
    } else {
      return Op::Apply(accumulated, incoming);
    }
  }
};

// The larger (kLarger) or smaller of two floats, -0 below +0, with NaNs by `kNanWins`: a NaN
// beats a number (IEEE 754-2019's maximum and minimum: MPI programs expect a NaN to survive), or
// loses to it (maximumNumber and minimumNumber: C's fmax and fmin, as NCCL's max and min); two
// NaNs give LargerNanBits. Compares and selects on bits, which vectorize, rather than std::fmax,
// which the compiler neither inlines nor vectorizes for the baseline ISA. Operands that compare
// equal are +0 and -0 or the same value: the larger is their bits ANDed (the sign is set only if
// both are -0), the smaller ORed.
template <bool kLarger, bool kNanWins, typename T>
STRAGGLAR_HOST_DEVICE T FloatExtreme(T first, T second) {
  using Bits = BitsOf<T>;
  const Bits a = BitCast<Bits>(first), b = BitCast<Bits>(second);
  const bool a_nan = first != first, b_nan = second != second;
  const bool a_wins = kLarger ? first > second : first < second;
  const bool b_wins = kLarger ? second > first : second < first;
  const Bits tie = kLarger ? (a & b) : (a | b);
  const Bits numbers = Select(a_wins, a, Select(b_wins, b, tie));
  const Bits one_nan = kNanWins ? Select(a_nan, a, b) : Select(a_nan, b, a);
  return BitCast<T>(Select(a_nan && b_nan, LargerNanBits(first, second),
                           Select(a_nan || b_nan, one_nan, numbers)));
}

template <bool kLarger, bool kNanWins>
struct ExtremeOp {
  static constexpr bool kArithmetic = false;
  template <typename T>
  STRAGGLAR_HOST_DEVICE static T Apply(T accumulated, T incoming) {
    if constexpr (std::is_floating_point_v<T>) {
      return FloatExtreme<kLarger, kNanWins>(accumulated, incoming);
    } else if constexpr (kLarger) {
      return accumulated < incoming ? incoming : accumulated;
    } else {
      return incoming < accumulated ? incoming : accumulated;
    }
  }
};

using MaxOp = ExtremeOp</*kLarger=*/true, /*kNanWins=*/false>;
using MinOp = ExtremeOp</*kLarger=*/false, /*kNanWins=*/false>;
using MaxNanOp = ExtremeOp</*kLarger=*/true, /*kNanWins=*/true>;
using MinNanOp = ExtremeOp</*kLarger=*/false, /*kNanWins=*/true>;

// ---------------------------------------------------------------------------------------------
// Whole elements: what one element of a reduction or of the average's division computes.

// The reduction of one stored element with another: decode, apply, round once, encode.
template <typename Codec, typename Op>
STRAGGLAR_HOST_DEVICE typename Codec::Storage ReduceElement(typename Codec::Storage first,
                                                            typename Codec::Storage second) {
  return static_cast<typename Codec::Storage>(
      Codec::Store(Op::Apply(Codec::Load(first), Codec::Load(second))));
}

// The average's division by the rank count. Integers divide in a type wide enough to hold both
// operands (truncating toward zero, like NCCL's integer average); floats divide exactly rounded
// rather than multiplying by a rounded reciprocal.
template <typename Compute>
STRAGGLAR_HOST_DEVICE Compute DivideValue(Compute value, int divisor) {
  if constexpr (std::is_floating_point_v<Compute>) {
    return value / static_cast<Compute>(divisor);
  } else if constexpr (std::is_signed_v<Compute>) {
    using Wide = std::common_type_t<Compute, int>;
    return static_cast<Compute>(static_cast<Wide>(value) / static_cast<Wide>(divisor));
  } else {
    using Wide = std::common_type_t<Compute, unsigned>;
    return static_cast<Compute>(static_cast<Wide>(value) / static_cast<Wide>(divisor));
  }
}

template <typename Codec>
STRAGGLAR_HOST_DEVICE typename Codec::Storage DivideElement(typename Codec::Storage value,
                                                            int divisor) {
  return static_cast<typename Codec::Storage>(
      Codec::Store(DivideValue(Codec::Load(value), divisor)));
}

// ---------------------------------------------------------------------------------------------
// Run-time types and operators to compile-time ones (host code). The callable takes a tag:
// `[&]<typename Codec>(CodecTag<Codec>) { ... }`.

template <typename T>
struct Tag {
  using type = T;
};
template <typename Codec>
using CodecTag = Tag<Codec>;
template <typename Op>
using OpTag = Tag<Op>;

// Calls `function(CodecTag<Codec>{})` with the codec of `type`: the one place that maps run-time
// types to compile-time ones. Returns false (calling nothing) for a value outside the enum.
template <typename Function>
bool DispatchOnType(DataType type, Function&& function) {
  switch (type) {
    case DataType::kInt8:
      function(CodecTag<NativeCodec<int8_t>>{});
      return true;
    case DataType::kUint8:
      function(CodecTag<NativeCodec<uint8_t>>{});
      return true;
    case DataType::kInt32:
      function(CodecTag<NativeCodec<int32_t>>{});
      return true;
    case DataType::kUint32:
      function(CodecTag<NativeCodec<uint32_t>>{});
      return true;
    case DataType::kInt64:
      function(CodecTag<NativeCodec<int64_t>>{});
      return true;
    case DataType::kUint64:
      function(CodecTag<NativeCodec<uint64_t>>{});
      return true;
    case DataType::kFloat16:
      function(CodecTag<HalfCodec>{});
      return true;
    case DataType::kFloat32:
      function(CodecTag<NativeCodec<float>>{});
      return true;
    case DataType::kFloat64:
      function(CodecTag<NativeCodec<double>>{});
      return true;
    case DataType::kBfloat16:
      function(CodecTag<Bfloat16Codec>{});
      return true;
  }
  return false;
}

// DispatchOnOp for NCCL's operators only (the CUDA kernels, which only NCCL's calls reach): false,
// calling nothing, for the others.
template <typename Function>
bool DispatchOnNcclOp(ReduceOp op, Function&& function) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      function(OpTag<SumOp>{});
      return true;
    case ReduceOp::kProd:
      function(OpTag<ProdOp>{});
      return true;
    case ReduceOp::kMax:
      function(OpTag<MaxOp>{});
      return true;
    case ReduceOp::kMin:
      function(OpTag<MinOp>{});
      return true;
    default:
      return false;
  }
}

// Calls `function(OpTag<Op>{})` with the operator that the reduction of `op` applies: kAvg sums
// (FinalizeReduction divides at the end). Returns false for a value outside the enum.
template <typename Function>
bool DispatchOnOp(ReduceOp op, Function&& function) {
  switch (op) {
    case ReduceOp::kMaxNan:
      function(OpTag<MaxNanOp>{});
      return true;
    case ReduceOp::kMinNan:
      function(OpTag<MinNanOp>{});
      return true;
    default:
      return DispatchOnNcclOp(op, function);
  }
}

}  // namespace stragglar::reduce_element
