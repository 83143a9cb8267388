#include "bench/common/bandwidth.h"

#include "gtest/gtest.h"

namespace stragglar::bench {
namespace {

// nccl-tests' numbers: busbw is what each rank's link carries in Ring, 2(n - 1)/n of the buffer.
TEST(AllReduceBandwidthTest, AsNcclTestsReportsThem) {
  const AllReduceBandwidth eight = AllReduceBandwidthOf(1'000'000'000, 0.5, 8);
  EXPECT_EQ(eight.algbw_gbps, 2.0);
  EXPECT_EQ(eight.busbw_gbps, 3.5);
  const AllReduceBandwidth two = AllReduceBandwidthOf(1 << 20, 1e-3, 2);
  EXPECT_EQ(two.busbw_gbps, two.algbw_gbps);
  EXPECT_DOUBLE_EQ(two.algbw_gbps, 1.048576);
  // One rank moves nothing over a link.
  EXPECT_EQ(AllReduceBandwidthOf(1 << 20, 1e-3, 1).busbw_gbps, 0.0);
}

TEST(AllReduceBandwidthTest, NothingMeasuredIsZeroNotInfinite) {
  for (double seconds : {0.0, -1.0}) {
    const AllReduceBandwidth none = AllReduceBandwidthOf(1 << 20, seconds, 4);
    EXPECT_EQ(none.algbw_gbps, 0.0) << seconds;
    EXPECT_EQ(none.busbw_gbps, 0.0) << seconds;
  }
  EXPECT_EQ(AllReduceBandwidthOf(1 << 20, 1.0, 0).algbw_gbps, 0.0);
}

}  // namespace
}  // namespace stragglar::bench
