#include "kernels/reduce.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "absl/base/attributes.h"
#include "absl/base/macros.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stragglar {
namespace {

// Indexed by DataType / ReduceOp; the order must match the enums.
constexpr std::array<absl::string_view, 10> kDataTypeNames = {
    "int8",   "uint8",   "int32",   "uint32",  "int64",
    "uint64", "float16", "float32", "float64", "bfloat16"};
constexpr std::array<absl::string_view, 5> kReduceOpNames = {"sum", "prod", "max", "min", "avg"};

struct DataTypeAlias {
  absl::string_view name;
  DataType type;
};
constexpr std::array<DataTypeAlias, 7> kDataTypeAliases = {{{"half", DataType::kFloat16},
                                                            {"float", DataType::kFloat32},
                                                            {"double", DataType::kFloat64},
                                                            {"fp16", DataType::kFloat16},
                                                            {"bf16", DataType::kBfloat16},
                                                            {"fp32", DataType::kFloat32},
                                                            {"fp64", DataType::kFloat64}}};

// ---------------------------------------------------------------------------------------------
// fp16 / bf16 conversions. Branch-free so that a loop calling them vectorizes: every lane
// computes every case and keeps the one that applies.

constexpr uint32_t kFloatSignMask = 0x80000000u;
constexpr uint32_t kFloatInfinityBits = 0x7f800000u;

// `condition ? if_true : if_false` written with masks. A plain ?: lets GCC sink a floating-point
// operation that only one case needs into a branch, and it will not turn that branch back into a
// select (the operation "could trap" under the default -ftrapping-math), so the loop would not
// vectorize.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t SelectBits(bool condition, uint32_t if_true,
                                                        uint32_t if_false) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (if_true & mask) | (if_false & ~mask);
}

// The conversions take and return 16-bit patterns in the low half of a uint32_t, and compare
// non-negative values as int32_t: SSE2 has no unsigned 32-bit compare or unsigned int-to-float
// conversion, and emulating them would cost several instructions per lane.

ABSL_ATTRIBUTE_ALWAYS_INLINE inline float HalfBitsToFloat(uint32_t half) {
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
      std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f);
  const uint32_t magnitude =
      SelectBits(exponent == 0, subnormal, SelectBits(exponent == 0x1f, inf_or_nan, normal));
  return std::bit_cast<float>(sign | magnitude);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t FloatToHalfBits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits & kFloatSignMask) >> 16;
  const uint32_t magnitude = bits & ~kFloatSignMask;
  const int32_t signed_magnitude = static_cast<int32_t>(magnitude);  // >= 0
  // 65520 is halfway between the largest half (65504) and the next power of two; ties go to the
  // even neighbour, which is infinity, so everything from there up (float infinity included)
  // becomes infinity.
  constexpr int32_t kFirstOverflow = 0x477ff000;       // 65520.0f
  constexpr int32_t kSmallestNormalHalf = 0x38800000;  // 2^-14
  // NaN keeps the top of its payload and gets the quiet bit, so it cannot turn into infinity.
  const uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x3ffu);
  // Normal halves: rebias the exponent and round the 13 dropped mantissa bits to nearest even
  // (adding just under half, plus one if the kept part is odd). A carry out of the mantissa
  // correctly bumps the exponent.
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  const uint32_t normal = (rounded - ((127u - 15u) << 23)) >> 13;
  // Subnormal halves are multiples of 2^-24, which is exactly the spacing of floats in
  // [0.5, 1). Adding 0.5f makes the FPU round to that spacing (to nearest even), and the low
  // bits of the sum are then the half's bit pattern (0x400, the smallest normal, included).
  const uint32_t subnormal = std::bit_cast<uint32_t>(std::bit_cast<float>(magnitude) + 0.5f) -
                             std::bit_cast<uint32_t>(0.5f);
  const uint32_t finite = SelectBits(signed_magnitude >= kSmallestNormalHalf, normal, subnormal);
  const uint32_t result =
      SelectBits(signed_magnitude > static_cast<int32_t>(kFloatInfinityBits), nan,
                 SelectBits(signed_magnitude >= kFirstOverflow, 0x7c00u, finite));
  return sign | result;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline float Bfloat16BitsToFloat(uint32_t value) {
  return std::bit_cast<float>(value << 16);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t FloatToBfloat16Bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
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
  ABSL_ATTRIBUTE_ALWAYS_INLINE static T Load(T value) { return value; }
  ABSL_ATTRIBUTE_ALWAYS_INLINE static T Store(T value) { return value; }
};

