#include "kernels/reduce/exact_data.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reduce/reduce.h"

namespace stragglar::exact_data {
namespace {

constexpr int64_t kCount = 293;  // a prime: chunks of uneven sizes
constexpr int kMaxRanks = 64;    // `stragglar run`'s limit

std::string Describe(const Spec& spec) {
  return absl::StrCat(DataTypeName(spec.type), " ", ReduceOpName(spec.op), " n=", spec.ranks);
}

bool IsFloat(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kBfloat16;
}

std::vector<Bytes> Inputs(const Spec& spec, int64_t count) {
  std::vector<Bytes> inputs;
  for (int rank = 0; rank < spec.ranks; ++rank) inputs.push_back(MakeInput(spec, rank, count));
  return inputs;
}

// The library's kernels (one rounding to the type per step) over the ranks in `order`.
Bytes ReduceInOrder(const Spec& spec, const std::vector<Bytes>& inputs,
                    const std::vector<int>& order, int64_t count) {
  Bytes result = inputs[order[0]];
  for (size_t i = 1; i < order.size(); ++i) {
    ReduceInto(spec.type, spec.op, result.data(), inputs[order[i]].data(), count);
  }
  FinalizeReduction(spec.type, spec.op, result.data(), count, spec.ranks);
  return result;
}

// Ranks [begin, end) reduced as a balanced tree: partial results of two halves combined.
Bytes ReduceTree(const Spec& spec, const std::vector<Bytes>& inputs, int begin, int end,
                 int64_t count) {
  if (end - begin == 1) return inputs[begin];
  const int middle = begin + (end - begin) / 2;
  const Bytes left = ReduceTree(spec, inputs, begin, middle, count);
  const Bytes right = ReduceTree(spec, inputs, middle, end, count);
  Bytes result(left.size());
  Reduce(spec.type, spec.op, result.data(), left.data(), right.data(), count);
  return result;
}

::testing::AssertionResult SameBits(const Spec& spec, const Bytes& got, const Bytes& want,
                                    const std::string& order) {
  const Mismatches mismatches = Compare(spec.type, got.data(), want.data(), kCount);
  if (mismatches.count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << Describe(spec) << ", " << order << ": " << mismatches.count
         << " elements differ from the reference; the first, " << mismatches.first << ", is "
         << ElementString(spec.type, got.data(), mismatches.first) << ", expected "
         << ElementString(spec.type, want.data(), mismatches.first);
}

// Every type x op x rank count: rank order, reverse order and a tree of partial results, each
// rounded to the type at every step, give the reference bit for bit.
TEST(ExactDataTest, ExactInEveryOrderForEveryTypeOpAndRankCount) {
  for (DataType type : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (int ranks = 1; ranks <= kMaxRanks; ++ranks) {
        const Spec spec{.type = type, .op = op, .ranks = ranks, .seed = SplitMix64(ranks)};
        const std::vector<Bytes> inputs = Inputs(spec, kCount);
        const Bytes reference = Reference(spec, kCount);
        std::vector<int> order(ranks);
        for (int rank = 0; rank < ranks; ++rank) order[rank] = rank;
        ASSERT_TRUE(
            SameBits(spec, ReduceInOrder(spec, inputs, order, kCount), reference, "rank order"));
        std::reverse(order.begin(), order.end());
        ASSERT_TRUE(
            SameBits(spec, ReduceInOrder(spec, inputs, order, kCount), reference, "reverse order"));
        Bytes tree = ReduceTree(spec, inputs, 0, ranks, kCount);
        FinalizeReduction(type, op, tree.data(), kCount, ranks);
        ASSERT_TRUE(SameBits(spec, tree, reference, "tree"));
      }
    }
  }
}

// bfloat16 has the narrowest exact range: sums stay exact up to 256 ranks.
TEST(ExactDataTest, Bfloat16SumsExactUpTo256Ranks) {
  const Spec spec{.type = DataType::kBfloat16, .op = ReduceOp::kSum, .ranks = 256, .seed = 3};
  const std::vector<Bytes> inputs = Inputs(spec, kCount);
  std::vector<int> order(spec.ranks);
  for (int rank = 0; rank < spec.ranks; ++rank) order[rank] = rank;
  const Bytes reference = Reference(spec, kCount);
  EXPECT_TRUE(SameBits(spec, ReduceInOrder(spec, inputs, order, kCount), reference, "rank order"));
  std::reverse(order.begin(), order.end());
  EXPECT_TRUE(
      SameBits(spec, ReduceInOrder(spec, inputs, order, kCount), reference, "reverse order"));
}

// Element `index` of integer `data`, sign- or zero-extended.
__int128 IntegerAt(DataType type, const Bytes& data, int64_t index) {
  const int size = DataTypeSize(type);
  uint64_t bits = 0;
  std::memcpy(&bits, data.data() + index * size, size);
  const bool is_signed =
      type == DataType::kInt8 || type == DataType::kInt32 || type == DataType::kInt64;
  if (!is_signed || size == 8) {
    return is_signed ? __int128{static_cast<int64_t>(bits)} : __int128{bits};
  }
  const int shift = 64 - 8 * size;
  return static_cast<int64_t>(bits << shift) >> shift;
}

// Integer sums and averages never overflow, whatever subset of ranks is summed first: some
// reducers saturate instead of wrapping (OpenMPI's vectorized 8-bit sums).
TEST(ExactDataTest, IntegerSumsNeverOverflow) {
  for (DataType type : {DataType::kInt8, DataType::kUint8, DataType::kInt32, DataType::kUint32,
                        DataType::kInt64, DataType::kUint64}) {
    const int size = DataTypeSize(type);
    const bool is_signed =
        type == DataType::kInt8 || type == DataType::kInt32 || type == DataType::kInt64;
    const __int128 high =
        is_signed ? (__int128{1} << (8 * size - 1)) - 1 : (__int128{1} << (8 * size)) - 1;
    const __int128 low = is_signed ? -high - 1 : 0;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      for (int ranks = 1; ranks <= kMaxRanks; ++ranks) {
        const Spec spec{.type = type, .op = op, .ranks = ranks, .seed = 8};
        const std::vector<Bytes> inputs = Inputs(spec, kCount);
        for (int64_t i = 0; i < kCount; ++i) {
          __int128 positive = 0, negative = 0;  // the extremes of any subset's sum
          for (const Bytes& input : inputs) {
            const __int128 value = IntegerAt(type, input, i);
            (value > 0 ? positive : negative) += value;
          }
          ASSERT_LE(positive, high) << Describe(spec) << " element " << i;
          ASSERT_GE(negative, low) << Describe(spec) << " element " << i;
        }
      }
    }
  }
}

// Float products: at most 8 ranks per element contribute a power of two other than +-1, so no
// partial product leaves [2^-8, 2^8] (fp16's normal range) whatever the order.
TEST(ExactDataTest, FloatProductsHaveAtMostEightNonUnitFactors) {
  for (DataType type :
       {DataType::kFloat16, DataType::kFloat32, DataType::kFloat64, DataType::kBfloat16}) {
    for (int ranks = 1; ranks <= kMaxRanks; ++ranks) {
      const Spec spec{.type = type, .op = ReduceOp::kProd, .ranks = ranks, .seed = 4};
      const std::vector<Bytes> inputs = Inputs(spec, kCount);
      for (int64_t i = 0; i < kCount; ++i) {
        int non_unit = 0;
        for (const Bytes& input : inputs) {
          const double value = std::abs(ElementValue(type, input.data(), i));
          ASSERT_TRUE(value == 0.5 || value == 1 || value == 2) << Describe(spec);
          non_unit += value != 1;
        }
        ASSERT_LE(non_unit, 8) << Describe(spec) << " element " << i;
      }
    }
  }
}

// `value` rounded to `type` (via double: exact products and sums of the narrow types, so one
// rounding per operation, as on the device).
double RoundTo(DataType type, double value) {
  switch (type) {
    case DataType::kFloat16:
      return HalfToFloat(FloatToHalf(static_cast<float>(value)));
    case DataType::kBfloat16:
      return Bfloat16ToFloat(FloatToBfloat16(static_cast<float>(value)));
    case DataType::kFloat32:
      return static_cast<float>(value);
    default:
      return value;
  }
}

void StoreRounded(DataType type, Bytes& data, int64_t index, double value) {
  const int size = DataTypeSize(type);
  uint64_t bits = 0;
  switch (type) {
    case DataType::kFloat16:
      bits = FloatToHalf(static_cast<float>(value));
      break;
    case DataType::kBfloat16:
      bits = FloatToBfloat16(static_cast<float>(value));
      break;
    case DataType::kFloat32:
      bits = std::bit_cast<uint32_t>(static_cast<float>(value));
      break;
    default:
      bits = std::bit_cast<uint64_t>(value);
  }
  std::memcpy(data.data() + index * size, &bits, size);
}

// NCCL's float average, sum(x * (1/n)) rounded at every step, stays within UlpTolerance: bit for
// bit when n is a power of two.
TEST(ExactDataTest, ScaledAverageWithinTolerance) {
  for (DataType type :
       {DataType::kFloat16, DataType::kFloat32, DataType::kFloat64, DataType::kBfloat16}) {
    for (int ranks = 1; ranks <= kMaxRanks; ++ranks) {
      const Spec spec{.type = type, .op = ReduceOp::kAvg, .ranks = ranks, .seed = 11};
      const std::vector<Bytes> inputs = Inputs(spec, kCount);
      const double scale = RoundTo(type, 1.0 / ranks);
      Bytes scaled(kCount * DataTypeSize(type));
      for (int64_t i = 0; i < kCount; ++i) {
        double sum = 0;
        for (const Bytes& input : inputs) {
          sum = RoundTo(type, sum + RoundTo(type, ElementValue(type, input.data(), i) * scale));
        }
        StoreRounded(type, scaled, i, sum);
      }
      const int64_t ulps = UlpTolerance(spec, Averaging::kScaleThenSum);
      EXPECT_EQ(ulps == 0, std::has_single_bit(static_cast<unsigned>(ranks))) << Describe(spec);
      const Bytes reference = Reference(spec, kCount);
      const Mismatches mismatches = Compare(type, scaled.data(), reference.data(), kCount, ulps);
      EXPECT_EQ(mismatches.count, 0)
          << Describe(spec) << ": element " << mismatches.first << " is "
          << ElementString(type, scaled.data(), std::max<int64_t>(mismatches.first, 0))
          << ", expected "
          << ElementString(type, reference.data(), std::max<int64_t>(mismatches.first, 0));
    }
  }
}

TEST(ExactDataTest, ToleranceOnlyForScaledFloatAveragesOverOtherThanPowersOfTwo) {
  const Spec avg{.type = DataType::kFloat32, .op = ReduceOp::kAvg, .ranks = 6};
  EXPECT_EQ(UlpTolerance(avg, Averaging::kScaleThenSum), 8);
  EXPECT_EQ(UlpTolerance(avg, Averaging::kSumThenDivide), 0);
  EXPECT_EQ(UlpTolerance({.type = DataType::kFloat32, .op = ReduceOp::kAvg, .ranks = 8},
                         Averaging::kScaleThenSum),
            0);
  EXPECT_EQ(UlpTolerance({.type = DataType::kInt32, .op = ReduceOp::kAvg, .ranks = 6},
                         Averaging::kScaleThenSum),
            0);
  EXPECT_EQ(UlpTolerance({.type = DataType::kFloat16, .op = ReduceOp::kSum, .ranks = 6},
                         Averaging::kScaleThenSum),
            0);
}

// Elements follow from (spec, rank, index) alone: any range of a rank's input or of the reference
// is the same as in the whole buffer.
TEST(ExactDataTest, ElementsIndependentOfTheRangeFilled) {
  const Spec spec{.type = DataType::kInt32, .op = ReduceOp::kSum, .ranks = 5, .seed = 9};
  const Bytes whole = MakeInput(spec, 3, kCount);
  Bytes part(40 * 4);
  FillInput(spec, 3, 100, 40, part.data());
  EXPECT_EQ(0, std::memcmp(part.data(), whole.data() + 100 * 4, part.size()));
  uint32_t element = 0;
  std::memcpy(&element, whole.data() + 7 * 4, 4);
  EXPECT_EQ(InputElement(spec, 3, 7), element);
  const Bytes reference = Reference(spec, kCount);
  FillReference(spec, 100, 40, part.data());
  EXPECT_EQ(0, std::memcmp(part.data(), reference.data() + 100 * 4, part.size()));
}

// Random-looking: no two ranks hold the same input, and a different seed changes the data.
TEST(ExactDataTest, RanksAndSeedsGiveDifferentInputs) {
  for (DataType type : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      const Spec spec{.type = type, .op = op, .ranks = 16, .seed = 5};
      const std::vector<Bytes> inputs = Inputs(spec, kCount);
      for (int a = 0; a < spec.ranks; ++a) {
        for (int b = a + 1; b < spec.ranks; ++b) {
          EXPECT_NE(inputs[a], inputs[b]) << Describe(spec) << ": ranks " << a << " and " << b;
        }
      }
      Spec other = spec;
      other.seed = 6;
      EXPECT_NE(MakeInput(other, 0, kCount), inputs[0]) << Describe(spec);
      EXPECT_NE(Reference(other, kCount), Reference(spec, kCount)) << Describe(spec);
    }
  }
}

