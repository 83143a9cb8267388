#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/chooser.h"
#include "policy/detector.h"

namespace stragglar {
namespace {

std::vector<double> Lags(int num_ranks, std::mt19937& random, double noise_s, int late_rank = -1,
                         double late_s = 0) {
  std::normal_distribution<double> noise(0, noise_s);
  std::vector<double> arrival(num_ranks);
  for (int r = 0; r < num_ranks; ++r) arrival[r] = std::abs(noise(random));
  if (late_rank >= 0) arrival[late_rank] += late_s;
  const double first = *std::min_element(arrival.begin(), arrival.end());
  for (double& a : arrival) a -= first;
  return arrival;
}

TEST(DetectorTest, PersistentStragglerIsDeclaredOnceTheWindowHasEnoughCalls) {
  std::mt19937 random(1);
  StragglerDetector detector(8, DetectorConfig{});
  for (int call = 0; call < 200; ++call) {
    detector.Observe(Lags(8, random, 100e-6, /*late_rank=*/3, /*late_s=*/5e-3));
    // min_calls = 32: undecided before, declared exactly when the 32nd call is seen.
    EXPECT_EQ(detector.straggler().has_value(), call + 1 >= 32) << call;
  }
  EXPECT_EQ(detector.straggler(), 3);
  EXPECT_DOUBLE_EQ(detector.persistence(3), 1.0);
  EXPECT_NEAR(detector.median_lag(3), 5e-3, 5e-4);
}

TEST(DetectorTest, NoiseIsNeverDeclared) {
  std::mt19937 random(2);
  for (int ranks : {3, 4, 8, 16}) {
    StragglerDetector detector(ranks, DetectorConfig{});
    for (int call = 0; call < 20000; ++call) {
      detector.Observe(Lags(ranks, random, 1e-3));
      ASSERT_FALSE(detector.straggler().has_value()) << ranks << " ranks, call " << call;
    }
  }
}

TEST(DetectorTest, OneOffStallsAreNeverDeclared) {
  std::mt19937 random(3);
  StragglerDetector detector(8, DetectorConfig{});
  for (int call = 0; call < 5000; ++call) {
    // Every 50th call some rank stalls for 50 ms (a GC pause), otherwise noise.
    const bool stall = call % 50 == 0;
    detector.Observe(Lags(8, random, 200e-6, stall ? call / 50 % 8 : -1, 50e-3));
    ASSERT_FALSE(detector.straggler().has_value()) << call;
  }
}

TEST(DetectorTest, HysteresisKeepsTheVerdictThroughShortGapsAndMovesOnWhenTheStragglerChanges) {
  std::mt19937 random(4);
  DetectorConfig config;
  StragglerDetector detector(8, config);
  for (int call = 0; call < 128; ++call) detector.Observe(Lags(8, random, 1e-4, 2, 4e-3));
  ASSERT_EQ(detector.straggler(), 2);
  // 40 punctual calls: persistence falls to 88/128 = 0.69, above exit_ratio, so the verdict stays.
  for (int call = 0; call < 40; ++call) detector.Observe(Lags(8, random, 1e-4));
  EXPECT_EQ(detector.straggler(), 2);
  // Rank 6 becomes the straggler: rank 2 is dropped once its share falls below 0.3 and rank 6
  // is declared once its share reaches 0.6.
  int switched_at = -1;
  for (int call = 0; call < 256 && switched_at < 0; ++call) {
    detector.Observe(Lags(8, random, 1e-4, 6, 4e-3));
    if (detector.straggler() == 6) switched_at = call;
    if (detector.straggler().has_value()) {
      EXPECT_TRUE(*detector.straggler() == 2 || *detector.straggler() == 6);
    }
  }
  EXPECT_EQ(switched_at, static_cast<int>(std::ceil(0.6 * config.window_calls)) - 1);
}

TEST(ChooserTest, PicksStragglarOnlyWhenTheDelayPaysForIt) {
  const LinkModel paper{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  Chooser chooser(8, {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kStragglar});
  const double bytes = 1 << 30;
  std::vector<double> late(8, 0.0);
  late[5] = 20e-3;
  absl::StatusOr<Choice> choice = chooser.Choose(bytes, late, 5, paper);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kStragglar);
  EXPECT_EQ(choice->straggler, 5);
  EXPECT_LT(choice->predicted_s, choice->baseline_predicted_s);
  // On time: StragglAR pays its ReduceScatter in full and loses.
  const std::vector<double> punctual(8, 0.0);
  choice = chooser.Choose(bytes, punctual, 5, paper);
  ASSERT_TRUE(choice.ok());
  EXPECT_NE(choice->algorithm, Algorithm::kStragglar);
  // Without a detected straggler StragglAR is never a candidate.
  choice = chooser.Choose(bytes, late, std::nullopt, paper);
  ASSERT_TRUE(choice.ok());
  EXPECT_NE(choice->algorithm, Algorithm::kStragglar);
}

TEST(ChooserTest, SharedLanesChargeCrowdedRoundsMore) {
  const LinkModel independent{.alpha_s = 0, .bandwidth_bytes_per_s = 1e9};
  LinkModel shared = independent;
  shared.shared_lanes = 2;
  EXPECT_DOUBLE_EQ(independent.TransferSeconds(1e6, 8), 1e-3);
  EXPECT_DOUBLE_EQ(shared.TransferSeconds(1e6, 8), 4e-3);
  EXPECT_DOUBLE_EQ(shared.TransferSeconds(1e6, 1), 1e-3);
}

TEST(ChooserTest, SmallPredictedGainsKeepTheDefault) {
  // 16 MiB on 8 punctual ranks: halving-doubling saves only alpha (8 rounds x 3 us) over ring's
  // ~3.9 ms, far below 5%, so ring stays; with min_gain 0 the faster prediction wins.
  const LinkModel slow{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 8e9};
  const std::vector<double> punctual(8, 0.0);
  Chooser cautious(8, {Algorithm::kRing, Algorithm::kHalvingDoubling});
  absl::StatusOr<Choice> choice = cautious.Choose(16 << 20, punctual, std::nullopt, slow);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kRing);
  EXPECT_DOUBLE_EQ(choice->predicted_s, choice->baseline_predicted_s);
  Chooser eager(8, {Algorithm::kRing, Algorithm::kHalvingDoubling}, /*min_gain=*/0);
  choice = eager.Choose(16 << 20, punctual, std::nullopt, slow);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kHalvingDoubling);
}

TEST(ChooserTest, TiesKeepTheEarlierCandidate) {
  // Two ranks, zero alpha: ring and halving-doubling cost the same; ring is listed first.
  Chooser chooser(2, {Algorithm::kRing, Algorithm::kHalvingDoubling});
  absl::StatusOr<Choice> choice =
      chooser.Choose(1e6, {0.0, 0.0}, std::nullopt, {.alpha_s = 0, .bandwidth_bytes_per_s = 1e9});
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kRing);
}

}  // namespace
}  // namespace stragglar
