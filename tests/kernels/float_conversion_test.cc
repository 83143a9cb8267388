// The 16-bit float conversions, checked exhaustively against the formats' definitions.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reduce/reduce.h"
#include "tests/float_formats.h"

namespace stragglar {
namespace {

TEST(HalfConversionTest, EveryBitPatternDecodesExactly) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float value = HalfToFloat(static_cast<uint16_t>(bits));
    const double expected = ReferenceHalfValue(static_cast<uint16_t>(bits));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(value)) << "bits 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(value, expected) << "bits 0x" << std::hex << bits;
      ASSERT_EQ(std::signbit(value), (bits & 0x8000) != 0) << "bits 0x" << std::hex << bits;
    }
  }
}

TEST(HalfConversionTest, EveryBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const uint16_t round_trip = FloatToHalf(HalfToFloat(half));
    if (IsHalfNan(half)) {
      ASSERT_TRUE(IsHalfNan(round_trip)) << "bits 0x" << std::hex << bits;
      ASSERT_EQ(round_trip & 0x8000, half & 0x8000) << "bits 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(round_trip, half) << "bits 0x" << std::hex << bits;
    }
  }
}

// For every pair of adjacent non-negative halves (subnormals, normals, and the largest finite
// half next to infinity), the float exactly halfway rounds to the neighbour with the even
// mantissa, and the floats one ulp either side round to the nearer neighbour. Both signs.
TEST(HalfConversionTest, RoundsToNearestEvenBetweenEveryAdjacentPair) {
  for (uint32_t lower = 0; lower < 0x7c00; ++lower) {
    const uint32_t upper = lower + 1;
    const double midpoint_value =
        upper == 0x7c00 ? 65520.0 : (ReferenceHalfValue(lower) + ReferenceHalfValue(upper)) / 2;
    const float midpoint = static_cast<float>(midpoint_value);
    ASSERT_EQ(midpoint, midpoint_value);  // halfway points are floats
    const uint32_t even = (lower % 2 == 0) ? lower : upper;
    const float below = std::nextafter(midpoint, 0.0f);
    const float above = std::nextafter(midpoint, std::numeric_limits<float>::infinity());
    for (const bool negative : {false, true}) {
      const float sign = negative ? -1.0f : 1.0f;
      const uint32_t sign_bit = negative ? 0x8000 : 0;
      ASSERT_EQ(FloatToHalf(sign * midpoint), sign_bit | even) << "lower 0x" << std::hex << lower;
      ASSERT_EQ(FloatToHalf(sign * below), sign_bit | lower) << "lower 0x" << std::hex << lower;
      ASSERT_EQ(FloatToHalf(sign * above), sign_bit | upper) << "lower 0x" << std::hex << lower;
    }
  }
}

TEST(HalfConversionTest, NamedCases) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);   // largest finite
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);  // below the halfway point to 65536
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);   // tie goes to the even neighbour: infinity
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);      // overflow
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);     // overflow, negative
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalf(0x1p-14f), 0x0400);    // smallest normal
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);    // smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0x0000);    // tie between 0 and the smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1.8p-24f), 0x0002);  // tie between 1 and 2 subnormal ulps: even
  EXPECT_EQ(FloatToHalf(-0x1p-24f), 0x8001);
  EXPECT_EQ(FloatToHalf(1e-30f), 0x0000);  // underflow keeps the sign
  EXPECT_EQ(FloatToHalf(-1e-30f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalf(2049.0f), 0x6800);       // 2048: tie, even
  EXPECT_EQ(FloatToHalf(2051.0f), 0x6802);       // 2052: tie, even
  EXPECT_EQ(FloatToHalf(0x1.ffep-15f), 0x0400);  // subnormal rounding up into the normals
}

TEST(HalfConversionTest, NanStaysNan) {
  for (const uint32_t bits : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7f801000u,
                              0xffc00000u, 0x7fa00000u}) {
    const uint16_t half = FloatToHalf(std::bit_cast<float>(bits));
    EXPECT_TRUE(IsHalfNan(half)) << "float bits 0x" << std::hex << bits;
    EXPECT_EQ(half & 0x8000, (bits >> 16) & 0x8000) << "float bits 0x" << std::hex << bits;
  }
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0xfe00)));
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(Bfloat16ConversionTest, EveryBitPatternDecodesExactlyAndRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t bf16 = static_cast<uint16_t>(bits);
    const float value = Bfloat16ToFloat(bf16);
    const double expected = ReferenceBfloat16Value(bf16);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(value)) << "bits 0x" << std::hex << bits;
      ASSERT_TRUE(IsBfloat16Nan(FloatToBfloat16(value))) << "bits 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(value, expected) << "bits 0x" << std::hex << bits;
      ASSERT_EQ(FloatToBfloat16(value), bf16) << "bits 0x" << std::hex << bits;
    }
  }
}

TEST(Bfloat16ConversionTest, RoundsToNearestEvenBetweenEveryAdjacentPair) {
  for (uint32_t lower = 0; lower < 0x7f80; ++lower) {
    const uint32_t upper = lower + 1;
    // The halfway point is the float whose top 16 bits are `lower` and low 16 bits 0x8000;
    // that also holds between the largest finite bf16 and infinity.
    const float midpoint = std::bit_cast<float>((lower << 16) | 0x8000u);
    const uint32_t even = (lower % 2 == 0) ? lower : upper;
    const float below = std::nextafter(midpoint, 0.0f);
    const float above = std::nextafter(midpoint, std::numeric_limits<float>::infinity());
    for (const bool negative : {false, true}) {
      const float sign = negative ? -1.0f : 1.0f;
      const uint32_t sign_bit = negative ? 0x8000 : 0;
      ASSERT_EQ(FloatToBfloat16(sign * midpoint), sign_bit | even) << std::hex << lower;
      ASSERT_EQ(FloatToBfloat16(sign * below), sign_bit | lower) << std::hex << lower;
      ASSERT_EQ(FloatToBfloat16(sign * above), sign_bit | upper) << std::hex << lower;
    }
  }
}

TEST(Bfloat16ConversionTest, NamedCases) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBfloat16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBfloat16(1.00390625f), 0x3f80);  // 1 + 2^-8: tie, even (down)
  EXPECT_EQ(FloatToBfloat16(1.01171875f), 0x3f82);  // 1 + 3 * 2^-8: tie, even (up)
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // overflows
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBfloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToBfloat16(0x1p-133f), 0x0001);  // smallest bf16 subnormal
  for (const uint32_t bits : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    const uint16_t bf16 = FloatToBfloat16(std::bit_cast<float>(bits));
    EXPECT_TRUE(IsBfloat16Nan(bf16)) << "float bits 0x" << std::hex << bits;
    EXPECT_EQ(bf16 & 0x8000, (bits >> 16) & 0x8000);
  }
}

}  // namespace
}  // namespace stragglar