// Chunk c of `count` elements split n ways, as the plans lay them out (the first count % n chunks
// one element longer).
std::pair<int64_t, int64_t> Chunk(int64_t count, int chunks, int c) {
  const int64_t base = count / chunks, extra = count % chunks;
  const int64_t begin = c * base + std::min<int64_t>(c, extra);
  return {begin, base + (c < extra ? 1 : 0)};
}

// A result with chunk `a` and chunk `b` exchanged (the shorter length of the two).
Bytes SwapChunks(DataType type, Bytes result, int64_t count, int chunks, int a, int b) {
  const int size = DataTypeSize(type);
  const auto [begin_a, length_a] = Chunk(count, chunks, a);
  const auto [begin_b, length_b] = Chunk(count, chunks, b);
  const int64_t length = std::min(length_a, length_b);
  std::swap_ranges(result.begin() + begin_a * size, result.begin() + (begin_a + length) * size,
                   result.begin() + begin_b * size);
  return result;
}

// Planted bugs are reported: two chunks swapped, a chunk reduced from one rank too few, a result
// left over from another call, one element one ulp (or one unit) off.
TEST(ExactDataTest, PlantedBugsAreReported) {
  for (DataType type : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (int ranks = 2; ranks <= 16; ++ranks) {
        const Spec spec{.type = type, .op = op, .ranks = ranks, .seed = SplitMix64(ranks + 100)};
        const Bytes reference = Reference(spec, kCount);
        const int64_t ulps = UlpTolerance(spec, Averaging::kScaleThenSum);
        for (int c = 0; c + 1 < ranks; ++c) {
          const Bytes swapped = SwapChunks(type, reference, kCount, ranks, c, c + 1);
          EXPECT_GT(Compare(type, swapped.data(), reference.data(), kCount, ulps).count, 0)
              << Describe(spec) << ": chunks " << c << " and " << c + 1 << " swapped";
        }
        // The last rank's contribution missing (max and min notice it where it held the
        // extreme).
        Bytes missing = MakeInput(spec, 0, kCount);
        for (int rank = 1; rank + 1 < ranks; ++rank) {
          ReduceInto(type, op, missing.data(), MakeInput(spec, rank, kCount).data(), kCount);
        }
        FinalizeReduction(type, op, missing.data(), kCount, ranks);
        EXPECT_GT(Compare(type, missing.data(), reference.data(), kCount, ulps).count, 0)
            << Describe(spec) << ": rank " << ranks - 1 << " missing";
        Spec stale = spec;
        stale.seed += 1;
        const Bytes other = Reference(stale, kCount);
        EXPECT_GT(Compare(type, other.data(), reference.data(), kCount, ulps).count, 0)
            << Describe(spec) << ": a result of another call";
      }
    }
  }
}

