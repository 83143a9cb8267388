#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"
#include "policy/model/simulator.h"
#include "runtime/host_runtime.h"
#include "runtime/runtime_core.h"
#include "runtime/state_file.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

const LinkModel kPaperLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};

TEST(RuntimeCoreTest, BadConfigurationIsRejected) {
  RuntimeConfig config;
  EXPECT_THAT(RuntimeCore::Create(config, 0, 1, kPaperLink).status().message(),
              HasSubstr("at least 2 ranks"));
  EXPECT_THAT(RuntimeCore::Create(config, 4, 4, kPaperLink).status().message(),
              HasSubstr("rank 4 outside"));
  config.epoch_calls = 0;
  EXPECT_THAT(RuntimeCore::Create(config, 0, 4, kPaperLink).status().message(),
              HasSubstr("epoch_calls"));
}

// Feeds every rank's core the same exchanged epochs, as a backend would.
std::vector<RuntimeCore> Cores(int n, const RuntimeConfig& config) {
  std::vector<RuntimeCore> cores;
  for (int rank = 0; rank < n; ++rank) {
    cores.push_back(*RuntimeCore::Create(config, rank, n, kPaperLink));
  }
  return cores;
}

absl::Status RunEpoch(std::vector<RuntimeCore>& cores, int64_t bytes, int late_rank, double delay_s,
                      std::vector<CallDecision>* decisions) {
  const int n = static_cast<int>(cores.size());
  for (int call = 0; call < cores[0].config().epoch_calls; ++call) {
    for (int rank = 0; rank < n; ++rank) {
      absl::StatusOr<CallDecision> decision = cores[rank].Decide(bytes);
      if (!decision.ok()) return decision.status();
      if (rank == 0) decisions->push_back(*decision);
      // Every rank must take the same decision for the same call.
      EXPECT_EQ(decision->algorithm, decisions->back().algorithm) << "call " << decision->call;
      EXPECT_EQ(decision->straggler, decisions->back().straggler);
      const double arrival = 1.0 * decision->call + (rank == late_rank ? delay_s : 1e-5 * rank);
      // No durations: the calibration has nothing to measure and leaves the model as it is.
      cores[rank].Record({.arrival_s = arrival, .duration_s = 0});
    }
  }
  std::vector<double> all;
  for (const RuntimeCore& core : cores) {
    const std::vector<double> payload = core.EpochPayload();
    all.insert(all.end(), payload.begin(), payload.end());
  }
  for (RuntimeCore& core : cores) {
    EXPECT_TRUE(core.ExchangeDue());
    if (absl::Status status = core.AbsorbEpoch(all); !status.ok()) return status;
  }
  return absl::OkStatus();
}

TEST(RuntimeCoreTest, AdaptsAtEpochBoundariesIdenticallyOnEveryRank) {
  RuntimeConfig config;
  config.epoch_calls = 32;
  std::vector<RuntimeCore> cores = Cores(8, config);
  std::vector<CallDecision> decisions;
  for (int epoch = 0; epoch < 3; ++epoch) {
    ASSERT_TRUE(RunEpoch(cores, 1 << 30, 5, 20e-3, &decisions).ok());
  }
  // Epoch 0 knows nothing: ring. Afterwards rank 5 is declared and StragglAR chosen, except for
  // the exploration call (one in explore_every, at the same index on every rank), which runs the
  // candidate the calibration has measured least (none has samples here, so the first other in
  // candidate order: Ring).
  for (int call = 0; call < 32; ++call) EXPECT_EQ(decisions[call].algorithm, Algorithm::kRing);
  for (int call = 32; call < 96; ++call) {
    EXPECT_EQ(decisions[call].call, call);
    const bool explore = call % config.explore_every == config.explore_every / 2;
    EXPECT_EQ(decisions[call].explored, explore) << call;
    if (explore) {
      EXPECT_EQ(decisions[call].algorithm, Algorithm::kRing) << call;
      continue;
    }
    EXPECT_EQ(decisions[call].algorithm, Algorithm::kStragglar) << call;
    EXPECT_EQ(decisions[call].straggler, 5);
  }
  EXPECT_EQ(cores[3].detector().straggler(), 5);
  EXPECT_EQ(cores[0].epochs(), 3);
}

