// The online calibration (policy/calibration.h) and the exploration that feeds it
// (policy/exploration.h): medians per algorithm, size and regime, the state file's form, and a
// change of the machine followed without cycling.
#include "policy/calibration.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "policy/chooser.h"
#include "policy/exploration.h"

namespace stragglar {
namespace {

TEST(CalibrationTest, MedianRatioPerAlgorithmAndSizeBucket) {
  EXPECT_EQ(Calibration::Bucket(0), 0);
  EXPECT_EQ(Calibration::Bucket(1), 0);
  EXPECT_EQ(Calibration::Bucket(2), 1);
  EXPECT_EQ(Calibration::Bucket((1 << 20) + 5), 20);
  Calibration calibration;
  EXPECT_EQ(calibration.Factor(Algorithm::kRing, 1 << 20), 1);  // nothing measured
  for (double ratio : {1.1, 1.2, 1.3, 50.0, 1.25}) {            // one stalled call among them
    calibration.Add(Algorithm::kRing, 1 << 20, 1e-3, ratio * 1e-3);
  }
  EXPECT_NEAR(calibration.Factor(Algorithm::kRing, 1 << 20), 1.25, 1e-12);  // the median
  EXPECT_EQ(calibration.Samples(Algorithm::kRing, (1 << 20) + 100), 5);     // same bucket
  EXPECT_EQ(calibration.Samples(Algorithm::kRing, 1 << 21), 0);             // another one
  // An algorithm with too few samples of its own uses the pooled ratio of its size where that is
  // below 1 (1.3 here: the raw model instead), so that it is not priced out of being tried.
  calibration.Add(Algorithm::kHalvingDoubling, 1 << 20, 1e-3, 3e-3);
  EXPECT_EQ(calibration.Factor(Algorithm::kHalvingDoubling, 1 << 20), 1);
  EXPECT_EQ(calibration.Factor(Algorithm::kHalvingDoubling, 1 << 10), 1);
  for (double ratio : {0.5, 0.6, 0.5, 0.4}) {
    calibration.Add(Algorithm::kRing, 1 << 22, 1e-3, ratio * 1e-3);
  }
  EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, 1 << 22), 0.5, 1e-12);
  // Bad measurements are ignored.
  calibration.Add(Algorithm::kRing, 1 << 20, 0, 1e-3);
  calibration.Add(Algorithm::kRing, 1 << 20, 1e-3, std::nan(""));
  EXPECT_EQ(calibration.Samples(Algorithm::kRing, 1 << 20), 5);
  // Only the latest kSamplesKept count: the model follows drift.
  for (int i = 0; i < Calibration::kSamplesKept; ++i) {
    calibration.Add(Algorithm::kRing, 1 << 20, 1e-3, 2e-3);
  }
  EXPECT_NEAR(calibration.Factor(Algorithm::kRing, 1 << 20), 2.0, 1e-12);
}

