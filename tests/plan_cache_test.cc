// PlanCache::Simulate's closed form for StragglAR's post-arrival rounds: equal to the full
// simulation up to rounding wherever it applies, and the full simulation, bit for bit, wherever
// it does not.
#include "policy/plan_cache.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/synthesizers.h"
#include "policy/simulator.h"

namespace stragglar {
namespace {

// `got` equals `want` up to rounding: a few ulps of the times involved.
void ExpectClose(const SimulationResult& got, const SimulationResult& want) {
  ASSERT_EQ(got.finish_s.size(), want.finish_s.size());
  for (size_t r = 0; r < want.finish_s.size(); ++r) {
    EXPECT_NEAR(got.finish_s[r], want.finish_s[r], 1e-12 * (1 + std::abs(want.finish_s[r])))
        << "rank " << r;
  }
  EXPECT_NEAR(got.completion_s, want.completion_s, 1e-12 * (1 + want.completion_s));
  EXPECT_NEAR(got.after_last_arrival_s, want.after_last_arrival_s,
              1e-12 * (1 + want.after_last_arrival_s));
}

TEST(PlanCacheTest, StragglarsPostArrivalClosedFormIsTheSimulation) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> lag(0, 2e-3);
  for (const LinkModel& link :
       {LinkModel{}, LinkModel{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9, .shared_lanes = 2}}) {
    for (int n = 3; n <= 16; ++n) {
      PlanCache cache(n);
      for (int pieces : {1, 2}) {
        for (int straggler : {0, n / 2, n - 1}) {
          const Plan& plan = **cache.WithPieces(Algorithm::kStragglar, straggler, pieces);
          for (int trial = 0; trial < 6; ++trial) {
            const double bytes = trial % 2 ? 1 << 22 : 4099;
            std::vector<double> arrival(n);
            for (double& a : arrival) a = lag(random);
            // Late by far more than the pre-arrival rounds (the closed form's case), or not.
            arrival[straggler] = trial < 4 ? 0.5 + lag(random) : lag(random) / 4;
            SCOPED_TRACE(testing::Message() << "n=" << n << " pieces=" << pieces
                                            << " straggler=" << straggler << " trial " << trial);
            const int64_t before = cache.closed_form_calls();
            const SimulationResult got = *cache.Simulate(plan, bytes, link, arrival);
            const SimulationResult want = *SimulatePlan(plan, bytes, link, arrival);
            if (cache.closed_form_calls() > before) {
              ExpectClose(got, want);
            } else {
              EXPECT_EQ(got.finish_s, want.finish_s);  // simulated round by round
              EXPECT_EQ(got.completion_s, want.completion_s);
            }
          }
        }
      }
      // The synthesized schedules are dominated by the straggler's paths: a late straggler is
      // always priced in closed form (4 of the 6 trials of every plan and link).
      EXPECT_EQ(cache.closed_form_calls(), 2 * 3 * 4) << "n=" << n;
    }
  }
}

TEST(PlanCacheTest, AReadyRankStillInThePreArrivalRoundsIsSimulated) {
  // The straggler arrives before rank 0 has finished its pre-arrival rounds: rank 0's lateness
  // can delay the post-arrival rounds, so nothing is assumed.
  constexpr int kRanks = 6;
  PlanCache cache(kRanks);
  const Plan& plan = **cache.WithPieces(Algorithm::kStragglar, kRanks - 1, 1);
  std::vector<double> arrival(kRanks, 0);
  arrival[0] = 0.4;
  arrival[kRanks - 1] = 0.3;
  const LinkModel link;
  const SimulationResult got = *cache.Simulate(plan, 1 << 20, link, arrival);
  EXPECT_EQ(cache.closed_form_calls(), 0);
  EXPECT_EQ(got.finish_s, SimulatePlan(plan, 1 << 20, link, arrival)->finish_s);
}

}  // namespace
}  // namespace stragglar