TEST(RuntimeCoreTest, ObserveModeDetectsButNeverSwitches) {
  RuntimeConfig config;
  config.epoch_calls = 32;
  config.mode = RuntimeMode::kObserve;
  std::vector<RuntimeCore> cores = Cores(4, config);
  std::vector<CallDecision> decisions;
  for (int epoch = 0; epoch < 3; ++epoch) {
    ASSERT_TRUE(RunEpoch(cores, 1 << 30, 2, 20e-3, &decisions).ok());
  }
  for (const CallDecision& decision : decisions) EXPECT_EQ(decision.algorithm, Algorithm::kRing);
  EXPECT_EQ(cores[0].detector().straggler(), 2);
}

TEST(RuntimeCoreTest, SmallCallsKeepTheDefault) {
  RuntimeConfig config;
  config.epoch_calls = 32;
  config.min_bytes = 1 << 20;
  std::vector<RuntimeCore> cores = Cores(4, config);
  std::vector<CallDecision> decisions;
  for (int epoch = 0; epoch < 2; ++epoch) {
    ASSERT_TRUE(RunEpoch(cores, 4096, 2, 20e-3, &decisions).ok());
  }
  for (const CallDecision& decision : decisions) EXPECT_EQ(decision.algorithm, Algorithm::kRing);
}

// A backend that forces an algorithm records what really ran: the report shows it.
TEST(RuntimeCoreTest, RecordCreditsTheAlgorithmThatRan) {
  RuntimeConfig config;
  config.epoch_calls = 2;
  std::vector<RuntimeCore> cores = Cores(2, config);
  std::vector<double> all;
  for (RuntimeCore& core : cores) {
    for (int call = 0; call < 2; ++call) {
      const CallDecision decided = *core.Decide(1 << 20);
      ASSERT_EQ(decided.algorithm, Algorithm::kRing);
      CallDecision forced = decided;
      forced.algorithm = Algorithm::kStragglar;
      forced.straggler = 1;
      core.Record({.arrival_s = 1.0 * call, .duration_s = 1e-3}, forced);
    }
    const std::vector<double> payload = core.EpochPayload();
    all.insert(all.end(), payload.begin(), payload.end());
  }
  ASSERT_TRUE(cores[0].AbsorbEpoch(all).ok());
  for (const EpochCallReport& call : cores[0].last_epoch().calls) {
    EXPECT_EQ(call.decision.algorithm, Algorithm::kStragglar);
    EXPECT_EQ(call.decision.straggler, 1);
  }
  EXPECT_EQ(cores[0].last_epoch().calls[1].decision.call, 1);
}

TEST(RuntimeCoreTest, MismatchedEpochSizesAreRejected) {
  RuntimeConfig config;
  config.epoch_calls = 2;
  std::vector<RuntimeCore> cores = Cores(2, config);
  ASSERT_TRUE(cores[0].Decide(8).ok());
  cores[0].Record({0, 1});
  EXPECT_THAT(cores[0].AbsorbEpoch(std::vector<double>(3)).message(),
              HasSubstr("ranks disagree on the call count"));
}

