#include "kernels/reduce/reduce.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reduce/reduce_element.h"
#include "tests/float_formats.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// Names.

TEST(NamesTest, DataTypeNamesRoundTrip) {
  for (DataType type : kAllDataTypes) {
    absl::StatusOr<DataType> parsed = ParseDataType(DataTypeName(type));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, type);
  }
  EXPECT_EQ(DataTypeName(DataType::kBfloat16), "bfloat16");
  EXPECT_EQ(DataTypeName(DataType::kFloat16), "float16");
}

TEST(NamesTest, DataTypeAliases) {
  EXPECT_EQ(*ParseDataType("half"), DataType::kFloat16);
  EXPECT_EQ(*ParseDataType("fp16"), DataType::kFloat16);
  EXPECT_EQ(*ParseDataType("float"), DataType::kFloat32);
  EXPECT_EQ(*ParseDataType("fp32"), DataType::kFloat32);
  EXPECT_EQ(*ParseDataType("double"), DataType::kFloat64);
  EXPECT_EQ(*ParseDataType("fp64"), DataType::kFloat64);
  EXPECT_EQ(*ParseDataType("bf16"), DataType::kBfloat16);
}

TEST(NamesTest, UnknownDataTypeListsTheNames) {
  for (absl::string_view name : {"x", "", "fp8", "Float32", "int16"}) {
    absl::StatusOr<DataType> parsed = ParseDataType(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("unknown data type \"", name,
                           "\"; expected one of int8, uint8, int32, uint32, int64, uint64, "
                           "float16, float32, float64, bfloat16"));
  }
}

TEST(NamesTest, ReduceOpNamesRoundTrip) {
  for (ReduceOp op : kEveryReduceOp) {
    absl::StatusOr<ReduceOp> parsed = ParseReduceOp(ReduceOpName(op));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, op);
  }
  absl::StatusOr<ReduceOp> parsed = ParseReduceOp("mean");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(),
            "unknown reduction operator \"mean\"; expected one of sum, prod, max, min, avg, "
            "max-nan, min-nan");
}

