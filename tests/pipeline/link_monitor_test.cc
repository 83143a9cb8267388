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

TEST(LinkMonitorTest, LearnsEachLinksTypicalTimeAndMeasuresDelays) {
  LinkMonitor monitor(PipelineLinks(2));
  EXPECT_EQ(monitor.ExpectedSeconds(0, kBytes), 0);
  monitor.Record(0, kBytes, 2 * kBase);  // the first sets the baseline
  EXPECT_NEAR(monitor.ExpectedSeconds(0, kBytes), 2 * kBase, 1e-15);
  monitor.Record(0, kBytes, kBase);
  monitor.Record(0, kBytes, kBase);  // the median of 2, 1 and 1 ms: 1 ms is what it takes
  EXPECT_NEAR(monitor.ExpectedSeconds(0, kBytes), kBase, 1e-15);
  EXPECT_NEAR(monitor.ExpectedSeconds(0, kBytes / 2 + 1), kBase / 2, 1e-9);  // same bucket
  EXPECT_EQ(monitor.ExpectedSeconds(0, kBytes * 4), 0);  // another size: not learned yet
  monitor.Record(0, kBytes, 5 * kBase);
  monitor.Record(1, kBytes, kBase);
  const LinkEpochReport report = monitor.EndEpoch();
  ASSERT_EQ(report.links.size(), 2u);
  EXPECT_EQ(report.links[0].transfers, 4);
  EXPECT_NEAR(report.links[0].mean_seconds, 9 * kBase / 4, 1e-12);
  // Delays 0 (first), 0 and 0 (faster than 2 ms), 4 ms (5 ms against 1 ms).
  EXPECT_NEAR(report.links[0].mean_delay_s, kBase, 1e-12);
  EXPECT_EQ(report.links[1].mean_delay_s, 0);
  EXPECT_EQ(monitor.IndexOf({1, 0}), 1);
  EXPECT_EQ(monitor.IndexOf({0, 2}), -1);
}

// After its first kLearnTransfers, a link's expectation follows its median by one small step per
// transfer: one stall moves it no more than one fast transfer, a lasting change is learned in a
// few thousand transfers.
TEST(LinkMonitorTest, FollowsALastingChangeSlowly) {
  const LinkMonitorConfig config;
  LinkMonitor monitor(PipelineLinks(2), config);
  for (int i = 0; i < LinkMonitor::kLearnTransfers; ++i) monitor.Record(0, kBytes, kBase);
  monitor.Record(0, kBytes, 100 * kBase);  // a stall: one step up
  EXPECT_NEAR(monitor.ExpectedSeconds(0, kBytes), kBase * (1 + config.baseline_drift), 1e-15);
  monitor.Record(0, kBytes, kBase / 100);  // a fast one: one step down
  EXPECT_NEAR(monitor.ExpectedSeconds(0, kBytes), kBase, 1e-15);
  // Twice as slow from now on: ln 2 / 1e-4 = 6932 transfers to learn it.
  for (int i = 0; i < 5000; ++i) monitor.Record(0, kBytes, 2 * kBase);
  EXPECT_LT(monitor.ExpectedSeconds(0, kBytes), 1.7 * kBase);
  for (int i = 0; i < 5000; ++i) monitor.Record(0, kBytes, 2 * kBase);
  EXPECT_NEAR(monitor.ExpectedSeconds(0, kBytes), 2 * kBase, 2 * kBase * config.baseline_drift);
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

// A healthy pipeline in which one link's transfers also wait for their peer, 0 to 4 ms each
// time: its schedule, not a slow link (on an H200 over NCCL sockets, such links were named while
// measured against their fastest transfer). It is never named; a link that then becomes twice as
// slow beside it is, within 2 epochs.
TEST(LinkMonitorTest, NamesALinkTwiceAsSlowButNotOneThatWaitsForItsPeer) {
  LinkMonitor monitor(PipelineLinks(8));
  std::mt19937 random(1);
  std::lognormal_distribution<double> noise(0, 0.05);
  std::uniform_real_distribution<double> wait_s(0, 4e-3);
  const int waiting = monitor.IndexOf({0, 1});
  const int slow = monitor.IndexOf({3, 4});
  const auto run_epoch = [&](double slow_factor) {
    for (int k = 0; k < 32; ++k) {
      for (int l = 0; l < static_cast<int>(monitor.links().size()); ++l) {
        const double seconds = kBase * noise(random) * (l == slow ? slow_factor : 1);
        monitor.Record(l, kBytes, seconds + (l == waiting ? wait_s(random) : 0));
      }
    }
    return monitor.EndEpoch();
  };
  for (int epoch = 0; epoch < 20; ++epoch) {
    const LinkEpochReport report = run_epoch(1);
    EXPECT_FALSE(report.slow_link.has_value())
        << "epoch " << epoch << ": named link " << report.slow_link->src << "->"
        << report.slow_link->dst;
  }
  bool named = false;
  for (int epoch = 0; epoch < 2 && !named; ++epoch) {
    const std::optional<Link> slow_link = run_epoch(2).slow_link;
    named = slow_link == Link{3, 4};
    EXPECT_TRUE(!slow_link.has_value() || named) << slow_link->src << "->" << slow_link->dst;
  }
  EXPECT_TRUE(named) << "a link twice as slow was not named within 2 epochs";
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
