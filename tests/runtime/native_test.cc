// The library's own AllReduce (Algorithm::kNative) as one candidate among our plans: priced as
// Ring's plan (or NCCL's closed forms on nodes), calibrated apart from our plans, and left for the
// fastest plan the policy measures, or kept where it is the fastest.
#include <algorithm>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"
#include "policy/calibration.h"
#include "policy/model/simulator.h"
#include "policy/plan_cache.h"
#include "runtime/runtime_core.h"

namespace stragglar {
namespace {

// OneLateRank's arrivals: every rank at 0 but `late` at `delay_s`.
std::vector<double> OneLate(int n, int late, double delay_s) {
  std::vector<double> arrival(n, 0.0);
  arrival[late] = delay_s;
  return arrival;
}

TEST(NativeTest, IsCalibratedApartFromThePlans) {
  const int64_t bytes = 4 << 20;
  Calibration calibration;
  // OpenMPI's TCP Allreduce at 1.7x the model: that says nothing about our plans.
  for (int i = 0; i < 8; ++i) calibration.Add(Algorithm::kNative, bytes, 1e-3, 1.7e-3);
  EXPECT_DOUBLE_EQ(calibration.Factor(Algorithm::kNative, bytes), 1.7);
  EXPECT_EQ(calibration.Factor(Algorithm::kRing, bytes), 1);
  EXPECT_EQ(calibration.Factor(Algorithm::kStragglar, bytes, CalibrationRegime::kPhaseHidden), 1);
  // Nor do our plans' ratios say anything about native once it has samples of its own, even few.
  Calibration few;
  few.Add(Algorithm::kNative, bytes, 1e-3, 1.6e-3);
  few.Add(Algorithm::kNative, bytes, 1e-3, 1.6e-3);
  for (int i = 0; i < 8; ++i) few.Add(Algorithm::kRing, bytes, 1e-3, 0.8e-3);
  EXPECT_DOUBLE_EQ(few.Factor(Algorithm::kNative, bytes), 1.6);
  EXPECT_DOUBLE_EQ(few.Factor(Algorithm::kHalvingDoubling, bytes), 0.8);
  // With none of its own, native is priced like an unmeasured plan.
  EXPECT_DOUBLE_EQ(few.Factor(Algorithm::kNative, bytes << 4), 1);
  Calibration plans_only;
  for (int i = 0; i < 8; ++i) plans_only.Add(Algorithm::kRing, bytes, 1e-3, 0.8e-3);
  EXPECT_DOUBLE_EQ(plans_only.Factor(Algorithm::kNative, bytes), 0.8);
  // Its calibration survives the state file under its own name.
  const nlohmann::json json = calibration.ToJson();
  ASSERT_TRUE(json.contains("native"));
  Calibration restored;
  ASSERT_TRUE(restored.FromJson(json).ok());
  EXPECT_DOUBLE_EQ(restored.Factor(Algorithm::kNative, bytes), 1.7);
}

TEST(NativeTest, OnNodesIsPricedAsTheHierarchicalRingOrAsNcclsClosedForm) {
  // On nodes Ring is the hierarchical ring, priced by its index and kept without its transfers
  // until an executor asks; native is priced as that plan, or, where the library is NCCL, as a
  // header of its own that NCCL's closed form prices.
  const Topology two_by_four{.nodes = 2, .ranks_per_node = 4};
  const std::vector<double> late = OneLate(8, 7, 1e-3);
  const NetworkModel network{
      .topology = two_by_four, .intra_node = LinkModel{}, .inter_node = kTypicalInterNodeLink};
  const SimulationResult want =
      *SimulatePlan(*SynthesizeHierarchicalRing(2, 4), 1 << 20, network, late);
  PlanCache rounds(8, 0, {.topology = two_by_four});
  const PricedPlan ring = *rounds.For(Algorithm::kRing, std::nullopt, 1 << 20, LinkModel{});
  EXPECT_FALSE(rounds.KeepsTransfers(ring));
  EXPECT_EQ(*rounds.For(Algorithm::kNative, std::nullopt, 1 << 20, LinkModel{}), ring);
  EXPECT_EQ(rounds.Simulate(ring, 1 << 20, LinkModel{}, late)->finish_s, want.finish_s);
  EXPECT_EQ(**rounds.Materialized(ring), *SynthesizeHierarchicalRing(2, 4));
  EXPECT_TRUE(rounds.KeepsTransfers(ring)) << "its executor's plan is built";
  EXPECT_EQ(rounds.Simulate(ring, 1 << 20, LinkModel{}, late)->finish_s, want.finish_s);

  PlanCache nccl(8, 0, {.topology = two_by_four, .native_is_nccl = true});
  const PricedPlan native = *nccl.For(Algorithm::kNative, std::nullopt, 1 << 20, LinkModel{});
  EXPECT_FALSE(nccl.KeepsTransfers(native));
  EXPECT_EQ(native.algorithm(), Algorithm::kNative);
  const PricedPlan our_ring = *nccl.For(Algorithm::kRing, std::nullopt, 1 << 20, LinkModel{});
  EXPECT_FALSE(native == our_ring);
  EXPECT_EQ(nccl.Simulate(our_ring, 1 << 20, LinkModel{}, late)->finish_s, want.finish_s);
  // Bulk-synchronous: every rank finishes together, unlike the hierarchical ring.
  const SimulationResult nccl_priced = *nccl.Simulate(native, 1 << 20, LinkModel{}, late);
  EXPECT_NE(nccl_priced.finish_s, want.finish_s);
  for (double finish_s : nccl_priced.finish_s) EXPECT_EQ(finish_s, nccl_priced.completion_s);
}

// A job of 4 ranks on TCP-like links (40 us, 24 MB/s) whose calls take the model's time times
// `truth` of what ran after the last arrival: the preload's candidates, native the default.
class NativeInThePolicyTest : public ::testing::Test {
 protected:
  static constexpr int kRanks = 4;
  static constexpr int64_t kBytes = 4 << 20;
  const LinkModel link_{.alpha_s = 40e-6, .bandwidth_bytes_per_s = 24e6};