// The GPU backend's deferred exchange: an epoch is sealed when full, calls go on into the next,
// and the sealed epoch is absorbed later with timings the backend measured itself. The result is
// what an immediate exchange gives, one epoch later, and the ranks stay identical.
TEST(RuntimeCoreTest, SealedEpochsAreAbsorbedLaterWithTheSameResult) {
  RuntimeConfig config;
  config.epoch_calls = 8;
  config.explore_every = 0;
  config.detector.min_calls = 8;  // a verdict after one epoch
  // Without calibration the decisions depend on the lags alone, not on which algorithm ran, so
  // the deferred cores must reproduce the immediate ones exactly, one epoch later.
  config.calibration_calls_per_epoch = 0;
  const int n = 4, late = 2;
  std::vector<RuntimeCore> cores = Cores(n, config);
  // Timings by rank and call, known to the backend only after the call (as a GPU's).
  auto timing = [&](int rank, int64_t call) {
    return CallTiming{.arrival_s = 1.0 * call + (rank == late ? 20e-3 : 1e-5 * rank),
                      .duration_s = 1e-3};
  };
  std::vector<CallDecision> decisions;
  for (int64_t call = 0; call < 40; ++call) {
    // The exchange point: absorb the sealed epoch (half an epoch after it was gathered), then
    // seal the one that just filled.
    if (cores[0].ExchangeDue()) {
      if (cores[0].HasSealedEpoch()) {
        const int64_t first = cores[0].sealed_first_call();
        std::vector<double> all;
        for (int rank = 0; rank < n; ++rank) {
          // The GPU's timings arrive: every pending call of the sealed epoch is filled.
          for (int i = 0; i < cores[rank].sealed_calls(); ++i) {
            ASSERT_EQ(cores[rank].OldestPending()->first, first + i);
            ASSERT_TRUE(cores[rank].Fill(first + i, timing(rank, first + i)).ok());
          }
          const std::vector<double> payload = cores[rank].EpochPayload();
          all.insert(all.end(), payload.begin(), payload.end());
        }
        for (RuntimeCore& core : cores) ASSERT_TRUE(core.AbsorbEpoch(all).ok());
        EXPECT_EQ(cores[0].last_epoch().first_call, first);
        EXPECT_FALSE(cores[0].HasSealedEpoch());
      }
      for (RuntimeCore& core : cores) ASSERT_TRUE(core.SealEpoch().ok());
      EXPECT_THAT(cores[0].SealEpoch().message(), HasSubstr("already sealed"));
    }
    for (int rank = 0; rank < n; ++rank) {
      const CallDecision decision = *cores[rank].Decide(1 << 30);
      if (rank == 0) decisions.push_back(decision);
      EXPECT_EQ(decision.algorithm, decisions.back().algorithm) << call;
      EXPECT_EQ(decision.straggler, decisions.back().straggler) << call;
      // The timing is not known yet.
      cores[rank].RecordPending(decision, {.ticket = static_cast<uint64_t>(call)});
    }
  }
  // The same calls with an immediate exchange at every epoch's end: the deferred cores decide in
  // epoch k + 1 what these decide in epoch k (both have absorbed epochs 0 .. k - 1).
  std::vector<RuntimeCore> immediate = Cores(n, config);
  std::vector<CallDecision> reference;
  for (int64_t call = 0; call < 40; ++call) {
    for (int rank = 0; rank < n; ++rank) {
      const CallDecision decision = *immediate[rank].Decide(1 << 30);
      if (rank == 0) reference.push_back(decision);
      immediate[rank].Record(timing(rank, call));
    }
    if (immediate[0].ExchangeDue()) {
      std::vector<double> all;
      for (const RuntimeCore& core : immediate) {
        const std::vector<double> payload = core.EpochPayload();
        all.insert(all.end(), payload.begin(), payload.end());
      }
      for (RuntimeCore& core : immediate) ASSERT_TRUE(core.AbsorbEpoch(all).ok());
    }
  }
  for (int call = 0; call < 16; ++call) EXPECT_EQ(decisions[call].algorithm, Algorithm::kRing);
  int stragglar_calls = 0;
  for (int call = 16; call < 40; ++call) {
    EXPECT_EQ(decisions[call].algorithm, reference[call - 8].algorithm) << call;
    EXPECT_EQ(decisions[call].straggler, reference[call - 8].straggler) << call;
    stragglar_calls += decisions[call].algorithm == Algorithm::kStragglar;
  }
  EXPECT_GT(stragglar_calls, 0);
  EXPECT_EQ(decisions.back().straggler, late);
  EXPECT_EQ(cores[1].epochs(), 3);  // absorbed at calls 16, 24 and 32
  EXPECT_EQ(cores[1].detector().straggler(), late);
  // A partial epoch cannot be sealed.
  RuntimeCore fresh = *RuntimeCore::Create(config, 0, n, kPaperLink);
  EXPECT_THAT(fresh.SealEpoch().message(), HasSubstr("0 of 8 calls"));
}