TEST(ExactDataTest, OneElementOffIsReportedWhereItIs) {
  for (DataType type : kAllDataTypes) {
    const Spec spec{.type = type, .op = ReduceOp::kSum, .ranks = 5, .seed = 2};
    const Bytes reference = Reference(spec, kCount);
    const int size = DataTypeSize(type);
    Bytes off = reference;
    off[100 * size] ^= std::byte{1};  // the lowest bit: one ulp, or one unit
    const Mismatches mismatches = Compare(type, off.data(), reference.data(), kCount);
    EXPECT_EQ(mismatches.count, 1) << DataTypeName(type);
    EXPECT_EQ(mismatches.first, 100) << DataTypeName(type);
    // A tolerance covers floats one ulp off, never integers.
    EXPECT_EQ(Compare(type, off.data(), reference.data(), kCount, 1).count, IsFloat(type) ? 0 : 1)
        << DataTypeName(type);
  }
}

TEST(ExactDataTest, ToleranceCountsUlpsAcrossZero) {
  const float values[] = {0.0f, 1.0f, -1.0f};
  float got[3], want[3];
  std::memcpy(want, values, sizeof(values));
  std::memcpy(got, values, sizeof(values));
  got[0] = -std::bit_cast<float>(uint32_t{2});  // 2 ulps below +0
  got[1] = std::bit_cast<float>(std::bit_cast<uint32_t>(1.0f) + 3);
  EXPECT_EQ(Compare(DataType::kFloat32, got, want, 3, 2).count, 1);
  EXPECT_EQ(Compare(DataType::kFloat32, got, want, 3, 2).first, 1);
  EXPECT_EQ(Compare(DataType::kFloat32, got, want, 3, 3).count, 0);
  EXPECT_EQ(Compare(DataType::kFloat32, got, want, 3, 0).count, 2);
}