TEST(CalibrationTest, JsonRoundTripAndMalformedInputChangesNothing) {
  Calibration calibration;
  for (double ratio : {0.9, 1.1, 1.0, 1.2}) {
    calibration.Add(Algorithm::kStragglar, 64 << 20, 1e-3, ratio * 1e-3);
  }
  const nlohmann::json json = calibration.ToJson();
  EXPECT_NEAR(json["stragglar"]["26"]["factor"].get<double>(), 1.1, 1e-12);
  EXPECT_NEAR(json["stragglar"]["26"]["error"].get<double>(), 0.1 / 1.1, 1e-12);
  Calibration restored;
  ASSERT_TRUE(restored.FromJson(json).ok());
  EXPECT_EQ(restored.ToJson(), json);
  for (const char* bad : {R"([1, 2])", R"({"bogus": {}})", R"({"ring": {"x": {"ratios": [1]}}})",
                          R"({"ring": {"20": {"ratios": [-1]}}})", R"({"ring": {"20": {}}})"}) {
    EXPECT_EQ(restored.FromJson(nlohmann::json::parse(bad)).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_EQ(restored.ToJson(), json) << bad;
  }
}

TEST(CalibrationTest, RegimesAreCalibratedApart) {
  const int64_t bytes = 16 << 20;
  constexpr CalibrationRegime kExposed = CalibrationRegime::kPhaseExposed;
  constexpr CalibrationRegime kHidden = CalibrationRegime::kPhaseHidden;
  Calibration calibration;
  for (int i = 0; i < 4; ++i) calibration.Add(Algorithm::kStragglar, bytes, 1e-3, 3e-3, kExposed);
  for (int i = 0; i < 5; ++i) calibration.Add(Algorithm::kRing, bytes, 1e-3, 1e-3);
  EXPECT_EQ(calibration.Samples(Algorithm::kStragglar, bytes, kExposed), 4);
  EXPECT_EQ(calibration.Samples(Algorithm::kStragglar, bytes, kHidden), 0);
  EXPECT_NEAR(calibration.Factor(Algorithm::kStragglar, bytes, kExposed), 3.0, 1e-12);
  // Nothing of its own in the hidden regime: the ratio pooled over the size (five 1s, four 3s).
  EXPECT_NEAR(calibration.Factor(Algorithm::kStragglar, bytes, kHidden), 1.0, 1e-12);
  for (double ratio : {1.1, 1.2, 1.1, 1.3, 1.2}) {
    calibration.Add(Algorithm::kStragglar, bytes, 1e-3, ratio * 1e-3, kHidden);
  }
  EXPECT_NEAR(calibration.Factor(Algorithm::kStragglar, bytes, kHidden), 1.2, 1e-12);
  EXPECT_NEAR(calibration.Factor(Algorithm::kStragglar, bytes, kExposed), 3.0, 1e-12);
  EXPECT_EQ(calibration.Samples(Algorithm::kStragglar, bytes), 4);  // kPhaseExposed by default

  const nlohmann::json json = calibration.ToJson();
  EXPECT_EQ(json["stragglar"]["24"]["samples"], 4);
  EXPECT_NEAR(json["stragglar/phase-hidden"]["24"]["factor"].get<double>(), 1.2, 1e-12);
  Calibration restored;
  ASSERT_TRUE(restored.FromJson(json).ok());
  EXPECT_EQ(restored.ToJson(), json);
  EXPECT_NEAR(restored.Factor(Algorithm::kStragglar, bytes, kHidden), 1.2, 1e-12);
  for (const char* bad : {R"({"bogus/phase-hidden": {}})",
                          R"({"ring/phase-hidden/phase-hidden": {"24": {"ratios": [1]}}})",
                          R"({"stragglar/hidden": {"24": {"ratios": [1]}}})"}) {
    EXPECT_EQ(restored.FromJson(nlohmann::json::parse(bad)).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_EQ(restored.ToJson(), json) << bad;
  }
}

// One epoch of `count` calls of `algorithm` measured at `ratio` times the model, closed.
void AddEpoch(Calibration& calibration, Algorithm algorithm, int64_t bytes, double ratio, int count,
              CalibrationRegime regime = CalibrationRegime::kPhaseExposed) {
  for (int i = 0; i < count; ++i) calibration.Add(algorithm, bytes, 1e-3, ratio * 1e-3, regime);
  calibration.CloseEpoch();
}

// A change of the machine: Ring's epoch measures 5x what it kept. Ring keeps only the new ratios,
// every other algorithm on that size is priced with the same shift and marked as a guess, and
// the other sizes keep theirs.
TEST(CalibrationTest, AShiftScalesTheOthersOnItsSizeAsGuesses) {
  const int64_t bytes = 1 << 20;
  constexpr CalibrationRegime kHidden = CalibrationRegime::kPhaseHidden;
  Calibration calibration;
  AddEpoch(calibration, Algorithm::kRing, bytes, 1.0, 8);
  AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 1.5, 8);
  AddEpoch(calibration, Algorithm::kNative, bytes, 2.0, 4);
  AddEpoch(calibration, Algorithm::kStragglar, bytes, 1.2, 4, kHidden);
  AddEpoch(calibration, Algorithm::kRing, 4 * bytes, 1.0, 8);
  EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));

  AddEpoch(calibration, Algorithm::kRing, bytes, 5.0, 8);
  EXPECT_NEAR(calibration.Factor(Algorithm::kRing, bytes), 5.0, 1e-12);
  EXPECT_EQ(calibration.Samples(Algorithm::kRing, bytes), 8);  // the new ones only
  EXPECT_FALSE(calibration.Guessed(Algorithm::kRing, bytes));
  EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, bytes), 7.5, 1e-12);
  EXPECT_NEAR(calibration.Factor(Algorithm::kNative, bytes), 10.0, 1e-12);
  EXPECT_NEAR(calibration.Factor(Algorithm::kStragglar, bytes, kHidden), 6.0, 1e-12);
  for (Algorithm other : {Algorithm::kHalvingDoubling, Algorithm::kNative}) {
    EXPECT_TRUE(calibration.Guessed(other, bytes)) << AlgorithmName(other);
    EXPECT_EQ(calibration.Samples(other, bytes), 0) << AlgorithmName(other);
  }
  EXPECT_TRUE(calibration.Guessed(Algorithm::kStragglar, bytes, kHidden));
  EXPECT_NEAR(calibration.Factor(Algorithm::kRing, 4 * bytes), 1.0, 1e-12);
  EXPECT_FALSE(calibration.Guessed(Algorithm::kRing, 4 * bytes));

  // Measured again: the guess holds until kOwnSamples are measured, then only they count.
  AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 6.0, Calibration::kOwnSamples - 1);
  EXPECT_TRUE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  EXPECT_EQ(calibration.Samples(Algorithm::kHalvingDoubling, bytes), 3);
  AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 6.0, 1);
  EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, bytes), 6.0, 1e-12);
  EXPECT_EQ(calibration.Samples(Algorithm::kHalvingDoubling, bytes), 4);
  // StragglAR measured in one regime: its guess in the other stands, no longer marked (a call's
  // regime is its arrivals', which exploring cannot choose).
  AddEpoch(calibration, Algorithm::kStragglar, bytes, 4.0, 4);
  EXPECT_FALSE(calibration.Guessed(Algorithm::kStragglar, bytes, kHidden));
  EXPECT_NEAR(calibration.Factor(Algorithm::kStragglar, bytes, kHidden), 6.0, 1e-12);

  // The machine speeds up again: a shift down works the same way.
  AddEpoch(calibration, Algorithm::kRing, bytes, 1.0, 8);
  EXPECT_NEAR(calibration.Factor(Algorithm::kRing, bytes), 1.0, 1e-12);
  EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, bytes), 1.2, 1e-12);
  EXPECT_TRUE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
}