// The epoch report holds every rank's timing and lags of every call, the verdict, and the time
// saved: the calibrated model's Ring time on the call's lags minus the measured shortest duration,
// exactly; 0 for calls that ran the default.
TEST(RuntimeCoreTest, EpochReportEstimatesTimeSavedAgainstTheDefault) {
  RuntimeConfig config;
  config.epoch_calls = 4;
  config.explore_every = 0;
  config.calibration_calls_per_epoch = 0;  // factor 1: the raw model is the baseline
  const int n = 4;
  const int64_t bytes = 1 << 20;
  std::vector<RuntimeCore> cores = Cores(n, config);
  LearnedState state{.num_ranks = n, .predicted_lag_s = {0, 0, 0, 5e-3}, .straggler = 3};
  const std::vector<double> lags = {0, 0.25e-3, 0.5e-3, 5e-3};
  const double measured_s = 1.0 / 1024;  // the shortest duration (the last rank's)
  std::vector<double> all;
  for (int epoch = 0; epoch < 2; ++epoch) {
    all.clear();
    for (int rank = 0; rank < n; ++rank) {
      if (epoch == 1) {
        ASSERT_TRUE(cores[rank].ImportState(state).ok());
      }
      for (int call = 0; call < 4; ++call) {
        ASSERT_TRUE(cores[rank].Decide(bytes).ok());
        cores[rank].Record({.arrival_s = 10.0 * call + lags[rank],
                            .duration_s = measured_s + lags[3] - lags[rank]});
      }
      const std::vector<double> payload = cores[rank].EpochPayload();
      all.insert(all.end(), payload.begin(), payload.end());
    }
    for (RuntimeCore& core : cores) ASSERT_TRUE(core.AbsorbEpoch(all).ok());
    const EpochReport& report = cores[2].last_epoch();
    EXPECT_EQ(report.epoch, epoch);
    EXPECT_EQ(report.first_call, 4 * epoch);
    ASSERT_EQ(report.calls.size(), 4u);
    ASSERT_EQ(report.persistence.size(), 4u);
    for (const EpochCallReport& call : report.calls) {
      EXPECT_EQ(call.bytes, bytes);
      ASSERT_EQ(call.lag_s.size(), 4u);
      for (int rank = 0; rank < n; ++rank) EXPECT_NEAR(call.lag_s[rank], lags[rank], 1e-12);
      EXPECT_EQ(call.timing[3].duration_s, measured_s);
      if (epoch == 0) {
        EXPECT_EQ(call.decision.algorithm, Algorithm::kRing);  // nothing learned yet
        EXPECT_EQ(call.saved_s, 0);
        continue;
      }
      ASSERT_EQ(call.decision.algorithm, Algorithm::kStragglar);
      const Plan ring = *SynthesizeRing(n);
      const SimulationResult model = *SimulatePlan(ring, bytes, kPaperLink, call.lag_s);
      double ring_s = 1e9;
      for (int rank = 0; rank < n; ++rank) {
        ring_s = std::min(ring_s, model.finish_s[rank] - call.lag_s[rank]);
      }
      EXPECT_DOUBLE_EQ(call.saved_s, ring_s - measured_s);
    }
    // Every rank reports the same.
    EXPECT_EQ(cores[0].last_epoch().calls[1].saved_s, report.calls[1].saved_s);
  }
}

// How long a call takes on the host of RunMeasuredEpoch: the model's time, times `scale` of the
// algorithm that ran (1 where absent), and for StragglAR's calls with nobody late
// `exposed_extra_s` more (its pre-arrival phase contends for the cores).
struct MeasuredHost {
  double exposed_extra_s = 0;
  std::map<Algorithm, double> scale;
};

// Runs one epoch of `bytes` with `late_rank` late by `delay_s` (none when -1) on `host`, every
// rank's duration from the simulation of the plan that ran, and returns rank 0's decisions.
std::vector<CallDecision> RunMeasuredEpoch(std::vector<RuntimeCore>& cores, int64_t bytes,
                                           int late_rank, double delay_s,
                                           const MeasuredHost& host) {
  const int n = static_cast<int>(cores.size());
  std::vector<CallDecision> decisions;
  for (int call = 0; call < cores[0].config().epoch_calls; ++call) {
    std::vector<CallDecision> by_rank;
    for (RuntimeCore& core : cores) by_rank.push_back(*core.Decide(bytes));
    for (const CallDecision& decision : by_rank) {
      EXPECT_EQ(decision.algorithm, by_rank[0].algorithm) << decision.call;
      EXPECT_EQ(decision.straggler, by_rank[0].straggler) << decision.call;
    }
    const int64_t index = by_rank[0].call;
    std::vector<double> arrival_s(n);
    for (int rank = 0; rank < n; ++rank) {
      arrival_s[rank] = 1.0 * index + (rank == late_rank ? delay_s : 1e-6 * rank);
    }
    const double first_s = *std::min_element(arrival_s.begin(), arrival_s.end());
    std::vector<double> lags(n);
    for (int rank = 0; rank < n; ++rank) lags[rank] = arrival_s[rank] - first_s;
    const Plan& plan = **cores[0].PlanFor(by_rank[0], bytes);
    const SimulationResult model = *SimulatePlan(plan, bytes, kPaperLink, lags);
    const bool slow = by_rank[0].algorithm == Algorithm::kStragglar && late_rank < 0;
    auto scaled = host.scale.find(by_rank[0].algorithm);
    const double scale = scaled == host.scale.end() ? 1.0 : scaled->second;
    for (int rank = 0; rank < n; ++rank) {
      cores[rank].Record({.arrival_s = arrival_s[rank],
                          .duration_s = (model.finish_s[rank] - lags[rank]) * scale +
                                        (slow ? host.exposed_extra_s : 0.0)});
    }
    decisions.push_back(by_rank[0]);
  }
  std::vector<double> all;
  for (const RuntimeCore& core : cores) {
    const std::vector<double> payload = core.EpochPayload();
    all.insert(all.end(), payload.begin(), payload.end());
  }
  for (RuntimeCore& core : cores) EXPECT_TRUE(core.AbsorbEpoch(all).ok());
  return decisions;
}