TEST(NamesTest, DataTypeSizes) {
  const std::vector<int> expected = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  for (size_t i = 0; i < kAllDataTypes.size(); ++i) {
    EXPECT_EQ(DataTypeSize(kAllDataTypes[i]), expected[i]) << DataTypeName(kAllDataTypes[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// ReduceInto for every type and operator against a scalar reference.

// Element counts: empty, shorter than a vector, and around the kernel's block sizes.
constexpr int64_t kCounts[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1027};
// Elements past `count` that must stay untouched.
constexpr int64_t kGuard = 5;

template <typename T>
T ReferenceIntegerOp(ReduceOp op, T accumulated, T incoming) {
  // Arithmetic modulo 2^64, then truncated: the definition of wraparound.
  const uint64_t a = static_cast<uint64_t>(accumulated);
  const uint64_t b = static_cast<uint64_t>(incoming);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return static_cast<T>(a + b);
    case ReduceOp::kProd:
      return static_cast<T>(a * b);
    case ReduceOp::kMax:
    case ReduceOp::kMaxNan:
      return std::max(accumulated, incoming);
    case ReduceOp::kMin:
    case ReduceOp::kMinNan:
      return std::min(accumulated, incoming);
  }
  return T{};
}

// Exact for the inputs used here (small dyadic rationals without NaN).
double ReferenceFloatOp(ReduceOp op, double accumulated, double incoming) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return accumulated + incoming;
    case ReduceOp::kProd:
      return accumulated * incoming;
    case ReduceOp::kMax:
    case ReduceOp::kMaxNan:
      return std::max(accumulated, incoming);
    case ReduceOp::kMin:
    case ReduceOp::kMinNan:
      return std::min(accumulated, incoming);
  }
  return 0;
}

template <typename T>
void CheckIntegerType(DataType type, ReduceOp op) {
  std::mt19937_64 random(42);
  for (int64_t count : kCounts) {
    // Random bit patterns: sums and products wrap around all the time.
    std::vector<T> accumulator(count + kGuard), incoming(count + kGuard);
    for (T& value : accumulator) value = static_cast<T>(random());
    for (T& value : incoming) value = static_cast<T>(random());
    std::vector<T> expected = accumulator;
    for (int64_t i = 0; i < count; ++i) {
      expected[i] = ReferenceIntegerOp(op, accumulator[i], incoming[i]);
    }
    ReduceInto(type, op, accumulator.data(), incoming.data(), count);
    ASSERT_EQ(accumulator, expected) << "count " << count;
  }
}

template <typename T>
void CheckFloatType(DataType type, ReduceOp op) {
  std::mt19937_64 random(42);
  // Multiples of 1/4 in [-16, 16]: every sum, product, max and min is exact in float.
  std::uniform_int_distribution<int> quarters(-64, 64);
  for (int64_t count : kCounts) {
    std::vector<T> accumulator(count + kGuard), incoming(count + kGuard);
    for (T& value : accumulator) value = static_cast<T>(quarters(random)) / 4;
    for (T& value : incoming) value = static_cast<T>(quarters(random)) / 4;
    std::vector<T> expected = accumulator;
    for (int64_t i = 0; i < count; ++i) {
      expected[i] = static_cast<T>(ReferenceFloatOp(op, accumulator[i], incoming[i]));
    }
    ReduceInto(type, op, accumulator.data(), incoming.data(), count);
    ASSERT_EQ(accumulator, expected) << "count " << count;
  }
}

// fp16 and bf16: inputs and results chosen to be representable, so the expected bits come from
// looking the exact result up among the decoded bit patterns.
void CheckSixteenBitFloatType(DataType type, ReduceOp op, double (*decode)(uint16_t),
                              int min_numerator, int max_numerator, int denominator) {
  std::map<double, uint16_t> bits_of_value;          // -0 and +0 share a key
  for (uint32_t bits = 0; bits <= 0x7fff; ++bits) {  // non-negative, so +0 wins over -0
    const double value = decode(static_cast<uint16_t>(bits));
    if (!std::isnan(value)) bits_of_value.emplace(value, static_cast<uint16_t>(bits));
    if (!std::isnan(value)) bits_of_value.emplace(-value, static_cast<uint16_t>(bits | 0x8000));
  }
  auto encode = [&](double value) -> uint16_t {
    auto it = bits_of_value.find(value);
    EXPECT_NE(it, bits_of_value.end()) << value << " is not representable";
    return it == bits_of_value.end() ? 0 : it->second;
  };
  std::mt19937_64 random(42);
  std::uniform_int_distribution<int> numerators(min_numerator, max_numerator);
  for (int64_t count : kCounts) {
    std::vector<uint16_t> accumulator(count + kGuard), incoming(count + kGuard);
    for (uint16_t& value : accumulator) {
      value = encode(static_cast<double>(numerators(random)) / denominator);
    }
    for (uint16_t& value : incoming) {
      value = encode(static_cast<double>(numerators(random)) / denominator);
    }
    std::vector<uint16_t> expected = accumulator;
    for (int64_t i = 0; i < count; ++i) {
      const double result = ReferenceFloatOp(op, decode(accumulator[i]), decode(incoming[i]));
      // -0 and +0 are equal as doubles; keep the sign the kernel's float arithmetic gives.
      expected[i] = result == 0 && std::signbit(result) ? 0x8000 : encode(result);
    }
    ReduceInto(type, op, accumulator.data(), incoming.data(), count);
    ASSERT_EQ(accumulator, expected) << "count " << count;
  }
}

class ReduceIntoTest : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(ReduceIntoTest, MatchesScalarReference) {
  const auto [type, op] = GetParam();
  switch (type) {
    case DataType::kInt8:
      return CheckIntegerType<int8_t>(type, op);
    case DataType::kUint8:
      return CheckIntegerType<uint8_t>(type, op);
    case DataType::kInt32:
      return CheckIntegerType<int32_t>(type, op);
    case DataType::kUint32:
      return CheckIntegerType<uint32_t>(type, op);
    case DataType::kInt64:
      return CheckIntegerType<int64_t>(type, op);
    case DataType::kUint64:
      return CheckIntegerType<uint64_t>(type, op);
    case DataType::kFloat32:
      return CheckFloatType<float>(type, op);
    case DataType::kFloat64:
      return CheckFloatType<double>(type, op);
    case DataType::kFloat16:
      // Multiples of 1/4 in [-8, 8]: products need at most 11 significant bits.
      return CheckSixteenBitFloatType(type, op, ReferenceHalfValue, -32, 32, 4);
    case DataType::kBfloat16:
      // Integers in [-15, 15]: products need at most 8 significant bits.
      return CheckSixteenBitFloatType(type, op, ReferenceBfloat16Value, -15, 15, 1);
  }
  FAIL() << "unhandled type " << DataTypeName(type);
}

TEST_P(ReduceIntoTest, CountZeroTouchesNothing) {
  const auto [type, op] = GetParam();
  ReduceInto(type, op, nullptr, nullptr, 0);
  std::vector<uint8_t> accumulator(16, 0xab), incoming(16, 0x01);
  ReduceInto(type, op, accumulator.data(), incoming.data(), 0);
  EXPECT_EQ(accumulator, std::vector<uint8_t>(16, 0xab));
}

// Reduce(out, first, second) is ReduceInto on a copy of `first`, bit for bit (any bit pattern,
// NaNs included), for counts around the vector block sizes, and leaves its inputs alone.
TEST_P(ReduceIntoTest, ThreeOperandFormMatchesInPlaceForm) {
  const auto [type, op] = GetParam();
  const int element_size = DataTypeSize(type);
  std::mt19937_64 random(static_cast<uint64_t>(type) * 16 + static_cast<uint64_t>(op));
  for (int64_t count : {1, 7, 31, 32, 33, 64, 1000, 4099}) {
    std::vector<uint8_t> first(count * element_size), second(count * element_size);
    for (uint8_t& byte : first) byte = static_cast<uint8_t>(random());
    for (uint8_t& byte : second) byte = static_cast<uint8_t>(random());
    const std::vector<uint8_t> first_before = first, second_before = second;
    std::vector<uint8_t> out(count * element_size, 0xcd), in_place = first;
    Reduce(type, op, out.data(), first.data(), second.data(), count);
    ReduceInto(type, op, in_place.data(), second.data(), count);
    EXPECT_EQ(out, in_place) << "count " << count;
    EXPECT_EQ(first, first_before);
    EXPECT_EQ(second, second_before);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceIntoTest,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes),
                                            ::testing::ValuesIn(kEveryReduceOp)),
                         [](const auto& info) {
                           // "max-nan": a test name takes no dash.
                           return absl::StrReplaceAll(
                               absl::StrCat(DataTypeName(std::get<0>(info.param)), "_",
                                            ReduceOpName(std::get<1>(info.param))),
                               {{"-", "_"}});
                         });

