#include "kernels/reduce/exact_data.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stragglar::exact_data {
namespace {

static_assert(std::endian::native == std::endian::little, "elements are stored little-endian");

// prod: how many ranks per element contribute +-2^{-1,0,1} rather than +-1, so that a partial
// product stays within [2^-8, 2^8], inside fp16's normal range.
constexpr int kProductWindow = 8;
// max, min: non-zero k / 8 with |k| <= this (exact in fp16; bf16 rounds them, which max and min
// do not mind).
constexpr uint64_t kMaxMinSteps = 1000;

// SplitMix64, here where the generator's loops can inline it.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool IsFloat(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kBfloat16;
}

bool IsSignedInteger(DataType type) {
  return type == DataType::kInt8 || type == DataType::kInt32 || type == DataType::kInt64;
}

int BitWidth(DataType type) { return 8 * DataTypeSize(type); }

uint64_t WidthMask(DataType type) {
  const int bits = BitWidth(type);
  return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

int64_t SignExtend(uint64_t bits, int width) {
  const int shift = 64 - width;
  return static_cast<int64_t>(bits << shift) >> shift;
}

// The magnitude that every partial sum of inputs must stay within: the largest integer up to
// which every integer is representable (floats), or the largest value before overflow (integers).
uint64_t ExactLimit(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return std::numeric_limits<int8_t>::max();
    case DataType::kUint8:
      return std::numeric_limits<uint8_t>::max();
    case DataType::kInt32:
      return std::numeric_limits<int32_t>::max();
    case DataType::kUint32:
      return std::numeric_limits<uint32_t>::max();
    case DataType::kInt64:
      return std::numeric_limits<int64_t>::max();
    case DataType::kUint64:
      return std::numeric_limits<uint64_t>::max();
    case DataType::kFloat16:
      return uint64_t{1} << 11;
    case DataType::kBfloat16:
      return uint64_t{1} << 8;
    case DataType::kFloat32:
      return uint64_t{1} << 24;
    case DataType::kFloat64:
      return uint64_t{1} << 53;
  }
  return 1;
}

// Rounds `value` to `type` (exact for every value this file generates, except max/min in bf16).
uint64_t EncodeFloat(DataType type, double value) {
  switch (type) {
    case DataType::kFloat16:
      return FloatToHalf(static_cast<float>(value));
    case DataType::kBfloat16:
      return FloatToBfloat16(static_cast<float>(value));
    case DataType::kFloat32:
      return std::bit_cast<uint32_t>(static_cast<float>(value));
    default:
      return std::bit_cast<uint64_t>(value);
  }
}

double DecodeFloat(DataType type, uint64_t bits) {
  switch (type) {
    case DataType::kFloat16:
      return HalfToFloat(static_cast<uint16_t>(bits));
    case DataType::kBfloat16:
      return Bfloat16ToFloat(static_cast<uint16_t>(bits));
    case DataType::kFloat32:
      return std::bit_cast<float>(static_cast<uint32_t>(bits));
    default:
      return std::bit_cast<double>(bits);
  }
}

// A number in [0, bound) from 64 random bits: the high half of their product with `bound` (as
// uniform as `noise % bound` for these bounds, without a division).
uint64_t Below(uint64_t noise, uint64_t bound) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(noise) * bound) >> 64);
}

// A number in [0, limit], `limit` up to 2^64 - 1.
uint64_t UpTo(uint64_t noise, uint64_t limit) {
  return limit == std::numeric_limits<uint64_t>::max() ? noise : Below(noise, limit + 1);
}

// A number in [-limit, limit], `limit` below 2^63. Subtracted unsigned, where wrapping is defined
// (at limit 2^63 - 1 the signed subtraction overflows), then taken as signed: the same bits.
int64_t Within(uint64_t noise, uint64_t limit) {
  return static_cast<int64_t>(Below(noise, 2 * limit + 1) - limit);
}

uint64_t LoadBits(DataType type, const void* data, int64_t index) {
  const int size = DataTypeSize(type);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const std::byte*>(data) + index * size, size);
  return bits;
}