// The MPI preload's failure on a 2-core host (docs/mpi.md): StragglAR explored with nobody late
// measured 3x slower than modelled, and with one factor per size that kept the policy on Ring when
// a persistent straggler came. Calibrated per regime, StragglAR is chosen as soon as the
// straggler is named, and its measured calls with the phase hidden keep it there.
TEST(RuntimeCoreTest, SlowStragglarWithNobodyLateDoesNotHideAPersistentStraggler) {
  RuntimeConfig config;
  config.epoch_calls = 32;
  config.explore_every = 8;
  const int n = 4;
  const int64_t bytes = 16 << 20;
  std::vector<RuntimeCore> cores = Cores(n, config);
  const Plan& stragglar =
      **cores[0].PlanFor({.algorithm = Algorithm::kStragglar, .straggler = n - 1}, bytes);
  const double exposed_extra_s =
      2 * SimulatePlan(stragglar, bytes, kPaperLink, std::vector<double>(n, 0.0))->completion_s;
  constexpr CalibrationRegime kExposed = CalibrationRegime::kPhaseExposed;
  constexpr CalibrationRegime kHidden = CalibrationRegime::kPhaseHidden;

  for (int epoch = 0; epoch < 6; ++epoch) {
    for (const CallDecision& decision : RunMeasuredEpoch(cores, bytes, /*late_rank=*/-1, 0,
                                                         {.exposed_extra_s = exposed_extra_s})) {
      if (!decision.explored) {
        EXPECT_NE(decision.algorithm, Algorithm::kStragglar) << decision.call;
      }
    }
  }
  const Calibration& calibration = cores[0].calibration();
  ASSERT_GE(calibration.Samples(Algorithm::kStragglar, bytes, kExposed), Calibration::kOwnSamples);
  EXPECT_GT(calibration.Factor(Algorithm::kStragglar, bytes, kExposed), 2.5);
  EXPECT_EQ(calibration.Samples(Algorithm::kStragglar, bytes, kHidden), 0);

  // Rank 3 turns 20 ms late. The detector names it after a few epochs; from the next one on, every
  // call but the explorations runs StragglAR around it.
  int named_after = -1;
  for (int epoch = 0; epoch < 8; ++epoch) {
    const std::vector<CallDecision> decisions = RunMeasuredEpoch(
        cores, bytes, /*late_rank=*/n - 1, 20e-3, {.exposed_extra_s = exposed_extra_s});
    if (named_after < 0) {
      if (cores[0].detector().straggler() == n - 1) named_after = epoch;
      continue;
    }
    for (const CallDecision& decision : decisions) {
      if (decision.explored) continue;
      EXPECT_EQ(decision.algorithm, Algorithm::kStragglar) << decision.call;
      EXPECT_EQ(decision.straggler, n - 1) << decision.call;
    }
  }
  ASSERT_GE(named_after, 0) << "the straggler was never named";
  EXPECT_LE(named_after, 4);
  // What it measured with the phase hidden is the model's time, and the exposed factor is kept.
  EXPECT_GE(calibration.Samples(Algorithm::kStragglar, bytes, kHidden), Calibration::kOwnSamples);
  EXPECT_NEAR(calibration.Factor(Algorithm::kStragglar, bytes, kHidden), 1.0, 1e-6);
  EXPECT_GT(calibration.Factor(Algorithm::kStragglar, bytes, kExposed), 2.5);
}