// ---------------------------------------------------------------------------------------------
// Crafted cases.

template <typename T>
std::vector<T> Reduced(DataType type, ReduceOp op, std::vector<T> accumulator,
                       const std::vector<T>& incoming) {
  ReduceInto(type, op, accumulator.data(), incoming.data(),
             static_cast<int64_t>(accumulator.size()));
  return accumulator;
}

TEST(ReduceIntoCraftedTest, IntegerWraparound) {
  EXPECT_EQ(Reduced<int8_t>(DataType::kInt8, ReduceOp::kSum, {127, -128, -1}, {1, -1, -128}),
            (std::vector<int8_t>{-128, 127, 127}));
  EXPECT_EQ(Reduced<int8_t>(DataType::kInt8, ReduceOp::kProd, {64, -128, 16}, {2, -1, 16}),
            (std::vector<int8_t>{-128, -128, 0}));
  EXPECT_EQ(Reduced<uint8_t>(DataType::kUint8, ReduceOp::kSum, {255, 200}, {1, 100}),
            (std::vector<uint8_t>{0, 44}));
  EXPECT_EQ(Reduced<uint8_t>(DataType::kUint8, ReduceOp::kProd, {200, 16}, {2, 16}),
            (std::vector<uint8_t>{144, 0}));
  constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
  constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(Reduced<int32_t>(DataType::kInt32, ReduceOp::kSum, {kInt32Max, kInt32Min}, {1, -1}),
            (std::vector<int32_t>{kInt32Min, kInt32Max}));
  EXPECT_EQ(Reduced<int32_t>(DataType::kInt32, ReduceOp::kProd, {kInt32Min, 65536}, {-1, 65536}),
            (std::vector<int32_t>{kInt32Min, 0}));
  EXPECT_EQ(Reduced<uint32_t>(DataType::kUint32, ReduceOp::kProd, {0xffffffffu}, {0xffffffffu}),
            (std::vector<uint32_t>{1}));
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(Reduced<int64_t>(DataType::kInt64, ReduceOp::kSum, {kInt64Max}, {1}),
            (std::vector<int64_t>{kInt64Min}));
  EXPECT_EQ(Reduced<int64_t>(DataType::kInt64, ReduceOp::kProd, {kInt64Max, kInt64Min}, {2, -1}),
            (std::vector<int64_t>{-2, kInt64Min}));
  EXPECT_EQ(Reduced<uint64_t>(DataType::kUint64, ReduceOp::kSum, {~uint64_t{0}}, {2}),
            (std::vector<uint64_t>{1}));
}