// What is not a shift: a change under kShiftFactor, an epoch with fewer than kOwnSamples of the
// algorithm, or one whose algorithm kept fewer than kOwnSamples before it. Such ratios join the
// window as always, and nothing else changes.
TEST(CalibrationTest, NoiseAndFewSamplesAreNoShift) {
  const int64_t bytes = 1 << 20;
  const auto baseline = [&] {
    Calibration calibration;
    AddEpoch(calibration, Algorithm::kRing, bytes, 1.0, 8);
    AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 1.5, 8);
    return calibration;
  };
  {
    Calibration calibration = baseline();
    AddEpoch(calibration, Algorithm::kRing, bytes, 1.9, 8);
    EXPECT_EQ(calibration.Samples(Algorithm::kRing, bytes), 16);
    EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, bytes), 1.5, 1e-12);
    EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  }
  {
    Calibration calibration = baseline();
    AddEpoch(calibration, Algorithm::kRing, bytes, 5.0, Calibration::kOwnSamples - 1);
    EXPECT_EQ(calibration.Samples(Algorithm::kRing, bytes), 11);
    EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  }
  {
    Calibration calibration;
    AddEpoch(calibration, Algorithm::kRing, bytes, 1.0, Calibration::kOwnSamples - 1);
    AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 1.5, 8);
    AddEpoch(calibration, Algorithm::kRing, bytes, 5.0, 8);
    EXPECT_EQ(calibration.Samples(Algorithm::kRing, bytes), 11);
    EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  }
}

