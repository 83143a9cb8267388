#include "base/units.h"

#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

TEST(UnitsTest, SizesAcceptBinaryAndDecimalUnits) {
  EXPECT_EQ(*ParseByteSize("0"), 0);
  EXPECT_EQ(*ParseByteSize("17"), 17);
  EXPECT_EQ(*ParseByteSize("17B"), 17);
  EXPECT_EQ(*ParseByteSize("4KiB"), 4096);
  EXPECT_EQ(*ParseByteSize("16MiB"), 16 << 20);
  EXPECT_EQ(*ParseByteSize("1GiB"), int64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("1.5 KiB"), 1536);
  EXPECT_EQ(*ParseByteSize("2KB"), 2000);
  EXPECT_EQ(*ParseByteSize("3MB"), 3000000);
  EXPECT_EQ(*ParseByteSize("1GB"), 1000000000);
}

TEST(UnitsTest, MalformedSizesAreRejectedWithTheAcceptedUnits) {
  for (const char* text : {"", "MiB", "12XB", "twelve", "-1KiB", "nan", "inf", "1e30GiB", "4 K"}) {
    absl::StatusOr<int64_t> size = ParseByteSize(text);
    EXPECT_FALSE(size.ok()) << text;
  }
  EXPECT_THAT(ParseByteSize("12XB").status().message(), HasSubstr("KiB, MiB, GiB"));
  EXPECT_THAT(ParseByteSize("-1KiB").status().message(), HasSubstr("negative"));
}

TEST(UnitsTest, BandwidthsAndTimes) {
  EXPECT_DOUBLE_EQ(*ParseBandwidth("450GiB/s"), 450.0 * (1LL << 30));
  EXPECT_DOUBLE_EQ(*ParseBandwidth("100 GB/s"), 1e11);
  EXPECT_FALSE(ParseBandwidth("450GiB").ok());
  EXPECT_FALSE(ParseBandwidth("0GiB/s").ok());
  EXPECT_DOUBLE_EQ(*ParseSeconds("3us"), 3e-6);
  EXPECT_DOUBLE_EQ(*ParseSeconds("20ms"), 0.02);
  EXPECT_DOUBLE_EQ(*ParseSeconds("250ns"), 250e-9);
  EXPECT_DOUBLE_EQ(*ParseSeconds("1.5s"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseSeconds("-2ms"), -0.002);  // callers decide whether negative is allowed
  EXPECT_THAT(ParseSeconds("3").status().message(), HasSubstr("ns, us, ms or s"));
  EXPECT_FALSE(ParseSeconds("inf").ok());
}

TEST(UnitsTest, FormatsForHumans) {
  EXPECT_EQ(FormatBytes(16 << 20), "16 MiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(100), "100 B");
  EXPECT_EQ(FormatBandwidth(450.0 * (1LL << 30)), "450 GiB/s");
  EXPECT_EQ(FormatSeconds(3e-6), "3 us");
  EXPECT_EQ(FormatSeconds(0.0123), "12.3 ms");
  EXPECT_EQ(FormatSeconds(0), "0 s");
}

TEST(UnitsTest, FlagNamesTakeDashes) {
  EXPECT_EQ(NormalizeFlagName("--min-bytes=1MiB"), "--min_bytes=1MiB");
  EXPECT_EQ(NormalizeFlagName("--metrics-port"), "--metrics_port");
  EXPECT_EQ(NormalizeFlagName("--trace=/tmp/a-b.csv"), "--trace=/tmp/a-b.csv");  // value untouched
  EXPECT_EQ(NormalizeFlagName("run"), "run");
  EXPECT_EQ(NormalizeFlagName("-x-y"), "-x-y");
}

TEST(UnitsTest, GeometricSizes) {
  EXPECT_EQ(GeometricSizes(1 << 20, 64 << 20, 4),
            (std::vector<int64_t>{1 << 20, 4 << 20, 16 << 20, 64 << 20}));
  EXPECT_EQ(GeometricSizes(8, 100, 2), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(GeometricSizes(64, 64, 2), (std::vector<int64_t>{64}));
  EXPECT_TRUE(GeometricSizes(65, 64, 2).empty());
  // No overflow past the largest size.
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(GeometricSizes(max / 2 + 1, max, 2).size(), 1u);
}

}  // namespace
}  // namespace stragglar