TEST(ExactDataTest, ElementStringShowsValueAndBits) {
  const float single = -3;
  EXPECT_EQ(ElementString(DataType::kFloat32, &single, 0), "-3 (0xc0400000)");
  const uint16_t half = FloatToHalf(0.5f);
  EXPECT_EQ(ElementString(DataType::kFloat16, &half, 0), "0.5 (0x3800)");
  const float next = std::bit_cast<float>(std::bit_cast<uint32_t>(1.0f) + 1);
  EXPECT_EQ(ElementString(DataType::kFloat32, &next, 0), "1.0000001 (0x3f800001)");
  const double tenth = 0.1;
  EXPECT_EQ(ElementString(DataType::kFloat64, &tenth, 0), "0.1 (0x3fb999999999999a)");
  const int8_t small[] = {1, -5};
  EXPECT_EQ(ElementString(DataType::kInt8, small, 1), "-5 (0xfb)");
  const uint64_t large = ~uint64_t{0};
  EXPECT_EQ(ElementString(DataType::kUint64, &large, 0),
            "18446744073709551615 (0xffffffffffffffff)");
  EXPECT_EQ(ElementValue(DataType::kInt8, small, 1), -5);
}

TEST(ExactDataTest, RandomFloatsSpanMinusOneToOne) {
  const Bytes input = MakeRandomFloatInput(DataType::kFloat32, 2, 1000, 42);
  double low = 1, high = -1;
  for (int64_t i = 0; i < 1000; ++i) {
    const double value = ElementValue(DataType::kFloat32, input.data(), i);
    ASSERT_GE(value, -1);
    ASSERT_LE(value, 1);
    low = std::min(low, value);
    high = std::max(high, value);
  }
  EXPECT_LT(low, -0.9);
  EXPECT_GT(high, 0.9);
  EXPECT_NE(input, MakeRandomFloatInput(DataType::kFloat32, 3, 1000, 42));
}

}  // namespace
}  // namespace stragglar::exact_data