// What CloseEpoch says moved: the largest change of an algorithm's median either way, below a
// shift too (what the runtime probes the links again on), and 1 where nothing can be compared.
TEST(CalibrationTest, AnEpochSaysHowFarTheMeasuredMediansMoved) {
  const int64_t bytes = 1 << 20;
  Calibration calibration;
  for (int i = 0; i < 8; ++i) calibration.Add(Algorithm::kRing, bytes, 1e-3, 1e-3);
  EXPECT_EQ(calibration.CloseEpoch(), 1.0);  // nothing kept before to compare with
  for (int i = 0; i < 8; ++i) calibration.Add(Algorithm::kRing, bytes, 1e-3, 1.7e-3);
  EXPECT_NEAR(calibration.CloseEpoch(), 1.7, 1e-12);  // below kShiftFactor: no shift, a move
  EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  // Faster: the move either way. Three samples are too few to compare.
  for (int i = 0; i < 3; ++i) calibration.Add(Algorithm::kRing, bytes, 1e-3, 0.1e-3);
  EXPECT_EQ(calibration.CloseEpoch(), 1.0);
  for (int i = 0; i < 4; ++i) calibration.Add(Algorithm::kHalvingDoubling, bytes, 1e-3, 1e-3);
  calibration.CloseEpoch();
  for (int i = 0; i < 4; ++i) calibration.Add(Algorithm::kRing, bytes, 1e-3, 0.25e-3);
  for (int i = 0; i < 4; ++i) calibration.Add(Algorithm::kHalvingDoubling, bytes, 1e-3, 2e-3);
  // Ring's median kept is 1 (of 8 at 1, 8 at 1.7, 3 at 0.1): 4x faster, against 2x slower.
  EXPECT_NEAR(calibration.CloseEpoch(), 4.0, 1e-9);
}

// A plan measured for the first time as the link slows: its epoch is compared with the plans'
// median on its size and regime, a move from kShiftFactor (cluster.slowdown: Ring's first epoch
// at 3.5x Halving-Doubling's ratios), and never a shift; below it, its own model error.
TEST(CalibrationTest, AFirstMeasuredPlanMovesAgainstTheOthers) {
  const int64_t bytes = 1 << 20;
  constexpr CalibrationRegime kHidden = CalibrationRegime::kPhaseHidden;
  Calibration calibration;
  AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 1.0, 16);
  for (int i = 0; i < 2; ++i) calibration.Add(Algorithm::kRing, bytes, 1e-3, 1e-3);
  EXPECT_EQ(calibration.CloseEpoch(), 1.0);  // too few to compare
  for (int i = 0; i < 16; ++i) calibration.Add(Algorithm::kRing, bytes, 1e-3, 3.5e-3);
  EXPECT_NEAR(calibration.CloseEpoch(), 3.5, 1e-12);
  EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, bytes), 1.0, 1e-12);
  // Its own model error, below kShiftFactor: no move. Faster by kShiftFactor: a move.
  for (int i = 0; i < 4; ++i) calibration.Add(Algorithm::kStragglar, bytes, 1e-3, 1.5e-3);
  EXPECT_EQ(calibration.CloseEpoch(), 1.0);
  Calibration faster;
  AddEpoch(faster, Algorithm::kRing, bytes, 1.0, 8);
  for (int i = 0; i < 4; ++i) faster.Add(Algorithm::kHalvingDoubling, bytes, 1e-3, 0.25e-3);
  EXPECT_NEAR(faster.CloseEpoch(), 4.0, 1e-12);
  // Another regime, or the library's own, has no plans' pool to be compared with.
  for (int i = 0; i < 4; ++i) faster.Add(Algorithm::kStragglar, bytes, 1e-3, 5e-3, kHidden);
  for (int i = 0; i < 4; ++i) faster.Add(Algorithm::kNative, bytes, 1e-3, 5e-3);
  EXPECT_EQ(faster.CloseEpoch(), 1.0);
}