TEST(ReduceIntoCraftedTest, IntegerMaxMinUseTheTypesOrder) {
  EXPECT_EQ(Reduced<int8_t>(DataType::kInt8, ReduceOp::kMax, {-128, 5, -1}, {127, -5, 0}),
            (std::vector<int8_t>{127, 5, 0}));
  EXPECT_EQ(Reduced<uint8_t>(DataType::kUint8, ReduceOp::kMin, {255, 0, 128}, {254, 1, 127}),
            (std::vector<uint8_t>{254, 0, 127}));
  EXPECT_EQ(Reduced<uint32_t>(DataType::kUint32, ReduceOp::kMax, {0x80000000u}, {1}),
            (std::vector<uint32_t>{0x80000000u}));
  EXPECT_EQ(Reduced<uint64_t>(DataType::kUint64, ReduceOp::kMin, {~uint64_t{0}}, {1}),
            (std::vector<uint64_t>{1}));
  EXPECT_EQ(Reduced<int64_t>(DataType::kInt64, ReduceOp::kMin, {-1}, {1}),
            (std::vector<int64_t>{-1}));
}

// Max/min follow fmax/fmin: a NaN loses to a number; two NaNs give NaN. Infinities order as
// usual. Checked at a count that exercises both the vector and the scalar-remainder paths.
template <typename T>
void CheckNanAwareMaxMin(DataType type, T nan, T inf, T one, T two, double (*value)(T)) {
  const std::vector<T> accumulator_pattern = {nan, one, nan, inf, one, nan};
  const std::vector<T> incoming_pattern = {one, nan, nan, one, inf, two};
  std::vector<T> accumulator, incoming;
  for (int repeat = 0; repeat < 7; ++repeat) {  // 42 elements
    accumulator.insert(accumulator.end(), accumulator_pattern.begin(), accumulator_pattern.end());
    incoming.insert(incoming.end(), incoming_pattern.begin(), incoming_pattern.end());
  }
  const std::vector<T> max = Reduced(type, ReduceOp::kMax, accumulator, incoming);
  const std::vector<T> min = Reduced(type, ReduceOp::kMin, accumulator, incoming);
  const double kNan = std::numeric_limits<double>::quiet_NaN();
  const double kInf = std::numeric_limits<double>::infinity();
  const std::vector<double> expected_max = {1, 1, kNan, kInf, kInf, 2};
  const std::vector<double> expected_min = {1, 1, kNan, 1, 1, 2};
  for (size_t i = 0; i < accumulator.size(); ++i) {
    const size_t k = i % accumulator_pattern.size();
    if (std::isnan(expected_max[k])) {
      EXPECT_TRUE(std::isnan(value(max[i]))) << DataTypeName(type) << " element " << i;
      EXPECT_TRUE(std::isnan(value(min[i]))) << DataTypeName(type) << " element " << i;
    } else {
      EXPECT_EQ(value(max[i]), expected_max[k]) << DataTypeName(type) << " element " << i;
      EXPECT_EQ(value(min[i]), expected_min[k]) << DataTypeName(type) << " element " << i;
    }
  }
}

