#include "kernels/reduce/reduce.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "absl/base/attributes.h"
#include "absl/base/macros.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/reduce/reduce_element.h"

namespace stragglar {
namespace {

// Indexed by DataType / ReduceOp; the order must match the enums.
constexpr std::array<absl::string_view, 10> kDataTypeNames = {
    "int8",   "uint8",   "int32",   "uint32",  "int64",
    "uint64", "float16", "float32", "float64", "bfloat16"};
constexpr std::array<absl::string_view, 7> kReduceOpNames = {"sum", "prod",    "max",    "min",
                                                             "avg", "max-nan", "min-nan"};

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

// The element rules (conversions, codecs, operators, the average's division) live in
// reduce_element.h, shared with the CUDA kernels; this file has the CPU loops around them.
using reduce_element::Bfloat16BitsToFloat;
using reduce_element::CodecTag;
using reduce_element::DispatchOnType;
using reduce_element::DivideElement;
using reduce_element::FloatToBfloat16Bits;
using reduce_element::FloatToHalfBits;
using reduce_element::HalfBitsToFloat;
using reduce_element::kIsSixteenBitFloat;
using reduce_element::MaxNanOp;
using reduce_element::MaxOp;
using reduce_element::MinNanOp;
using reduce_element::MinOp;
using reduce_element::NanSymmetric;
using reduce_element::ProdOp;
using reduce_element::ReduceElement;
using reduce_element::SumOp;

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
//
// A sum or product of floats checks each span first for two NaNs that may meet, and reduces such
// a span with NanSymmetric<Op>, whose per-element selects would cost the common span 2-5x
// (reduce_element.h says why it is needed). The check is integer adds and ands on the top word of
// each element, 32 bits or narrower, which SSE2 vectorizes (it has no unsigned or 64-bit
// compares): an exponent of all ones in both operands (two NaNs, or an infinity with a NaN or
// another infinity), a superset of two NaNs.
template <typename Codec, typename Op>
inline constexpr bool kChecksNans =
    Op::kArithmetic&& std::is_floating_point_v<typename Codec::Compute>;

// Whether any element of `incoming[0, count)` is an infinity or a NaN, in 16-byte vectors of its
// words (GCC's vector extension, which every target lowers): each word, sign cleared, plus
// kTopBit - kSpecial has its top bit set exactly when it is an infinity's or a NaN's top word
// (the sum stays below twice kTopBit). A double's low word is masked out.
template <typename Codec>
bool HasSpecialValues(const typename Codec::Storage* incoming, int64_t count) {
  using Storage = typename Codec::Storage;
  using Word = std::conditional_t<sizeof(Storage) == 2, uint16_t, uint32_t>;
  using Vector [[gnu::vector_size(16)]] = Word;
  constexpr Word kTopBit = static_cast<Word>(Word{1} << (8 * sizeof(Word) - 1));
  constexpr Word kSpecial = std::is_same_v<Codec, reduce_element::HalfCodec>       ? 0x7c00
                            : std::is_same_v<Codec, reduce_element::Bfloat16Codec> ? 0x7f80
                            : sizeof(Storage) == 4                                 ? 0x7f800000u
                                                                                   : 0x7ff00000u;
  constexpr int kWords = 16 / sizeof(Word);
  Vector top_words;  // ~0 in the words that hold a sign and exponent (little-endian)
  for (int k = 0; k < kWords; ++k) {
    top_words[k] = sizeof(Storage) == 8 && k % 2 == 0 ? 0 : static_cast<Word>(~Word{0});
  }
  const auto* bytes = reinterpret_cast<const char*>(incoming);
  const int64_t total = count * static_cast<int64_t>(sizeof(Storage));
  Vector found = {};
  int64_t at = 0;
  for (; at + 16 <= total; at += 16) {
    Vector words;
    std::memcpy(&words, bytes + at, 16);
    found |= ((words & static_cast<Word>(kTopBit - 1)) + static_cast<Word>(kTopBit - kSpecial)) &
             top_words;
  }
  Word any = 0;
  for (int k = 0; k < kWords; ++k) any |= found[k];
  for (int64_t j = at / static_cast<int64_t>(sizeof(Storage)); j < count; ++j) {
    Word word;
    std::memcpy(&word, reinterpret_cast<const char*>(incoming + j) + sizeof(Storage) - sizeof(Word),
                sizeof(Word));
    any |= static_cast<Word>((word & static_cast<Word>(kTopBit - 1)) +
                             static_cast<Word>(kTopBit - kSpecial));
  }
  return (any & kTopBit) != 0;
}

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
      out[i + j] = ReduceElement<Codec, Op>(a, second[i + j]);
    }
  }
  for (; i < count; ++i) {
    const Storage a = kInPlace ? out[i] : first[i];
    out[i] = ReduceElement<Codec, Op>(a, second[i]);
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
  // Elements [begin, end) with `Op`.
  auto loop = [&]<typename Op, bool kInPlace>(int64_t begin, int64_t end) {
    const Storage* const from = kInPlace ? nullptr : first + begin;
    if constexpr (kIsSixteenBitFloat<Codec>) {
      ReducePairsLoop<Codec, Op, kInPlace>(out + begin, from, second + begin, end - begin);
    } else {
      ReduceLoop<Codec, Op, kInPlace>(out + begin, from, second + begin, end - begin);
    }
  };
  auto run = [&]<typename Op, bool kInPlace>() {
    if constexpr (kChecksNans<Codec, Op>) {
      // Checked at once: spans of L1-resident size, so that the check's fold and branch are paid
      // once per 4 KiB and its read of the incoming operand hits the cache in the reduction.
      constexpr int64_t kCheckedSpanBytes = 4096;
      // A span at a time: NanSymmetric<Op> where the incoming span has an infinity or a NaN.
      constexpr int64_t kSpan = kCheckedSpanBytes / sizeof(Storage);
      for (int64_t begin = 0; begin < count; begin += kSpan) {
        const int64_t end = std::min(count, begin + kSpan);
        if (HasSpecialValues<Codec>(second + begin, end - begin)) {
          loop.template operator()<NanSymmetric<Op>, kInPlace>(begin, end);
        } else {
          loop.template operator()<Op, kInPlace>(begin, end);
        }
      }
    } else {
      loop.template operator()<Op, kInPlace>(0, count);
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
    case ReduceOp::kMaxNan:
      return reduce.template operator()<MaxNanOp>();
    case ReduceOp::kMinNan:
      return reduce.template operator()<MinNanOp>();
  }
}

// Divides by the rank count (reduce_element::DivideValue has the rule).
template <typename Codec>
void DivideLoop(void* data_bytes, int64_t count, int divisor) {
  using Storage = typename Codec::Storage;
  Storage* data = static_cast<Storage*>(data_bytes);
  for (int64_t i = 0; i < count; ++i) data[i] = DivideElement<Codec>(data[i], divisor);
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
  for (ReduceOp op : kEveryReduceOp) {
    if (ReduceOpName(op) == name) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reduction operator \"", name,
                                                 "\"; expected one of ",
                                                 absl::StrJoin(kReduceOpNames, ", ")));
}

