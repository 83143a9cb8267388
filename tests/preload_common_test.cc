#include "runtime/preload_common.h"

#include "gtest/gtest.h"
#include "kernels/synthesizers.h"

namespace stragglar {
namespace {

// The INFO lines both preloads write: what a communicator measured and which plans it ran.
TEST(PreloadCommonTest, DescribePlanSaysTheShapeOfWhatRuns) {
  EXPECT_EQ(DescribePlan(*SynthesizeStragglar(4, 3), 16 << 20),
            "stragglar around rank 3 for 16 MiB: 3 chunks, 2 rounds before the straggler arrives "
            "and 4 after");
  EXPECT_EQ(DescribePlan(*SynthesizeStragglar(4, 1, 8), 64 << 20),
            "stragglar around rank 1 for 64 MiB: 24 chunks (8 pieces per rank), 2 rounds before "
            "the straggler arrives and 25 after");
  EXPECT_EQ(DescribePlan(*SynthesizeRing(4), 1 << 20), "ring for 1 MiB: 4 chunks, 6 rounds");
}

TEST(PreloadCommonTest, DescribeLinkGivesLatencyAndBandwidth) {
  EXPECT_EQ(DescribeLink({.alpha_s = 7.34e-6, .bandwidth_bytes_per_s = 5.67e9}),
            "link: 7.34 us + 5.67 GB/s per message");
}

}  // namespace
}  // namespace stragglar