// A plan priced with a shift's guesses is compared with those when it runs: Ring shifted 5x,
// Halving-Doubling's 1.5 became a 7.5 guess; its first epoch at 1.2x the guess moves nothing, one
// at 2.5x the guess (the link slowed again) is a move of 2.5, not of its 3.75x the plans'
// median (Ring's 12 at 5).
TEST(CalibrationTest, AGuessedPlanMovesAgainstItsGuess) {
  const int64_t bytes = 1 << 20;
  for (const auto& [times_guess, move] : {std::pair{1.2, 1.0}, std::pair{2.5, 2.5}}) {
    Calibration calibration;
    AddEpoch(calibration, Algorithm::kRing, bytes, 1.0, 8);
    AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 1.5, 8);
    AddEpoch(calibration, Algorithm::kRing, bytes, 5.0, 12);
    ASSERT_TRUE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
    for (int i = 0; i < 4; ++i) {
      calibration.Add(Algorithm::kHalvingDoubling, bytes, 1e-3, 7.5e-3 * times_guess);
    }
    EXPECT_NEAR(calibration.CloseEpoch(), move, 1e-12) << times_guess;
  }
}

// What the epoch of a shift measured is not scaled again: another algorithm's own ratios of that
// epoch (here Halving-Doubling, which shifted too but with fewer ratios), and the algorithm that
// shifted, in its other regime, is scaled but not marked (it was just measured).
TEST(CalibrationTest, AShiftScalesOnlyWhatWasMeasuredBeforeIt) {
  const int64_t bytes = 1 << 20;
  constexpr CalibrationRegime kHidden = CalibrationRegime::kPhaseHidden;
  Calibration calibration;
  AddEpoch(calibration, Algorithm::kRing, bytes, 1.0, 8);
  AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 1.0, 8);
  AddEpoch(calibration, Algorithm::kStragglar, bytes, 1.0, 4, kHidden);
  AddEpoch(calibration, Algorithm::kStragglar, bytes, 2.0, 4);
  for (int i = 0; i < 8; ++i) calibration.Add(Algorithm::kStragglar, bytes, 1e-3, 5e-3, kHidden);
  for (int i = 0; i < 4; ++i) calibration.Add(Algorithm::kHalvingDoubling, bytes, 1e-3, 4e-3);
  calibration.CloseEpoch();
  EXPECT_NEAR(calibration.Factor(Algorithm::kStragglar, bytes, kHidden), 5.0, 1e-12);
  EXPECT_EQ(calibration.Samples(Algorithm::kStragglar, bytes, kHidden), 8);
  // Its other regime: scaled, not a guess.
  EXPECT_FALSE(calibration.Guessed(Algorithm::kStragglar, bytes));
  EXPECT_NEAR(calibration.Factor(Algorithm::kStragglar, bytes), 10.0, 1e-12);
  // Halving-Doubling's four of this epoch stand as measured (4x, not 20x), and with kOwnSamples of
  // them its scaled older ones go.
  EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  EXPECT_EQ(calibration.Samples(Algorithm::kHalvingDoubling, bytes), 4);
  EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, bytes), 4.0, 1e-12);
  EXPECT_TRUE(calibration.Guessed(Algorithm::kRing, bytes));
  EXPECT_NEAR(calibration.Factor(Algorithm::kRing, bytes), 5.0, 1e-12);
}

// An epoch with more ratios than the window keeps still shows its shift (compared with what was
// kept before it), and guesses pushed out of the window leave as they came: 32 of them, then 4
// measured, leave no guess.
TEST(CalibrationTest, ShiftsAndGuessesSurviveAFullWindow) {
  const int64_t bytes = 1 << 20;
  Calibration calibration;
  AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 1.0, Calibration::kSamplesKept);
  AddEpoch(calibration, Algorithm::kRing, bytes, 1.0, 8);
  AddEpoch(calibration, Algorithm::kRing, bytes, 3.0, Calibration::kSamplesKept + 8);
  EXPECT_TRUE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, bytes), 3.0, 1e-12);
  AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 2.0, Calibration::kOwnSamples);
  EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, bytes), 2.0, 1e-12);
  EXPECT_EQ(calibration.Samples(Algorithm::kHalvingDoubling, bytes), Calibration::kOwnSamples);
}