// Exploration stops paying for a candidate measured far slower: StragglAR with nobody late,
// measured 3x the model, is explored until it has Calibration::kOwnSamples samples, then only in
// one exploration slot of costly_explore_every; with that at 1, in every slot, as before.
TEST(RuntimeCoreTest, CandidatesMeasuredFarSlowerAreExploredRarely) {
  const int n = 4;
  const int64_t bytes = 16 << 20;
  for (int costly_explore_every : {16, 1}) {
    RuntimeConfig config;
    config.epoch_calls = 32;
    config.explore_every = 8;  // slots at calls 4, 12, 20, ...: slot = call / 8
    config.costly_explore_every = costly_explore_every;
    config.candidates = {Algorithm::kRing, Algorithm::kStragglar};
    std::vector<RuntimeCore> cores = Cores(n, config);
    const Plan& stragglar =
        **cores[0].PlanFor({.algorithm = Algorithm::kStragglar, .straggler = n - 1}, bytes);
    const double exposed_extra_s =
        2 * SimulatePlan(stragglar, bytes, kPaperLink, std::vector<double>(n, 0.0))->completion_s;
    std::vector<int64_t> stragglar_calls;
    for (int epoch = 0; epoch < 12; ++epoch) {
      for (const CallDecision& decision : RunMeasuredEpoch(cores, bytes, /*late_rank=*/-1, 0,
                                                           {.exposed_extra_s = exposed_extra_s})) {
        if (decision.algorithm != Algorithm::kStragglar) continue;
        EXPECT_TRUE(decision.explored) << decision.call;
        stragglar_calls.push_back(decision.call);
      }
    }
    // Epoch 0 does not adapt; epoch 1's four slots measure it; then it is known to cost 3x.
    std::vector<int64_t> expected = {36, 44, 52, 60};
    for (int64_t slot = 8; slot < 48; ++slot) {
      if (slot % costly_explore_every == 0) expected.push_back(8 * slot + 4);
    }
    EXPECT_EQ(stragglar_calls, expected) << "costly_explore_every " << costly_explore_every;
    // A straggler makes a regime with no samples: StragglAR is tried, and then chosen.
    int stragglar_runs = 0;
    for (int epoch = 0; epoch < 6; ++epoch) {
      for (const CallDecision& decision : RunMeasuredEpoch(cores, bytes, /*late_rank=*/n - 1, 20e-3,
                                                           {.exposed_extra_s = exposed_extra_s})) {
        stragglar_runs += decision.algorithm == Algorithm::kStragglar;
      }
    }
    EXPECT_GT(stragglar_runs, 64);
    EXPECT_GE(cores[0].calibration().Samples(Algorithm::kStragglar, bytes,
                                             CalibrationRegime::kPhaseHidden),
              Calibration::kOwnSamples);
  }
}