// Stores `element(i)` (bits) as elements [0, count) of `out`, with the type's width fixed at
// compile time so that the loop stays free of calls.
template <typename Storage, typename Element>
void StoreAll(int64_t count, void* out, Element&& element) {
  auto* data = static_cast<Storage*>(out);
  for (int64_t i = 0; i < count; ++i) data[i] = static_cast<Storage>(element(i));
}

template <typename Element>
void StoreEach(DataType type, int64_t count, void* out, Element&& element) {
  switch (DataTypeSize(type)) {
    case 1:
      return StoreAll<uint8_t>(count, out, element);
    case 2:
      return StoreAll<uint16_t>(count, out, element);
    case 4:
      return StoreAll<uint32_t>(count, out, element);
    default:
      return StoreAll<uint64_t>(count, out, element);
  }
}

// The data has no NaN: MPI's max and min are NCCL's on it.
Spec WithoutNanRule(Spec spec) {
  if (spec.op == ReduceOp::kMaxNan) spec.op = ReduceOp::kMax;
  if (spec.op == ReduceOp::kMinNan) spec.op = ReduceOp::kMin;
  return spec;
}

// The rules of one Spec (see exact_data.h), with what every element shares computed once.
class Generator {
 public:
  explicit Generator(const Spec& spec)
      : spec_(WithoutNanRule(spec)),
        is_float_(IsFloat(spec.type)),
        mask_(WidthMask(spec.type)),
        rounds_inputs_(spec.type == DataType::kBfloat16 &&
                       (spec_.op == ReduceOp::kMax || spec_.op == ReduceOp::kMin)),
        magnitude_(std::max<uint64_t>(
            1, ExactLimit(spec.type) / static_cast<uint64_t>(std::max(spec.ranks, 1)))) {}

  // Each rank draws from a stream of its own, so that no two ranks' inputs are shifted copies.
  uint64_t Stream(int rank) const { return Mix(Mix(spec_.seed) ^ static_cast<uint64_t>(rank)); }

  // Element `index` of `rank`'s input; `stream` is Stream(rank).
  uint64_t Element(uint64_t stream, int rank, int64_t index) const {
    const uint64_t noise = Mix(stream + static_cast<uint64_t>(index));
    if (is_float_) return EncodeFloat(spec_.type, FloatValue(noise, rank, index));
    return IntegerValue(noise) & mask_;
  }

  // Element `index` of the exact reduction over every rank (before kAvg's division), in exact
  // arithmetic on the inputs as stored; `streams[rank]` is Stream(rank).
  uint64_t ReducedElement(const std::vector<uint64_t>& streams, int64_t index) const {
    if (is_float_) {
      double accumulator = StoredFloat(streams[0], 0, index);
      for (int rank = 1; rank < spec_.ranks; ++rank) {
        accumulator = CombineFloats(accumulator, StoredFloat(streams[rank], rank, index));
      }
      return EncodeFloat(spec_.type, accumulator);  // exact: every result is representable
    }
    uint64_t accumulator = Element(streams[0], 0, index);
    for (int rank = 1; rank < spec_.ranks; ++rank) {
      accumulator = CombineIntegers(accumulator, Element(streams[rank], rank, index));
    }
    return accumulator & mask_;
  }

 private:
  // A float input's value as stored: FloatValue itself, exact in the type, except max/min in
  // bf16, which rounds them.
  double StoredFloat(uint64_t stream, int rank, int64_t index) const {
    if (rounds_inputs_) return DecodeFloat(spec_.type, Element(stream, rank, index));
    return FloatValue(Mix(stream + static_cast<uint64_t>(index)), rank, index);
  }