TEST(ReduceIntoCraftedTest, FloatMaxMinIgnoreNanAgainstNumbers) {
  CheckNanAwareMaxMin<float>(DataType::kFloat32, std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::infinity(), 1.0f, 2.0f,
                             [](float v) -> double { return v; });
  CheckNanAwareMaxMin<double>(DataType::kFloat64, std::numeric_limits<double>::quiet_NaN(),
                              std::numeric_limits<double>::infinity(), 1.0, 2.0,
                              [](double v) -> double { return v; });
  CheckNanAwareMaxMin<uint16_t>(DataType::kFloat16, 0x7e00, 0x7c00, 0x3c00, 0x4000,
                                ReferenceHalfValue);
  CheckNanAwareMaxMin<uint16_t>(DataType::kBfloat16, 0x7fc0, 0x7f80, 0x3f80, 0x4000,
                                ReferenceBfloat16Value);
}

// -0 below +0 whichever comes first, under both NaN rules: every rank of a plan gets one answer.
TEST(ReduceIntoCraftedTest, FloatMaxMinOrderMinusZeroBelowPlusZero) {
  for (ReduceOp max : {ReduceOp::kMax, ReduceOp::kMaxNan}) {
    EXPECT_FALSE(std::signbit(Reduced<float>(DataType::kFloat32, max, {-0.0f}, {0.0f})[0]));
    EXPECT_FALSE(std::signbit(Reduced<float>(DataType::kFloat32, max, {0.0f}, {-0.0f})[0]));
  }
  for (ReduceOp min : {ReduceOp::kMin, ReduceOp::kMinNan}) {
    EXPECT_TRUE(std::signbit(Reduced<double>(DataType::kFloat64, min, {0.0}, {-0.0})[0]));
    EXPECT_TRUE(std::signbit(Reduced<double>(DataType::kFloat64, min, {-0.0}, {0.0})[0]));
  }
}

// Sums and products of two NaNs give the same NaN either way round, wherever they meet in a long
// buffer (the CPU loops check 4 KiB spans, then reduce a span with two NaNs in it apart): in the
// first span, the last element, and elsewhere, for every floating-point type, in place and not.
TEST(ReduceIntoCraftedTest, TwoNansGiveOneNanEitherWayRound) {
  std::mt19937_64 random(7);
  for (DataType type :
       {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64}) {
    const int size = DataTypeSize(type);
    const int64_t count = 3 * 4096 / size + 5;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd}) {
      std::vector<uint8_t> a(count * size), b(count * size);
      for (uint8_t& byte : a) byte = 0;  // +0: sums and products stay ordinary
      b = a;
      // NaNs with different payloads at the same places, a few spans apart.
      for (int64_t at : {int64_t{3}, count / 2, count - 1}) {
        for (std::vector<uint8_t>* buffer : {&a, &b}) {
          const uint64_t payload = random() | 1;
          for (int k = 0; k < size; ++k) {
            (*buffer)[at * size + k] = static_cast<uint8_t>(payload >> (8 * k));
          }
          (*buffer)[at * size + size - 1] |= 0x7f;  // exponent of all ones (and the sign
          (*buffer)[at * size + size - 2] |= 0xf0;  // may be set): a NaN, payload nonzero
        }
      }
      std::vector<uint8_t> ab(count * size), ba(count * size), in_place = a;
      Reduce(type, op, ab.data(), a.data(), b.data(), count);
      Reduce(type, op, ba.data(), b.data(), a.data(), count);
      ReduceInto(type, op, in_place.data(), b.data(), count);
      EXPECT_EQ(ab, ba) << DataTypeName(type) << " " << ReduceOpName(op);
      EXPECT_EQ(ab, in_place) << DataTypeName(type) << " " << ReduceOpName(op);
    }
  }
}