// The machine changes under a persistent straggler (a link slows): every algorithm now takes
// longer than modelled, StragglAR 8x, Halving-Doubling 8x, Ring only 2x, so Ring is now the
// fastest. The policy goes from StragglAR straight to Ring within 3 epochs of the change and
// stays there: the epoch that measures the shift prices the others with it, and the next measures
// them again. Without that, the algorithms not running kept their old factors and looked cheap,
// and the policy tried them one by one: here Halving-Doubling for an epoch before Ring; on the
// emulated cluster Halving-Doubling, Ring, the library's own, Ring, StragglAR (docs/policy.md).
TEST(RuntimeCoreTest, AChangeOfTheMachineIsFollowedWithoutCycling) {
  RuntimeConfig config;
  config.epoch_calls = 32;
  const int n = 4;
  const int64_t bytes = 16 << 20;
  std::vector<RuntimeCore> cores = Cores(n, config);
  const auto ran = [](const std::vector<CallDecision>& decisions) {
    std::set<Algorithm> algorithms;
    for (const CallDecision& decision : decisions) {
      if (!decision.explored) algorithms.insert(decision.algorithm);
    }
    return algorithms;
  };
  std::set<Algorithm> before;
  for (int epoch = 0; epoch < 8; ++epoch) {
    before = ran(RunMeasuredEpoch(cores, bytes, /*late_rank=*/n - 1, 20e-3, {}));
  }
  ASSERT_EQ(before, std::set<Algorithm>{Algorithm::kStragglar});

  const MeasuredHost changed{.scale = {{Algorithm::kStragglar, 8.0},
                                       {Algorithm::kHalvingDoubling, 8.0},
                                       {Algorithm::kRing, 2.0}}};
  std::vector<std::set<Algorithm>> after;
  std::vector<int> explored;  // per epoch
  for (int epoch = 0; epoch < 12; ++epoch) {
    const std::vector<CallDecision> decisions =
        RunMeasuredEpoch(cores, bytes, /*late_rank=*/n - 1, 20e-3, changed);
    after.push_back(ran(decisions));
    explored.push_back(static_cast<int>(std::count_if(
        decisions.begin(), decisions.end(), [](const CallDecision& d) { return d.explored; })));
  }
  // One switch, straight from StragglAR to Ring, in the third epoch at the latest: the one that
  // measures the change, the one that measures the others again, and the next.
  const std::set<Algorithm> stragglar = {Algorithm::kStragglar}, ring = {Algorithm::kRing};
  const auto on_ring = std::find(after.begin(), after.end(), ring);
  ASSERT_NE(on_ring, after.end()) << "the policy never settled on Ring";
  EXPECT_LE(on_ring - after.begin(), 2);
  for (auto epoch = after.begin(); epoch != after.end(); ++epoch) {
    EXPECT_EQ(*epoch, epoch < on_ring ? stragglar : ring) << "epoch " << epoch - after.begin();
  }
  // Then only the regular exploration slot explores (one call in 64: every other epoch).
  for (size_t epoch = on_ring - after.begin() + 1; epoch < explored.size(); ++epoch) {
    EXPECT_LE(explored[epoch], 1) << "epoch " << epoch;
  }
  // Every candidate was measured in the changed machine; no guess is left.
  const Calibration& calibration = cores[0].calibration();
  EXPECT_FALSE(calibration.Guessed(Algorithm::kRing, bytes));
  EXPECT_FALSE(calibration.Guessed(Algorithm::kHalvingDoubling, bytes));
  EXPECT_NEAR(calibration.Factor(Algorithm::kRing, bytes), 2.0, 1e-9);
  EXPECT_NEAR(calibration.Factor(Algorithm::kHalvingDoubling, bytes), 8.0, 1e-9);
}