  void SetUp() override {
    RuntimeConfig config;
    config.epoch_calls = 8;
    config.default_algorithm = Algorithm::kNative;
    config.candidates = {Algorithm::kNative, Algorithm::kRing, Algorithm::kHalvingDoubling,
                         Algorithm::kStragglar};
    for (int rank = 0; rank < kRanks; ++rank) {
      cores_.push_back(*RuntimeCore::Create(config, rank, kRanks, link_));
    }
  }

  // One epoch with `late_rank` late by `delay_s` (none: -1); rank 0's decisions, which every rank
  // must share.
  std::vector<CallDecision> Epoch(const std::map<Algorithm, double>& truth, int late_rank = -1,
                                  double delay_s = 0) {
    std::vector<CallDecision> decisions;
    for (int call = 0; call < cores_[0].config().epoch_calls; ++call) {
      std::vector<CallDecision> by_rank;
      for (RuntimeCore& core : cores_) by_rank.push_back(*core.Decide(kBytes));
      for (const CallDecision& decision : by_rank) {
        EXPECT_EQ(decision.algorithm, by_rank[0].algorithm) << decision.call;
      }
      const CallDecision& ran = by_rank[0];
      std::vector<double> lags(kRanks);
      for (int rank = 0; rank < kRanks; ++rank) {
        lags[rank] = rank == late_rank ? delay_s : 1e-6 * rank;
      }
      const double last_s = *std::max_element(lags.begin(), lags.end());
      const Plan& plan = **cores_[0].PlanFor(ran, kBytes);
      const SimulationResult model = *SimulatePlan(plan, kBytes, link_, lags);
      const double factor = truth.at(ran.algorithm);
      for (int rank = 0; rank < kRanks; ++rank) {
        const double finish_s = last_s + factor * (model.finish_s[rank] - last_s);
        cores_[rank].Record(
            {.arrival_s = 1.0 * ran.call + lags[rank], .duration_s = finish_s - lags[rank]});
      }
      decisions.push_back(ran);
    }
    std::vector<double> all;
    for (const RuntimeCore& core : cores_) {
      const std::vector<double> payload = core.EpochPayload();
      all.insert(all.end(), payload.begin(), payload.end());
    }
    for (RuntimeCore& core : cores_) EXPECT_TRUE(core.AbsorbEpoch(all).ok());
    return decisions;
  }