  double FloatValue(uint64_t noise, int rank, int64_t index) const {
    switch (spec_.op) {
      case ReduceOp::kSum:
        return static_cast<double>(Within(noise, magnitude_));
      case ReduceOp::kAvg:
        return static_cast<double>(1 + Below(noise, magnitude_));
      case ReduceOp::kProd: {
        static constexpr double kPowers[] = {0.5, 1, 2};
        const double magnitude = InProductWindow(rank, index) ? kPowers[Below(noise, 3)] : 1;
        return (noise & 1) != 0 ? -magnitude : magnitude;
      }
      case ReduceOp::kMax:
      case ReduceOp::kMin:
      case ReduceOp::kMaxNan:  // as kMax and kMin: WithoutNanRule
      case ReduceOp::kMinNan: {
        const double steps = static_cast<double>(1 + Below(noise, kMaxMinSteps));
        return ((noise & 1) != 0 ? -steps : steps) / 8;
      }
    }
    return 0;
  }

  uint64_t IntegerValue(uint64_t noise) const {
    switch (spec_.op) {
      case ReduceOp::kSum:
        return IsSignedInteger(spec_.type) ? static_cast<uint64_t>(Within(noise, magnitude_))
                                           : UpTo(noise, magnitude_);
      case ReduceOp::kMax:
      case ReduceOp::kMin:
      case ReduceOp::kMaxNan:  // as kMax and kMin: WithoutNanRule
      case ReduceOp::kMinNan:
        return noise;
      case ReduceOp::kProd:
        return noise | 1;
      case ReduceOp::kAvg:
        return 1 + Below(noise, magnitude_);
    }
    return 0;
  }

  // The ranks whose prod inputs may be +-2 or +-1/2 for element `index`: kProductWindow of them,
  // a different set from one element to the next.
  bool InProductWindow(int rank, int64_t index) const {
    const int ranks = spec_.ranks;
    if (ranks <= kProductWindow) return true;
    return ((rank - index % ranks) + ranks) % ranks < kProductWindow;
  }

  double CombineFloats(double accumulator, double value) const {
    switch (spec_.op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return accumulator + value;
      case ReduceOp::kProd:
        return accumulator * value;
      case ReduceOp::kMax:
        return std::max(accumulator, value);
      case ReduceOp::kMin:
        return std::min(accumulator, value);
      case ReduceOp::kMaxNan:  // never: WithoutNanRule
      case ReduceOp::kMinNan:
        break;
    }
    return accumulator;
  }

  // Wrap-around arithmetic in 64 bits, then the type's width: the same as in the type's width.
  uint64_t CombineIntegers(uint64_t accumulator, uint64_t value) const {
    switch (spec_.op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return accumulator + value;
      case ReduceOp::kProd:
        return accumulator * value;
      case ReduceOp::kMax:
      case ReduceOp::kMin:
      case ReduceOp::kMaxNan:  // as kMax and kMin: WithoutNanRule
      case ReduceOp::kMinNan: {
        const bool value_larger = IsSignedInteger(spec_.type)
                                      ? SignExtend(value, BitWidth(spec_.type)) >
                                            SignExtend(accumulator, BitWidth(spec_.type))
                                      : value > accumulator;
        return value_larger == (spec_.op == ReduceOp::kMax) ? value : accumulator;
      }
    }
    return accumulator;
  }

  const Spec spec_;
  const bool is_float_;
  const uint64_t mask_;  // the type's width
  const bool rounds_inputs_;
  // sum: |float inputs| <= magnitude_; avg: 1 <= inputs <= magnitude_.
  const uint64_t magnitude_;
};

// Sign-magnitude bits as an ordered integer, so that neighbouring floats differ by one.
__int128 OrderedBits(uint64_t bits, int size) {
  const uint64_t sign = uint64_t{1} << (8 * size - 1);
  const __int128 magnitude = bits & (sign - 1);
  return (bits & sign) != 0 ? -magnitude : magnitude;
}

}  // namespace

uint64_t SplitMix64(uint64_t x) { return Mix(x); }

uint64_t InputElement(const Spec& spec, int rank, int64_t index) {
  const Generator generator(spec);
  return generator.Element(generator.Stream(rank), rank, index);
}