// MPI's max and min keep a NaN against a number, either way round; NCCL's drop it.
TEST(ReduceIntoCraftedTest, MpiMaxMinKeepNan) {
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::kMaxNan, ReduceOp::kMinNan}) {
    const std::vector<float> kept =
        Reduced<float>(DataType::kFloat32, op, {kNan, 1.0f, kNan}, {-1.0f, kNan, kNan});
    EXPECT_TRUE(std::isnan(kept[0]) && std::isnan(kept[1]) && std::isnan(kept[2]));
  }
  EXPECT_EQ(Reduced<float>(DataType::kFloat32, ReduceOp::kMax, {kNan}, {-1.0f})[0], -1.0f);
}

TEST(ReduceIntoCraftedTest, FloatSumAndProdSpecialValues) {
  const float kInf = std::numeric_limits<float>::infinity();
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> sum = Reduced<float>(DataType::kFloat32, ReduceOp::kSum,
                                                {kInf, kInf, kNan, 1e38f, 0x1p-149f, -0.0f},
                                                {1.0f, -kInf, 1.0f, 3e38f, 0x1p-149f, -0.0f});
  EXPECT_EQ(sum[0], kInf);
  EXPECT_TRUE(std::isnan(sum[1]));
  EXPECT_TRUE(std::isnan(sum[2]));
  EXPECT_EQ(sum[3], kInf);
  EXPECT_EQ(sum[4], 0x1p-148f);  // subnormals add exactly
  EXPECT_TRUE(std::signbit(sum[5]));
  const std::vector<double> prod =
      Reduced<double>(DataType::kFloat64, ReduceOp::kProd, {0.0, 1e300, -3.0}, {kInf, 1e300, 0.5});
  EXPECT_TRUE(std::isnan(prod[0]));
  EXPECT_EQ(prod[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(prod[2], -1.5);
}

TEST(ReduceIntoCraftedTest, SixteenBitFloatsRoundOncePerElement) {
  // 2048 + 1 = 2049 is a tie between 2048 and 2050 and goes to 2048 (even); 2048 + 3 goes to
  // 2052; 65504 + 65504 overflows to infinity; the smallest subnormals add exactly.
  const std::vector<uint16_t> half_sum =
      Reduced<uint16_t>(DataType::kFloat16, ReduceOp::kSum,
                        {FloatToHalf(2048), FloatToHalf(2048), 0x7bff, 0x0001, 0xfbff},
                        {FloatToHalf(1), FloatToHalf(3), 0x7bff, 0x0001, 0xfbff});
  EXPECT_EQ(half_sum,
            (std::vector<uint16_t>{FloatToHalf(2048), FloatToHalf(2052), 0x7c00, 0x0002, 0xfc00}));
  // bf16: 256 + 1 ties to 256; 256 + 3 goes to 260 (even mantissa); max + max overflows.
  const std::vector<uint16_t> bf16_sum = Reduced<uint16_t>(
      DataType::kBfloat16, ReduceOp::kSum, {FloatToBfloat16(256), FloatToBfloat16(256), 0x7f7f},
      {FloatToBfloat16(1), FloatToBfloat16(3), 0x7f7f});
  EXPECT_EQ(bf16_sum, (std::vector<uint16_t>{FloatToBfloat16(256), FloatToBfloat16(260), 0x7f80}));
  // fp16 product underflowing to a subnormal: 2^-10 * 2^-10 = 2^-20 = 16 * 2^-24.
  EXPECT_EQ(Reduced<uint16_t>(DataType::kFloat16, ReduceOp::kProd, {FloatToHalf(0x1p-10f)},
                              {FloatToHalf(0x1p-10f)}),
            (std::vector<uint16_t>{0x0010}));
}

TEST(ReduceIntoCraftedTest, AvgAccumulatesASum) {
  EXPECT_EQ(Reduced<int32_t>(DataType::kInt32, ReduceOp::kAvg, {1, -7}, {2, 3}),
            (std::vector<int32_t>{3, -4}));
  EXPECT_EQ(Reduced<float>(DataType::kFloat32, ReduceOp::kAvg, {1.5f}, {2.25f}),
            (std::vector<float>{3.75f}));
}

// ---------------------------------------------------------------------------------------------
// FinalizeReduction.

template <typename T>
std::vector<T> Finalized(DataType type, ReduceOp op, std::vector<T> data, int num_ranks) {
  FinalizeReduction(type, op, data.data(), static_cast<int64_t>(data.size()), num_ranks);
  return data;
}

TEST(FinalizeReductionTest, IntegerAverageTruncatesTowardZero) {
  constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(Finalized<int32_t>(DataType::kInt32, ReduceOp::kAvg, {7, -7, 8, kInt32Min, 1}, 2),
            (std::vector<int32_t>{3, -3, 4, kInt32Min / 2, 0}));
  EXPECT_EQ(Finalized<int8_t>(DataType::kInt8, ReduceOp::kAvg, {-128, 127, -1}, 3),
            (std::vector<int8_t>{-42, 42, 0}));
  // The divisor does not fit the element type.
  EXPECT_EQ(Finalized<uint8_t>(DataType::kUint8, ReduceOp::kAvg, {255, 199}, 200),
            (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Finalized<int8_t>(DataType::kInt8, ReduceOp::kAvg, {-128, 127}, 1000),
            (std::vector<int8_t>{0, 0}));
  EXPECT_EQ(Finalized<uint32_t>(DataType::kUint32, ReduceOp::kAvg, {0xffffffffu}, 3),
            (std::vector<uint32_t>{0x55555555u}));
  EXPECT_EQ(Finalized<int64_t>(DataType::kInt64, ReduceOp::kAvg, {-9, 9}, 4),
            (std::vector<int64_t>{-2, 2}));
  EXPECT_EQ(Finalized<uint64_t>(DataType::kUint64, ReduceOp::kAvg, {~uint64_t{0}}, 5),
            (std::vector<uint64_t>{0x3333333333333333u}));
}

TEST(FinalizeReductionTest, FloatAverageDivides) {
  EXPECT_EQ(Finalized<float>(DataType::kFloat32, ReduceOp::kAvg, {3.0f, -1.0f, 1.0f}, 2),
            (std::vector<float>{1.5f, -0.5f, 0.5f}));
  // Correctly rounded division, not a multiplication by a rounded 1/3.
  EXPECT_EQ(Finalized<float>(DataType::kFloat32, ReduceOp::kAvg, {3.0f, 1.0f}, 3),
            (std::vector<float>{1.0f, 1.0f / 3.0f}));
  EXPECT_EQ(Finalized<double>(DataType::kFloat64, ReduceOp::kAvg, {12.0, 1.0}, 3),
            (std::vector<double>{4.0, 1.0 / 3.0}));
  EXPECT_EQ(Finalized<uint16_t>(DataType::kFloat16, ReduceOp::kAvg,
                                {FloatToHalf(3), FloatToHalf(-6), FloatToHalf(1)}, 4),
            (std::vector<uint16_t>{FloatToHalf(0.75f), FloatToHalf(-1.5f), FloatToHalf(0.25f)}));
  EXPECT_EQ(Finalized<uint16_t>(DataType::kBfloat16, ReduceOp::kAvg,
                                {FloatToBfloat16(3), FloatToBfloat16(1)}, 3),
            (std::vector<uint16_t>{FloatToBfloat16(1), FloatToBfloat16(1.0f / 3.0f)}));
}

TEST(FinalizeReductionTest, OtherOperatorsAndOneRankAreNoOps) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin}) {
    EXPECT_EQ(Finalized<int32_t>(DataType::kInt32, op, {7, -7}, 4), (std::vector<int32_t>{7, -7}));
  }
  EXPECT_EQ(Finalized<float>(DataType::kFloat32, ReduceOp::kAvg, {7.0f}, 1),
            (std::vector<float>{7.0f}));
  FinalizeReduction(DataType::kFloat32, ReduceOp::kAvg, nullptr, 0, 4);
}