void ReduceInto(DataType type, ReduceOp op, void* accumulator, const void* incoming,
                int64_t count) {
  if (count <= 0) return;
  DispatchOnType(type, [&]<typename Codec>(CodecTag<Codec>) {
    ReduceWithCodec<Codec>(op, accumulator, nullptr, incoming, count);
  });
}

void Reduce(DataType type, ReduceOp op, void* out, const void* first, const void* second,
            int64_t count) {
  if (count <= 0) return;
  DispatchOnType(type, [&]<typename Codec>(CodecTag<Codec>) {
    ReduceWithCodec<Codec>(op, out, first, second, count);
  });
}

void FinalizeReduction(DataType type, ReduceOp op, void* data, int64_t count, int num_ranks) {
  ABSL_ASSERT(num_ranks >= 1);
  if (op != ReduceOp::kAvg || num_ranks <= 1 || count <= 0) return;
  DispatchOnType(
      type, [&]<typename Codec>(CodecTag<Codec>) { DivideLoop<Codec>(data, count, num_ranks); });
}

float HalfToFloat(uint16_t half) { return HalfBitsToFloat(half); }
uint16_t FloatToHalf(float value) { return static_cast<uint16_t>(FloatToHalfBits(value)); }
float Bfloat16ToFloat(uint16_t value) { return Bfloat16BitsToFloat(value); }
uint16_t FloatToBfloat16(float value) { return static_cast<uint16_t>(FloatToBfloat16Bits(value)); }

}  // namespace stragglar