// The 16-bit float codecs take and return bit patterns widened to uint32_t (see above).
struct HalfCodec {
  using Storage = uint16_t;
  using Compute = float;
  ABSL_ATTRIBUTE_ALWAYS_INLINE static float Load(uint32_t bits) { return HalfBitsToFloat(bits); }
  ABSL_ATTRIBUTE_ALWAYS_INLINE static uint32_t Store(float value) { return FloatToHalfBits(value); }
};

struct Bfloat16Codec {
  using Storage = uint16_t;
  using Compute = float;
  ABSL_ATTRIBUTE_ALWAYS_INLINE static float Load(uint32_t bits) {
    return Bfloat16BitsToFloat(bits);
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE static uint32_t Store(float value) {
    return FloatToBfloat16Bits(value);
  }
};

template <typename Codec>
constexpr bool kIsSixteenBitFloat =
    std::is_same_v<Codec, HalfCodec> || std::is_same_v<Codec, Bfloat16Codec>;

// ---------------------------------------------------------------------------------------------
// Operators.

// Integer sums and products run in an unsigned type at least as wide as `unsigned`, where
// overflow is defined to wrap; converting back to T keeps the low bits (two's complement).
template <typename T>
using WrappingType = std::make_unsigned_t<std::common_type_t<T, unsigned>>;

struct SumOp {
  template <typename T>
  ABSL_ATTRIBUTE_ALWAYS_INLINE static T Apply(T accumulated, T incoming) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrappingType<T>>(accumulated) +
                            static_cast<WrappingType<T>>(incoming));
    } else {
      return accumulated + incoming;
    }
  }
};

struct ProdOp {
  template <typename T>
  ABSL_ATTRIBUTE_ALWAYS_INLINE static T Apply(T accumulated, T incoming) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrappingType<T>>(accumulated) *
                            static_cast<WrappingType<T>>(incoming));
    } else {
      return accumulated * incoming;
    }
  }
};

// Floating-point max/min follow C's fmax/fmin, as NCCL does (fmaxf/fminf, __hmax/__hmin on the
// GPU): a NaN loses to a number, and the result is NaN only when both are NaN. Written as
// compares and a select rather than calling std::fmax, which the compiler does not inline or
// vectorize for the baseline ISA. When the operands compare equal (+0 and -0) the accumulated
// value is kept.
struct MaxOp {
  template <typename T>
  ABSL_ATTRIBUTE_ALWAYS_INLINE static T Apply(T accumulated, T incoming) {
    if constexpr (std::is_floating_point_v<T>) {
      const bool incoming_is_nan = incoming != incoming;
      return (accumulated >= incoming || incoming_is_nan) ? accumulated : incoming;
    } else {
      return accumulated < incoming ? incoming : accumulated;
    }
  }
};

