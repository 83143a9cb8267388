#include "pipeline/link_monitor.h"

#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stragglar {
namespace {

constexpr int64_t kBytes = 8 << 20;
constexpr double kBase = 1e-3;  // what a healthy link takes for kBytes

TEST(LinkMonitorTest, LearnsEachLinksExpectedTimeAndMeasuresDelays) {
  LinkMonitor monitor(PipelineLinks(2));
  EXPECT_EQ(monitor.ExpectedSeconds(0, kBytes), 0);
  monitor.Record(0, kBytes, 2 * kBase);  // the first sets the baseline
  monitor.Record(0, kBytes, kBase);      // faster: 1 ms is now what it should take
  EXPECT_NEAR(monitor.ExpectedSeconds(0, kBytes), kBase, 1e-15);
  EXPECT_NEAR(monitor.ExpectedSeconds(0, kBytes / 2 + 1), kBase / 2, 1e-9);  // same bucket
  EXPECT_EQ(monitor.ExpectedSeconds(0, kBytes * 4), 0);  // another size: not learned yet
  monitor.Record(0, kBytes, 5 * kBase);
  monitor.Record(1, kBytes, kBase);
  const LinkEpochReport report = monitor.EndEpoch();
  ASSERT_EQ(report.links.size(), 2u);
  EXPECT_EQ(report.links[0].transfers, 3);
  EXPECT_NEAR(report.links[0].mean_seconds, 8 * kBase / 3, 1e-12);
  // Delays 0 (first), 0 (faster), 4 ms (5 ms against 1 ms).
  EXPECT_NEAR(report.links[0].mean_delay_s, 4 * kBase / 3, 1e-12);
  EXPECT_EQ(report.links[1].mean_delay_s, 0);
  EXPECT_EQ(monitor.IndexOf({1, 0}), 1);
  EXPECT_EQ(monitor.IndexOf({0, 2}), -1);
}

// One epoch of an 8-stage pipeline: 32 transfers per link, each 1 ms times log-normal noise
// (sigma 5%), plus `extra_s` on `slow`.
LinkEpochReport RunEpoch(LinkMonitor& monitor, std::mt19937& random, int slow, double extra_s) {
  std::lognormal_distribution<double> noise(0, 0.05);
  for (int k = 0; k < 32; ++k) {
    for (int l = 0; l < static_cast<int>(monitor.links().size()); ++l) {
      monitor.Record(l, kBytes, kBase * noise(random) + (l == slow ? extra_s : 0));
    }
  }
  return monitor.EndEpoch();
}

TEST(LinkMonitorTest, NamesASlowLinkWithinTwoEpochsAndClearsItWhenItRecovers) {
  LinkMonitor monitor(PipelineLinks(8));
  std::mt19937 random(3);
  const int slow = monitor.IndexOf({3, 4});
  for (int epoch = 0; epoch < 5; ++epoch) {
    EXPECT_FALSE(RunEpoch(monitor, random, -1, 0).slow_link.has_value()) << epoch;
  }
  // 30 ms slow from now on: named by the end of the second epoch.
  int named_after = 0;
  for (int epoch = 1; epoch <= 2 && named_after == 0; ++epoch) {
    const LinkEpochReport report = RunEpoch(monitor, random, slow, 30e-3);
    EXPECT_NEAR(report.links[slow].mean_delay_s, 30e-3, 2e-3);
    if (report.slow_link.has_value()) {
      EXPECT_EQ(*report.slow_link, (Link{3, 4}));
      named_after = epoch;
    }
  }
  EXPECT_GT(named_after, 0) << "not named within 2 epochs";
  // It stays named while slow (its own baseline does not absorb the delay) ...
  for (int epoch = 0; epoch < 20; ++epoch) {
    EXPECT_EQ(RunEpoch(monitor, random, slow, 30e-3).slow_link, (Link{3, 4})) << epoch;
  }
  // ... and is cleared within 2 epochs once it recovers.
  std::optional<Link> named = Link{3, 4};
  for (int epoch = 0; epoch < 2 && named.has_value(); ++epoch) {
    named = RunEpoch(monitor, random, slow, 0).slow_link;
  }
  EXPECT_FALSE(named.has_value());
}

// Heavy-tailed noise on every link (Pareto, shape 1.5: rare transfers 10-100x slower), 100k
// transfers in all: nobody is named.
TEST(LinkMonitorTest, NamesNobodyOnHeavyTailedNoise) {
  LinkMonitor monitor(PipelineLinks(8));
  std::mt19937 random(11);
  std::uniform_real_distribution<double> uniform(1e-9, 1);
  int transfers = 0, named_epochs = 0;
  while (transfers < 100000) {
    for (int k = 0; k < 32; ++k) {
      for (int l = 0; l < static_cast<int>(monitor.links().size()); ++l) {
        const double pareto = std::pow(uniform(random), -1 / 1.5);  // >= 1, heavy tail
        monitor.Record(l, kBytes, kBase * (0.9 + 0.1 * pareto));
        ++transfers;
      }
    }
    named_epochs += monitor.EndEpoch().slow_link.has_value();
  }
  EXPECT_EQ(named_epochs, 0);
}

}  // namespace
}  // namespace stragglar