// ---------------------------------------------------------------------------------------------
// reduce_element.h: the CUDA kernels apply its rules one element at a time, and must get what the
// CPU's vectorized loops get. Random bit patterns (NaNs, infinities, subnormals included); the one
// allowed difference is the sign and payload of a NaN that sum, prod or avg produce (x86 returns
// the first NaN operand, and the compiler may swap the operands of a sum or product).

template <typename Codec>
bool IsNanElement(typename Codec::Storage value) {
  const auto decoded = Codec::Load(value);
  return decoded != decoded;
}

TEST(ReduceElementTest, OneElementAtATimeMatchesTheLoops) {
  constexpr int64_t kCount = 1027;
  for (DataType type : kAllDataTypes) {
    const bool dispatched =
        reduce_element::DispatchOnType(type, [&]<typename Codec>(reduce_element::CodecTag<Codec>) {
          using Storage = typename Codec::Storage;
          ASSERT_EQ(sizeof(Storage), static_cast<size_t>(DataTypeSize(type)));
          std::mt19937_64 random(static_cast<int>(type));
          std::vector<Storage> first(kCount), second(kCount), out(kCount);
          auto random_bits = [&random] {
            const uint64_t bits = random();
            Storage value;
            std::memcpy(&value, &bits, sizeof(value));  // little-endian: the low bytes
            return value;
          };
          for (Storage& value : first) value = random_bits();
          for (Storage& value : second) value = random_bits();
          for (ReduceOp op : kAllReduceOps) {
            Reduce(type, op, out.data(), first.data(), second.data(), kCount);
            const bool arithmetic = op != ReduceOp::kMax && op != ReduceOp::kMin;
            reduce_element::DispatchOnOp(op, [&]<typename Op>(reduce_element::OpTag<Op>) {
              for (int64_t i = 0; i < kCount; ++i) {
                const Storage element =
                    reduce_element::ReduceElement<Codec, Op>(first[i], second[i]);
                if (arithmetic && IsNanElement<Codec>(element) && IsNanElement<Codec>(out[i])) {
                  continue;
                }
                ASSERT_EQ(std::memcmp(&element, &out[i], sizeof(Storage)), 0)
                    << DataTypeName(type) << " " << ReduceOpName(op) << " element " << i;
              }
            });
          }
          std::vector<Storage> divided = first;
          FinalizeReduction(type, ReduceOp::kAvg, divided.data(), kCount, 3);
          for (int64_t i = 0; i < kCount; ++i) {
            const Storage element = reduce_element::DivideElement<Codec>(first[i], 3);
            if (IsNanElement<Codec>(element) && IsNanElement<Codec>(divided[i])) continue;
            ASSERT_EQ(std::memcmp(&element, &divided[i], sizeof(Storage)), 0)
                << DataTypeName(type) << " avg division, element " << i;
          }
        });
    EXPECT_TRUE(dispatched) << DataTypeName(type);
  }
}

TEST(ReduceElementTest, DispatchRefusesValuesOutsideTheEnums) {
  int calls = 0;
  EXPECT_FALSE(reduce_element::DispatchOnType(
      static_cast<DataType>(99),
      [&]<typename Codec>(reduce_element::CodecTag<Codec>) { ++calls; }));
  EXPECT_FALSE(reduce_element::DispatchOnOp(
      static_cast<ReduceOp>(99), [&]<typename Op>(reduce_element::OpTag<Op>) { ++calls; }));
  EXPECT_EQ(calls, 0);
  bool avg_sums = false;
  reduce_element::DispatchOnOp(ReduceOp::kAvg, [&]<typename Op>(reduce_element::OpTag<Op>) {
    avg_sums = std::is_same_v<Op, reduce_element::SumOp>;
  });
  EXPECT_TRUE(avg_sums);
}

}  // namespace
}  // namespace stragglar