struct MinOp {
  template <typename T>
  ABSL_ATTRIBUTE_ALWAYS_INLINE static T Apply(T accumulated, T incoming) {
    if constexpr (std::is_floating_point_v<T>) {
      const bool incoming_is_nan = incoming != incoming;
      return (accumulated <= incoming || incoming_is_nan) ? accumulated : incoming;
    } else {
      return incoming < accumulated ? incoming : accumulated;
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Loops.

// Elements per block: 64 bytes of storage. GCC's -O2 vectorizer (the "very cheap" cost model)
// only vectorizes loops whose trip count is a known multiple of the vector width, so the body
// runs over fixed-size blocks and a scalar loop finishes the remainder. (64-bit integer prod,
// max and min stay scalar: SSE2 has no 64-bit multiply or compare, and GCC judges emulating them
// not worth it.)
template <typename Storage>
constexpr int64_t kBlockElements = 64 / sizeof(Storage);

// out[i] = first[i] (op) second[i]. In place (`kInPlace`), `first` is unused and `out` is both
// the first operand and the result; otherwise the three buffers must not overlap. Keeping the two
// cases apart lets every parameter be `__restrict` (GCC ignores it on local variables), so the
// vectorizer skips run-time alias checks, which -O2 will not emit.
template <typename Codec, typename Op, bool kInPlace>
void ReduceLoop(typename Codec::Storage* __restrict out,
                const typename Codec::Storage* __restrict first,
                const typename Codec::Storage* __restrict second, int64_t count) {
  using Storage = typename Codec::Storage;
  constexpr int64_t kBlock = kBlockElements<Storage>;
  int64_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    for (int64_t j = 0; j < kBlock; ++j) {
      const Storage a = kInPlace ? out[i + j] : first[i + j];
      out[i + j] =
          static_cast<Storage>(Codec::Store(Op::Apply(Codec::Load(a), Codec::Load(second[i + j]))));
    }
  }
  for (; i < count; ++i) {
    const Storage a = kInPlace ? out[i] : first[i];
    out[i] = static_cast<Storage>(Codec::Store(Op::Apply(Codec::Load(a), Codec::Load(second[i]))));
  }
}

// fp16 and bf16 elements go two at a time, as the halves of a uint32_t, so that the vector code
// stays in 32-bit lanes: widening 16-bit lanes and packing them back costs SSE2 more shuffles
// than the arithmetic. Both halves get the same treatment, so byte order does not matter.
template <typename Codec, typename Op>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t ReducePair(uint32_t first, uint32_t second) {
  const uint32_t low =
      Codec::Store(Op::Apply(Codec::Load(first & 0xffffu), Codec::Load(second & 0xffffu)));
  const uint32_t high =
      Codec::Store(Op::Apply(Codec::Load(first >> 16), Codec::Load(second >> 16)));
  return low | (high << 16);
}

template <typename Codec, typename Op, bool kInPlace>
void ReducePairsLoop(uint16_t* __restrict out, const uint16_t* __restrict first,
                     const uint16_t* __restrict second, int64_t count) {
  constexpr int64_t kBlockPairs = 64 / sizeof(uint32_t);
  int64_t i = 0;
  for (; i + 2 * kBlockPairs <= count; i += 2 * kBlockPairs) {
    for (int64_t j = 0; j < kBlockPairs; ++j) {
      // memcpy, not a cast, reads the pair without breaking aliasing rules; it compiles to a
      // plain load.
      uint32_t first_pair, second_pair;
      std::memcpy(&first_pair, (kInPlace ? out : first) + i + 2 * j, sizeof(uint32_t));
      std::memcpy(&second_pair, second + i + 2 * j, sizeof(uint32_t));
      const uint32_t result = ReducePair<Codec, Op>(first_pair, second_pair);
      std::memcpy(out + i + 2 * j, &result, sizeof(uint32_t));
    }
  }
  ReduceLoop<Codec, Op, kInPlace>(out + i, kInPlace ? nullptr : first + i, second + i, count - i);
}

// `first` == nullptr: reduce in place into `out`.
template <typename Codec>
void ReduceWithCodec(ReduceOp op, void* out_bytes, const void* first_bytes,
                     const void* second_bytes, int64_t count) {
  using Storage = typename Codec::Storage;
  Storage* out = static_cast<Storage*>(out_bytes);
  const Storage* first = static_cast<const Storage*>(first_bytes);
  const Storage* second = static_cast<const Storage*>(second_bytes);
  auto run = [&]<typename Op, bool kInPlace>() {
    if constexpr (kIsSixteenBitFloat<Codec>) {
      ReducePairsLoop<Codec, Op, kInPlace>(out, first, second, count);
    } else {
      ReduceLoop<Codec, Op, kInPlace>(out, first, second, count);
    }
  };
  auto reduce = [&]<typename Op>() {
    if (first == nullptr) {
      run.template operator()<Op, true>();
    } else {
      run.template operator()<Op, false>();
    }
  };
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // sums here; FinalizeReduction divides
      return reduce.template operator()<SumOp>();
    case ReduceOp::kProd:
      return reduce.template operator()<ProdOp>();
    case ReduceOp::kMax:
      return reduce.template operator()<MaxOp>();
    case ReduceOp::kMin:
      return reduce.template operator()<MinOp>();
  }
}

// Divides by the rank count. Integers divide in a type wide enough to hold both operands
// (truncating toward zero, like NCCL's integer average); floats divide exactly rounded rather
// than multiplying by a rounded reciprocal.
template <typename Codec>
void DivideLoop(void* data_bytes, int64_t count, int divisor) {
  using Storage = typename Codec::Storage;
  using Compute = typename Codec::Compute;
  Storage* data = static_cast<Storage*>(data_bytes);
  for (int64_t i = 0; i < count; ++i) {
    const Compute value = Codec::Load(data[i]);
    Compute quotient;
    if constexpr (std::is_floating_point_v<Compute>) {
      quotient = value / static_cast<Compute>(divisor);
    } else if constexpr (std::is_signed_v<Compute>) {
      using Wide = std::common_type_t<Compute, int>;
      quotient = static_cast<Compute>(static_cast<Wide>(value) / static_cast<Wide>(divisor));
    } else {
      using Wide = std::common_type_t<Compute, unsigned>;
      quotient = static_cast<Compute>(static_cast<Wide>(value) / static_cast<Wide>(divisor));
    }
    data[i] = static_cast<Storage>(Codec::Store(quotient));
  }
}

// Calls `function.template operator()<Codec>()` with the codec of `type`: the one place that
// maps run-time types to compile-time ones.
template <typename Function>
void DispatchOnType(DataType type, Function&& function) {
  switch (type) {
    case DataType::kInt8:
      return function.template operator()<NativeCodec<int8_t>>();
    case DataType::kUint8:
      return function.template operator()<NativeCodec<uint8_t>>();
    case DataType::kInt32:
      return function.template operator()<NativeCodec<int32_t>>();
    case DataType::kUint32:
      return function.template operator()<NativeCodec<uint32_t>>();
    case DataType::kInt64:
      return function.template operator()<NativeCodec<int64_t>>();
    case DataType::kUint64:
      return function.template operator()<NativeCodec<uint64_t>>();
    case DataType::kFloat16:
      return function.template operator()<HalfCodec>();
    case DataType::kFloat32:
      return function.template operator()<NativeCodec<float>>();
    case DataType::kFloat64:
      return function.template operator()<NativeCodec<double>>();
    case DataType::kBfloat16:
      return function.template operator()<Bfloat16Codec>();
  }
}

}  // namespace

int DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

absl::string_view DataTypeName(DataType type) { return kDataTypeNames[static_cast<size_t>(type)]; }

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  for (DataType type : kAllDataTypes) {
    if (DataTypeName(type) == name) return type;
  }
  for (const DataTypeAlias& alias : kDataTypeAliases) {
    if (alias.name == name) return alias.type;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown data type \"", name, "\"; expected one of ", absl::StrJoin(kDataTypeNames, ", ")));
}

absl::string_view ReduceOpName(ReduceOp op) { return kReduceOpNames[static_cast<size_t>(op)]; }

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  for (ReduceOp op : kAllReduceOps) {
    if (ReduceOpName(op) == name) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reduction operator \"", name,
                                                 "\"; expected one of ",
                                                 absl::StrJoin(kReduceOpNames, ", ")));
}

void ReduceInto(DataType type, ReduceOp op, void* accumulator, const void* incoming,
                int64_t count) {
  if (count <= 0) return;
  DispatchOnType(type, [&]<typename Codec>() {
    ReduceWithCodec<Codec>(op, accumulator, nullptr, incoming, count);
  });
}

void Reduce(DataType type, ReduceOp op, void* out, const void* first, const void* second,
            int64_t count) {
  if (count <= 0) return;
  DispatchOnType(type,
                 [&]<typename Codec>() { ReduceWithCodec<Codec>(op, out, first, second, count); });
}

void FinalizeReduction(DataType type, ReduceOp op, void* data, int64_t count, int num_ranks) {
  ABSL_ASSERT(num_ranks >= 1);
  if (op != ReduceOp::kAvg || num_ranks <= 1 || count <= 0) return;
  DispatchOnType(type, [&]<typename Codec>() { DivideLoop<Codec>(data, count, num_ranks); });
}

float HalfToFloat(uint16_t half) { return HalfBitsToFloat(half); }
uint16_t FloatToHalf(float value) { return static_cast<uint16_t>(FloatToHalfBits(value)); }
float Bfloat16ToFloat(uint16_t value) { return Bfloat16BitsToFloat(value); }
uint16_t FloatToBfloat16(float value) { return static_cast<uint16_t>(FloatToBfloat16Bits(value)); }

}  // namespace stragglar