  // Epochs until every call but the explorations runs `want`, at most `limit`; -1 if never.
  int EpochsUntil(Algorithm want, const std::map<Algorithm, double>& truth, int limit,
                  int late_rank = -1, double delay_s = 0) {
    for (int epoch = 0; epoch < limit; ++epoch) {
      const std::vector<CallDecision> decisions = Epoch(truth, late_rank, delay_s);
      if (std::all_of(decisions.begin(), decisions.end(), [&](const CallDecision& decision) {
            return decision.explored || decision.algorithm == want;
          })) {
        return epoch;
      }
    }
    return -1;
  }

  // Calls of the next `epochs` epochs that ran anything but `want` outside exploration.
  int Strays(Algorithm want, const std::map<Algorithm, double>& truth, int epochs,
             int late_rank = -1, double delay_s = 0) {
    int strays = 0;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      for (const CallDecision& decision : Epoch(truth, late_rank, delay_s)) {
        strays += !decision.explored && decision.algorithm != want;
      }
    }
    return strays;
  }

  std::vector<RuntimeCore> cores_;
};

// What the emulated cluster measured (4x1, 200 Mbit/s, 4 MiB, docs/cluster.md): OpenMPI's
// Allreduce 1.7x the model, Halving-Doubling's streamed exchanges 1.5x, our Ring 1.05x, StragglAR
// the model's.
const std::map<Algorithm, double> kTcpCluster = {{Algorithm::kNative, 1.7},
                                                 {Algorithm::kHalvingDoubling, 1.5},
                                                 {Algorithm::kRing, 1.05},
                                                 {Algorithm::kStragglar, 1.0}};

TEST_F(NativeInThePolicyTest, ASlowLibraryIsLeftForTheFastestPlanMeasured) {
  // Native runs the first epoch; then the plans the model puts fastest are tried, each measured in
  // the epoch it runs: Halving-Doubling (2 alpha fewer than Ring), then Ring. No plan's trouble
  // keeps another from being tried (pooled, Halving-Doubling's 1.5 priced Ring out for good).
  const int converged = EpochsUntil(Algorithm::kRing, kTcpCluster, 6);
  ASSERT_GE(converged, 0) << "never settled on Ring";
  EXPECT_LE(converged, 3);
  EXPECT_EQ(Strays(Algorithm::kRing, kTcpCluster, 16), 0);
  const Calibration& calibration = cores_[0].calibration();
  EXPECT_NEAR(calibration.Factor(Algorithm::kNative, kBytes), 1.7, 1e-9);
  EXPECT_NEAR(calibration.Factor(Algorithm::kRing, kBytes), 1.05, 1e-9);

  // Then the last rank turns late by twice the buffer's time on a link: named once the detector
  // has its calls, and from the next epoch on StragglAR runs around it.
  const double delay_s = 2.0 * kBytes / link_.bandwidth_bytes_per_s;
  const int switched = EpochsUntil(Algorithm::kStragglar, kTcpCluster, 8, kRanks - 1, delay_s);
  ASSERT_GE(switched, 0) << "StragglAR never took over";
  EXPECT_LE(switched, 5);
  EXPECT_EQ(cores_[0].detector().straggler(), kRanks - 1);
  EXPECT_EQ(Strays(Algorithm::kStragglar, kTcpCluster, 16, kRanks - 1, delay_s), 0);
}

TEST_F(NativeInThePolicyTest, AFastLibraryKeepsItsCalls) {
  // A library faster than every plan of ours (NCCL on one node): at most one epoch of trying
  // plans, then native for good.
  const std::map<Algorithm, double> fast_library = {{Algorithm::kNative, 0.5},
                                                    {Algorithm::kHalvingDoubling, 1.5},
                                                    {Algorithm::kRing, 1.2},
                                                    {Algorithm::kStragglar, 1.2}};
  const int converged = EpochsUntil(Algorithm::kNative, fast_library, 6);
  ASSERT_GE(converged, 0);
  EXPECT_LE(converged, 1);
  EXPECT_EQ(Strays(Algorithm::kNative, fast_library, 16), 0);
}

}  // namespace
}  // namespace stragglar