// Threads: every rank gets the exact sum, and the same algorithm for every call, while the
// straggler moves from rank 1 to rank 3 halfway through.
TEST(HostRuntimeTest, StragglerThatMovesCostsNoCorrectnessAndNoHang) {
  constexpr int kRanks = 4;
  constexpr int kCalls = 128;
  constexpr int64_t kCount = 1000;
  RuntimeConfig config;
  config.epoch_calls = 16;
  config.detector.window_calls = 32;
  config.detector.min_calls = 16;
  // A model under which StragglAR pays off for millisecond delays on tiny buffers, and no
  // calibration or exploration to overrule it with what these tiny calls really cost: the point
  // is to run StragglAR plans while the straggler moves.
  const LinkModel link{.alpha_s = 1e-6, .bandwidth_bytes_per_s = 1e6};
  config.calibration_calls_per_epoch = 0;
  config.explore_every = 0;
  absl::StatusOr<std::unique_ptr<HostCommunicator>> comm =
      HostCommunicator::Create(kRanks, config, link);
  ASSERT_TRUE(comm.ok());
  std::vector<std::vector<Algorithm>> ran(kRanks, std::vector<Algorithm>(kCalls));
  std::vector<std::vector<std::optional<int>>> stragglers(kRanks,
                                                          std::vector<std::optional<int>>(kCalls));
  std::vector<int> wrong(kRanks, 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      std::vector<int32_t> send(kCount), recv(kCount);
      for (int call = 0; call < kCalls; ++call) {
        for (int64_t i = 0; i < kCount; ++i) send[i] = static_cast<int32_t>(i * (rank + 1) + call);
        const int late = call < kCalls / 2 ? 1 : 3;
        if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(3));
        absl::StatusOr<CallDecision> decision =
            (*comm)->AllReduce(rank,
                               {.send = send.data(),
                                .recv = recv.data(),
                                .count = kCount,
                                .type = DataType::kInt32,
                                .op = ReduceOp::kSum},
                               /*timing=*/nullptr, absl::Seconds(20));
        ASSERT_TRUE(decision.ok()) << decision.status();
        ran[rank][call] = decision->algorithm;
        stragglers[rank][call] = decision->straggler;
        for (int64_t i = 0; i < kCount; ++i) {
          wrong[rank] += recv[i] != static_cast<int32_t>(i * 10 + 4 * call);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(wrong[rank], 0) << rank;
    EXPECT_EQ(ran[rank], ran[0]) << "rank " << rank << " disagrees with rank 0";
    EXPECT_EQ(stragglers[rank], stragglers[0]);
  }
  // The policy reacted to both stragglers.
  EXPECT_NE(std::find(stragglers[0].begin(), stragglers[0].end(), 1), stragglers[0].end());
  EXPECT_NE(std::find(stragglers[0].begin(), stragglers[0].end(), 3), stragglers[0].end());
}

TEST(HostRuntimeTest, MeasuredLinkIsPlausible) {
  absl::StatusOr<LinkModel> link = MeasureHostLink(2);
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_GT(link->alpha_s, 0);
  EXPECT_LT(link->alpha_s, 0.1);
  EXPECT_GT(link->bandwidth_bytes_per_s, 1e6);
  EXPECT_GE(link->shared_lanes, 1);
  EXPECT_FALSE(MeasureHostLink(1).ok());
}

// ---------------------------------------------------------------------------------------------
// The state file (STRAGGLAR_STATE_FILE) across a restart; its reader: state_file_test.cc.

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Runs `calls` calls on 4 ranks with rank 2 late by 3 ms; returns rank 0's decisions.
std::vector<CallDecision> RunLate(HostCommunicator& comm, int calls) {
  std::vector<CallDecision> decisions(calls);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      std::vector<int32_t> send(64, rank), recv(64);
      for (int call = 0; call < calls; ++call) {
        if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(3));
        absl::StatusOr<CallDecision> decision = comm.AllReduce(
            rank,
            {.send = send.data(), .recv = recv.data(), .count = 64, .type = DataType::kInt32});
        ASSERT_TRUE(decision.ok()) << decision.status();
        EXPECT_EQ(recv[0], 0 + 1 + 2 + 3);
        if (rank == 0) decisions[call] = *decision;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return decisions;
}

// A restarted job that finds the state file adapts from its first call; one with a corrupt file
// logs one line and starts fresh (Ring until its first exchange).
TEST(StateFileTest, RestartedJobStartsTuned) {
  const std::string path = TempPath("state-restart.json");
  std::remove(path.c_str());
  RuntimeConfig config;
  config.epoch_calls = 16;
  config.detector.window_calls = 32;
  config.detector.min_calls = 16;
  config.calibration_calls_per_epoch = 0;
  config.explore_every = 0;
  config.state_file = path;
  const LinkModel link{.alpha_s = 1e-6, .bandwidth_bytes_per_s = 1e6};
  {
    ::testing::internal::CaptureStderr();
    absl::StatusOr<std::unique_ptr<HostCommunicator>> first =
        HostCommunicator::Create(4, config, link);
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(first.ok());
    EXPECT_THAT(log, HasSubstr("cannot be read"));  // the first run has no file yet: one line
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
    const std::vector<CallDecision> decisions = RunLate(**first, 48);
    EXPECT_EQ(decisions[0].algorithm, Algorithm::kRing);
    EXPECT_EQ(decisions[47].algorithm, Algorithm::kStragglar);
  }  // saved on destruction
  absl::StatusOr<std::unique_ptr<HostCommunicator>> second =
      HostCommunicator::Create(4, config, link);
  ASSERT_TRUE(second.ok());
  std::vector<CallDecision> decisions = RunLate(**second, 4);
  EXPECT_EQ(decisions[0].algorithm, Algorithm::kStragglar);
  EXPECT_EQ(decisions[0].straggler, 2);
  second->reset();

  // A communicator that learned nothing (no exchange) leaves the saved state alone.
  const std::string saved = [&] {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  ASSERT_TRUE(HostCommunicator::Create(4, config, link).ok());
  {
    std::ifstream in(path);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), saved);
  }

  WriteFile(path, "{ truncated");
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::unique_ptr<HostCommunicator>> third =
      HostCommunicator::Create(4, config, link);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(third.ok());
  EXPECT_THAT(log, HasSubstr("is corrupt: not valid JSON; starting fresh"));
  decisions = RunLate(**third, 4);
  EXPECT_EQ(decisions[0].algorithm, Algorithm::kRing);
}

}  // namespace
}  // namespace stragglar