void FillInput(const Spec& spec, int rank, int64_t first, int64_t count, void* out) {
  const Generator generator(spec);
  const uint64_t stream = generator.Stream(rank);
  StoreEach(spec.type, count, out,
            [&](int64_t i) { return generator.Element(stream, rank, first + i); });
}

Bytes MakeInput(const Spec& spec, int rank, int64_t count) {
  Bytes input(count * DataTypeSize(spec.type));
  FillInput(spec, rank, 0, count, input.data());
  return input;
}

void FillReference(const Spec& spec, int64_t first, int64_t count, void* out) {
  const Generator generator(spec);
  std::vector<uint64_t> streams(spec.ranks);
  for (int rank = 0; rank < spec.ranks; ++rank) streams[rank] = generator.Stream(rank);
  StoreEach(spec.type, count, out,
            [&](int64_t i) { return generator.ReducedElement(streams, first + i); });
  FinalizeReduction(spec.type, spec.op, out, count, spec.ranks);
}

Bytes Reference(const Spec& spec, int64_t count) {
  Bytes result(count * DataTypeSize(spec.type));
  FillReference(spec, 0, count, result.data());
  return result;
}

int64_t UlpTolerance(const Spec& spec, Averaging averaging) {
  if (spec.op != ReduceOp::kAvg || !IsFloat(spec.type) || averaging != Averaging::kScaleThenSum ||
      std::has_single_bit(static_cast<unsigned>(spec.ranks))) {
    return 0;
  }
  return spec.ranks + 2;
}

Mismatches Compare(DataType type, const void* got, const void* want, int64_t count, int64_t ulps) {
  const int size = DataTypeSize(type);
  Mismatches result;
  if (count <= 0 || std::memcmp(got, want, count * size) == 0) return result;
  const int64_t tolerance = IsFloat(type) ? ulps : 0;
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t a = LoadBits(type, got, i);
    const uint64_t b = LoadBits(type, want, i);
    if (a == b) continue;
    if (tolerance > 0) {
      const __int128 distance = OrderedBits(a, size) - OrderedBits(b, size);
      if (distance <= tolerance && -distance <= tolerance) continue;
    }
    if (result.first < 0) result.first = i;
    ++result.count;
  }
  return result;
}

double ElementValue(DataType type, const void* data, int64_t index) {
  const uint64_t bits = LoadBits(type, data, index);
  if (IsFloat(type)) return DecodeFloat(type, bits);
  if (IsSignedInteger(type)) return static_cast<double>(SignExtend(bits, BitWidth(type)));
  return static_cast<double>(bits);
}

std::string ElementString(DataType type, const void* data, int64_t index) {
  const uint64_t bits = LoadBits(type, data, index);
  std::string value;
  if (IsFloat(type)) {
    // The shortest decimal that reads back as the same value: neighbours one ulp apart differ.
    char text[32];
    const double decoded = DecodeFloat(type, bits);
    const std::to_chars_result end =
        type == DataType::kFloat64
            ? std::to_chars(text, text + sizeof(text), decoded)
            : std::to_chars(text, text + sizeof(text), static_cast<float>(decoded));
    value.assign(text, end.ptr);
  } else if (IsSignedInteger(type)) {
    value = absl::StrCat(SignExtend(bits, BitWidth(type)));
  } else {
    value = absl::StrCat(bits);
  }
  return absl::StrFormat("%s (0x%0*x)", value, 2 * DataTypeSize(type), bits);
}

Bytes MakeRandomFloatInput(DataType type, int rank, int64_t count, uint64_t seed) {
  const uint64_t stream = Mix(Mix(seed) ^ static_cast<uint64_t>(rank));
  Bytes input(count * DataTypeSize(type));
  StoreEach(type, count, input.data(), [&](int64_t i) {
    const uint64_t noise = Mix(stream + static_cast<uint64_t>(i));
    return EncodeFloat(type, static_cast<double>(noise >> 11) * 0x1p-52 - 1.0);
  });
  return input;
}

}  // namespace stragglar::exact_data