// The state file keeps the guesses as guesses; a "scaled" count that does not fit is refused.
TEST(CalibrationTest, GuessesSurviveTheJsonRoundTrip) {
  const int64_t bytes = 1 << 20;
  Calibration calibration;
  AddEpoch(calibration, Algorithm::kRing, bytes, 1.0, 8);
  AddEpoch(calibration, Algorithm::kHalvingDoubling, bytes, 1.5, 5);
  AddEpoch(calibration, Algorithm::kRing, bytes, 4.0, 8);
  const nlohmann::json json = calibration.ToJson();
  EXPECT_EQ(json["halving-doubling"]["20"]["scaled"], 5);
  EXPECT_FALSE(json["ring"]["20"].contains("scaled"));
  Calibration restored;
  ASSERT_TRUE(restored.FromJson(json).ok());
  EXPECT_EQ(restored.ToJson(), json);
  EXPECT_TRUE(restored.Guessed(Algorithm::kHalvingDoubling, bytes));
  // A window over kSamplesKept keeps the latest, guesses first to go; one with kOwnSamples
  // measured holds no guess, as Add leaves it.
  nlohmann::json long_window = {{"ring", {{"20", {{"ratios", std::vector<double>(40, 2.0)}}}}}};
  long_window["ring"]["20"]["scaled"] = 37;
  ASSERT_TRUE(restored.FromJson(long_window).ok());
  EXPECT_EQ(restored.ToJson()["ring"]["20"]["samples"], Calibration::kSamplesKept);
  EXPECT_EQ(restored.ToJson()["ring"]["20"]["scaled"], 29);
  EXPECT_TRUE(restored.Guessed(Algorithm::kRing, bytes));
  long_window["ring"]["20"]["scaled"] = 30;
  ASSERT_TRUE(restored.FromJson(long_window).ok());
  EXPECT_FALSE(restored.Guessed(Algorithm::kRing, bytes));
  EXPECT_EQ(restored.ToJson()["ring"]["20"]["samples"], 10);
  ASSERT_TRUE(restored.FromJson(json).ok());
  for (const char* bad : {R"({"ring": {"20": {"ratios": [1, 2], "scaled": 3}}})",
                          R"({"ring": {"20": {"ratios": [1, 2], "scaled": -1}}})",
                          R"({"ring": {"20": {"ratios": [1, 2], "scaled": "two"}}})"}) {
    EXPECT_EQ(restored.FromJson(nlohmann::json::parse(bad)).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_EQ(restored.ToJson(), json) << bad;
  }
}

// A candidate priced with a shift's guess is measured back to back, kOwnSamples calls in the
// middle of each epoch: the first such candidate that is not already chosen.
TEST(ExplorationTest, GuessedCandidatesAreMeasuredBackToBack) {
  RuntimeConfig config;
  config.epoch_calls = 16;
  std::vector<int64_t> slots;
  for (int64_t call = 0; call < 32; ++call) {
    if (IsRemeasuringCall(call, config)) slots.push_back(call);
  }
  EXPECT_EQ(slots, (std::vector<int64_t>{6, 7, 8, 9, 22, 23, 24, 25}));
  config.epoch_calls = 3;  // shorter than kOwnSamples: every call
  EXPECT_TRUE(IsRemeasuringCall(0, config) && IsRemeasuringCall(1, config) &&
              IsRemeasuringCall(2, config));
  config.explore_every = 0;  // never explore
  EXPECT_FALSE(IsRemeasuringCall(1, config));

  const CallDecision chosen{.call = 7, .algorithm = Algorithm::kRing, .predicted_s = 1};
  std::vector<CandidatePrice> priced = {
      {.algorithm = Algorithm::kRing, .guessed = true},
      {.algorithm = Algorithm::kHalvingDoubling},
      {.algorithm = Algorithm::kStragglar, .straggler = 3, .guessed = true},
      {.algorithm = Algorithm::kNative, .guessed = true}};
  const CallDecision measured = Remeasure(chosen, priced);
  EXPECT_EQ(measured.algorithm, Algorithm::kStragglar);
  EXPECT_EQ(measured.straggler, 3);
  EXPECT_TRUE(measured.explored);
  EXPECT_EQ(measured.call, 7);
  priced[2].guessed = priced[3].guessed = false;
  EXPECT_EQ(Remeasure(chosen, priced).algorithm, Algorithm::kRing);
  EXPECT_FALSE(Remeasure(chosen, priced).explored);
}

}  // namespace
}  // namespace stragglar
