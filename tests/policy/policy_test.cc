#include "policy/policy.h"

#include <cmath>
#include <random>

#include "base/statistics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/rank_relabel.h"
#include "kernels/synth/synthesizers.h"
#include "policy/calibration.h"
#include "policy/chooser.h"
#include "policy/detector.h"
#include "policy/hierarchical_rails.h"
#include "policy/model/nccl_models.h"
#include "policy/model/simulator.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

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
  // 40 punctual calls: rank 2's share of the 64-call window falls to 24/64 = 0.375, above
  // exit_ratio, so the verdict stays.
  for (int call = 0; call < 40; ++call) detector.Observe(Lags(8, random, 1e-4));
  EXPECT_EQ(detector.straggler(), 2);
  // Rank 6 becomes the straggler: it takes over as soon as its share reaches enter_ratio (and
  // exceeds rank 2's), without waiting for rank 2 to fall below exit_ratio.
  int switched_at = -1;
  for (int call = 0; call < 256 && switched_at < 0; ++call) {
    detector.Observe(Lags(8, random, 1e-4, 6, 4e-3));
    if (detector.straggler() == 6) switched_at = call;
    if (detector.straggler().has_value()) {
      EXPECT_TRUE(*detector.straggler() == 2 || *detector.straggler() == 6);
    }
  }
  // At most enter_ratio * window lagging calls are needed (fewer if noise already gave rank 6
  // some), and not much fewer: noise alone makes a rank last in ~1/8 of the calls.
  const int needed = static_cast<int>(std::ceil(config.enter_ratio * config.window_calls));
  EXPECT_LE(switched_at, needed - 1);
  EXPECT_GE(switched_at, needed / 2);
}

TEST(DetectorTest, EachVerdictIsTheThresholdOnTheMedianAbsoluteDeviationBitForBit) {
  // The detector counts deviations under the bar instead of selecting their median: the verdict
  // must be the definition's (the median of the others, their MAD by a second selection) on every
  // call, ties and leads at the bar included. Lags on a grid of quarters make those common, and a
  // noise multiplier of 1 / 1.4826 puts many bars exactly on a lead.
  std::mt19937 random(9);
  std::uniform_int_distribution<int> grid(0, 12);
  int lagged = 0, punctual = 0;
  for (int trial = 0; trial < 6000; ++trial) {
    const int n = 2 + trial % 15;
    const DetectorConfig config{
        .min_lag_s = 0.25 * (trial % 3),
        .noise_multiplier = trial % 6 == 5 ? 1 / 1.4826 : 0.5 * (1 + trial % 5)};
    std::vector<double> lag(n);
    for (double& value : lag) value = 0.25 * grid(random);
    const int last = static_cast<int>(std::max_element(lag.begin(), lag.end()) - lag.begin());
    std::vector<double> others;
    for (int r = 0; r < n; ++r) {
      if (r != last) others.push_back(lag[r]);
    }
    const double typical = Median(others);
    for (double& value : others) value = std::abs(value - typical);
    const double spread = 1.4826 * Median(others);
    const bool expected =
        lag[last] - typical > std::max(config.min_lag_s, config.noise_multiplier * spread);
    StragglerDetector detector(n, config);
    detector.Observe(lag);
    ASSERT_EQ(detector.persistence(last) == 1.0, expected) << "trial " << trial;
    (expected ? lagged : punctual) += 1;
  }
  // Both verdicts are common, so neither side of the comparison went untested.
  EXPECT_GT(lagged, 1000);
  EXPECT_GT(punctual, 1000);
}

TEST(ChooserTest, PicksStragglarOnlyWhenTheDelayPaysForIt) {
  const LinkModel paper{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  PlanCache plans(8);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kStragglar});
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

TEST(ChooserTest, PipelinesStragglarWhereBandwidthDominates) {
  const LinkModel paper{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  PlanCache plans(8);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kStragglar});
  // 1 GiB: 8 pieces per rank take 60 rounds of s/56 (16 would take 117 of s/112, whose extra
  // alpha outweighs the 2.6% less bandwidth time).
  EXPECT_EQ(*plans.StragglarPieces(1 << 30, paper), 8);
  // 64 KiB: every extra round costs alpha for little bandwidth.
  EXPECT_EQ(*plans.StragglarPieces(64 << 10, paper), 1);
  absl::StatusOr<PricedPlan> plan = plans.For(Algorithm::kStragglar, 5, 1 << 30, paper);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->num_chunks(), 7 * 8);
  EXPECT_EQ(plan->straggler(), 5);
  EXPECT_EQ(plans.For(Algorithm::kStragglar, 5, 64 << 10, paper)->num_chunks(), 7);
  EXPECT_EQ(plans.For(Algorithm::kRing, std::nullopt, 1 << 30, paper)->num_chunks(), 8);

  // The choice is priced with the pipelined plan: 1.15 s/B after arrival (alpha included) where
  // the paper's L(8) = 9 rounds of s/7 take 1.29 s/B.
  std::vector<double> late(8, 0.0);
  late[5] = 50e-3;
  absl::StatusOr<Choice> choice = chooser.Choose(1 << 30, late, 5, paper);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kStragglar);
  const double after_arrival_s = choice->predicted_s - late[5];
  const double s_over_b = (1 << 30) / paper.bandwidth_bytes_per_s;
  EXPECT_LT(after_arrival_s, 1.16 * s_over_b);
  absl::StatusOr<SimulationResult> unpipelined =
      SimulatePlan(*SynthesizeStragglar(8, 5), 1 << 30, paper, late);
  ASSERT_TRUE(unpipelined.ok());
  EXPECT_GT(unpipelined->after_last_arrival_s, 1.28 * s_over_b);
  // At 1 GiB log-depth StragglAR is priced under 1% faster after arrival than the pipelined flat
  // plan: within kShapeMinGain, so the flat plan stays.
  EXPECT_EQ(choice->shape, StragglarShape{.pieces = 8});
}

TEST(ChooserTest, PicksLogDepthStragglarWhereItIsClearlyFaster) {
  const LinkModel paper{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  PlanCache plans(8);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kStragglar});
  // The shapes offered at 64 KiB: the flat schedule first, then log-depth.
  const std::vector<StragglarShape> shapes = *plans.StragglarShapes(64 << 10, paper);
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0], StragglarShape{.pieces = 1});
  ASSERT_GT(shapes[1].log_depth_blocks, 0);
  // 64 KiB, the straggler very late: the flat schedule's 9 post-arrival rounds are mostly alpha,
  // log-depth's broadcast takes K - 1 + log2 8 of them. The decision says so, and the plan the
  // runtime runs for it is that plan.
  std::vector<double> late(8, 0.0);
  late[5] = 50e-3;
  absl::StatusOr<Choice> choice = chooser.Choose(64 << 10, late, 5, paper);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kStragglar);
  EXPECT_EQ(choice->shape, shapes[1]);
  const PricedPlan plan = *plans.WithShape(Algorithm::kStragglar, 5, *choice->shape);
  EXPECT_EQ(plan.variant(), PlanVariant::kLogDepth);
  EXPECT_EQ(plan.post_arrival_rounds(), LogDepthRoundLowerBound(8, shapes[1].log_depth_blocks));
  // A fixed or forced StragglAR (PlanCache::For) is the flat plan.
  EXPECT_EQ(plans.For(Algorithm::kStragglar, 5, 64 << 10, paper)->variant(), PlanVariant::kFlat);
}

TEST(ChooserTest, AboveTheFlatPlansLimitStragglarIsLogDepth) {
  // 1025 ranks: the flat schedule would have 2 million transfers and lose to log-depth at every
  // size, so it is neither offered nor what a forced StragglAR runs, forced pieces or not.
  const LinkModel paper{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  const int n = PlanCache::kMaxFlatStragglarRanks + 1;
  for (int forced_pieces : {0, 4}) {
    PlanCache plans(n, forced_pieces);
    const std::vector<StragglarShape> shapes = *plans.StragglarShapes(16 << 20, paper);
    ASSERT_EQ(shapes.size(), 1u);
    EXPECT_GT(shapes[0].log_depth_blocks, 0);
    const PricedPlan forced = *plans.For(Algorithm::kStragglar, 7, 16 << 20, paper);
    EXPECT_EQ(forced.variant(), PlanVariant::kLogDepth);
    EXPECT_TRUE(forced == *plans.WithShape(Algorithm::kStragglar, 7, shapes[0]));
    std::vector<double> late(n, 0.0);
    late[7] = 50e-3;
    const Choice choice = *Chooser(plans, {Algorithm::kHalvingDoubling, Algorithm::kStragglar})
                               .Choose(16 << 20, late, 7, paper);
    EXPECT_EQ(choice.algorithm, Algorithm::kStragglar);
    EXPECT_EQ(choice.shape, shapes[0]);
  }
}

TEST(ChooserTest, OnAMachineOfNodesPricesPerLinkClassAndConsidersHierarchicalStragglar) {
  const LinkModel nvlink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  const Topology two_by_four{.nodes = 2, .ranks_per_node = 4};
  PlanCache nodes(8, 0, {.topology = two_by_four, .inter_node_link = kTypicalInterNodeLink});
  const NetworkModel network{
      .topology = two_by_four, .intra_node = nvlink, .inter_node = kTypicalInterNodeLink};
  // 64 MiB: the flat plans send most chunks through the NICs, the hierarchical ones a quarter of
  // the buffer per rail. Ring there is what a library runs on nodes, the hierarchical ring, and
  // hierarchical StragglAR beats it by under 2% (`stragglar sim --topology 2x4 --bytes 64MiB`):
  // too little to leave the default, though it is the StragglAR shape priced.
  const std::vector<StragglarShape> shapes = *nodes.StragglarShapes(64 << 20, nvlink);
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_EQ(shapes[2], StragglarShape{.hierarchical = true});
  Chooser chooser(nodes, {Algorithm::kRing, Algorithm::kStragglar});
  std::vector<double> late(8, 0.0);
  late[6] = 0.2;
  const Choice choice = *chooser.Choose(64 << 20, late, 6, nvlink);
  EXPECT_EQ(choice.algorithm, Algorithm::kRing);
  ASSERT_EQ(choice.priced.size(), 2u);
  EXPECT_EQ(choice.priced[1].shape, shapes[2]);
  EXPECT_LT(choice.priced[1].predicted_s, choice.priced[0].predicted_s);
  EXPECT_EQ(**nodes.Materialized(*nodes.For(Algorithm::kRing, std::nullopt, 64 << 20, nvlink)),
            *SynthesizeHierarchicalRing(2, 4));
  // On 4x4 at 1 MiB it is 1.3x faster after arrival, and chosen.
  const Topology four_by_four{.nodes = 4, .ranks_per_node = 4};
  PlanCache bigger(16, 0, {.topology = four_by_four, .inter_node_link = kTypicalInterNodeLink});
  std::vector<double> late16(16, 0.0);
  late16[6] = 0.2;
  const Choice picked = *Chooser(bigger, {Algorithm::kRing, Algorithm::kStragglar})
                             .Choose(1 << 20, late16, 6, nvlink);
  EXPECT_EQ(picked.algorithm, Algorithm::kStragglar);
  EXPECT_EQ(picked.shape, bigger.StragglarShapes(1 << 20, nvlink)->back());
  EXPECT_TRUE(picked.shape->hierarchical);
  // On 16 nodes of 8 at 64 MiB, log-depth rails in 8 blocks are 6% faster than the flat rails in
  // one piece with the straggler 0.2 s late, but lose more than that with it as late as the flat
  // rails' pre-arrival phase (LogDepthRailsWin): the shape offered has the flat rails.
  const Topology sixteen_by_eight{.nodes = 16, .ranks_per_node = 8};
  PlanCache many(128, 0, {.topology = sixteen_by_eight, .inter_node_link = kTypicalInterNodeLink});
  const StragglarShape rails = many.StragglarShapes(64 << 20, nvlink)->back();
  EXPECT_EQ(rails, StragglarShape{.hierarchical = true});
  const NetworkModel sixteen{
      .topology = sixteen_by_eight, .intra_node = nvlink, .inter_node = kTypicalInterNodeLink};
  const std::vector<double> late128 = OneLateRank(128, 127, 0.2);
  const double flat_rails_s =
      SimulatePlan(*SynthesizeHierarchicalStragglar(16, 8, 127), 64 << 20, sixteen, late128)
          ->after_last_arrival_s;
  const double log_rails_s =
      SimulatePlan(*SynthesizeHierarchicalStragglar(16, 8, 127, 8), 64 << 20, sixteen, late128)
          ->after_last_arrival_s;
  EXPECT_LT(log_rails_s, (1 - kLogDepthRailsMinGain) * flat_rails_s);
  // Around rank 6 the plan is the one around rank 7 with the nodes kept
  // (kernels/plan/rank_relabel.h).
  const PricedPlan priced = *nodes.WithShape(Algorithm::kStragglar, 6, shapes[2]);
  const Plan& plan = **nodes.Materialized(priced);
  EXPECT_EQ(plan,
            RankRelabel::KeepingNodes(2, 4, 6).Apply(*SynthesizeHierarchicalStragglar(2, 4, 7)));
  // Every simulation is per link class: the cache's result is the network simulation's (up to
  // rounding: the ready ranks arrive together, so the post-arrival closed form applies).
  std::vector<double> arrival(8, 0.0);
  arrival[6] = 30e-3;
  const SimulationResult got = *nodes.Simulate(priced, 64 << 20, nvlink, arrival);
  const SimulationResult want = *SimulatePlan(plan, 64 << 20, network, arrival);
  for (int r = 0; r < 8; ++r) EXPECT_NEAR(got.finish_s[r], want.finish_s[r], 1e-15) << r;
  EXPECT_GT(
      want.after_last_arrival_s,
      1.5 *
          SimulatePlan(plan, 64 << 20, nvlink, arrival)->after_last_arrival_s);  // NICs are slower
  // The hierarchical ring is priced in closed form per run of one class: the same result.
  const PricedPlan ring = *nodes.For(Algorithm::kRing, std::nullopt, 64 << 20, nvlink);
  EXPECT_EQ(nodes.Simulate(ring, 64 << 20, nvlink, arrival)->finish_s,
            SimulatePlan(*SynthesizeHierarchicalRing(2, 4), 64 << 20, network, arrival)->finish_s);
  // The same ranks on one node are never offered the hierarchical plan.
  PlanCache flat(8);
  const std::vector<StragglarShape> one_node_shapes = *flat.StragglarShapes(64 << 20, nvlink);
  for (const StragglarShape& shape : one_node_shapes) EXPECT_FALSE(shape.hierarchical);
}

TEST(ChooserTest, SkipsPricingTheFlatShapeExactlyOnlyWhereItCannotChangeTheChoice) {
  // StragglAR's shape is the flat schedule unless another is faster by kShapeMinGain of its time.
  // The chooser prices the flat schedule at least (its straggler's own chains) first and
  // simulates it only when that could matter; of the other shapes, likewise, only those whose
  // least price could make them the fastest. The choice is always the one pricing every shape
  // exactly gives. On nodes hierarchical StragglAR is far faster and neither the flat schedule
  // nor log-depth is simulated; on one node at 1 GiB log-depth is within 1% of it, and it is.
  const LinkModel nvlink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  std::mt19937 random(17);
  int64_t others_skipped = 0;
  for (const auto& [nodes, per_node, bytes] :
       {std::tuple{8, 2, 64 << 10}, std::tuple{2, 4, 64 << 20}, std::tuple{4, 4, 1 << 20},
        std::tuple{1, 8, 1 << 30}}) {
    const Topology topology{.nodes = nodes, .ranks_per_node = per_node};
    const int n = topology.num_ranks();
    PlanCache plans(n, 0, {.topology = topology, .inter_node_link = kTypicalInterNodeLink});
    Chooser chooser(plans, {Algorithm::kRing, Algorithm::kStragglar});
    const std::vector<StragglarShape> shapes = *plans.StragglarShapes(bytes, nvlink);
    ASSERT_EQ(shapes.size(), nodes > 1 ? 3u : 2u);
    for (int trial = 0; trial < 6; ++trial) {
      SCOPED_TRACE(testing::Message() << TopologyName(topology) << " trial " << trial);
      const int straggler = trial % n;
      // The straggler last (so StragglAR is priced around it alone), late or barely.
      std::vector<double> arrival = Lags(n, random, 1e-5);
      arrival[straggler] =
          *std::max_element(arrival.begin(), arrival.end()) + (trial % 2 == 0 ? 0.1 : 2e-6);
      // Every shape priced exactly, and the rule applied to them.
      const double spread = *std::max_element(arrival.begin(), arrival.end()) -
                            *std::min_element(arrival.begin(), arrival.end());
      std::vector<double> after_s;
      for (const StragglarShape& shape : shapes) {
        const PricedPlan plan = *plans.WithShape(Algorithm::kStragglar, straggler, shape);
        after_s.push_back(plans.Simulate(plan, bytes, nvlink, arrival)->after_last_arrival_s);
      }
      const size_t fastest_other =
          std::min_element(after_s.begin() + 1, after_s.end()) - after_s.begin();
      const bool other_wins = after_s[fastest_other] < (1 - Chooser::kShapeMinGain) * after_s[0];
      const size_t want = other_wins ? fastest_other : 0;
      const int64_t before = plans.simulate_calls();
      const Choice choice = *chooser.Choose(bytes, arrival, straggler, nvlink);
      ASSERT_EQ(choice.priced.size(), 2u);
      EXPECT_EQ(choice.priced[1].shape, shapes[want]);
      EXPECT_NEAR(choice.priced[1].predicted_s, spread + after_s[want], 1e-12);
      // Simulated: Ring; the other shapes in order of their least price, until one's least is over
      // the fastest exact price so far (it cannot be the fastest, nor tie it); and on one node the
      // flat schedule, which may stay there. On nodes the fastest other rules it out at its least.
      std::vector<std::pair<double, size_t>> by_least;
      for (size_t s = 1; s < shapes.size(); ++s) {
        const PricedPlan plan = *plans.WithShape(Algorithm::kStragglar, straggler, shapes[s]);
        by_least.emplace_back(spread + *plans.AfterLastArrivalAtLeast(plan, bytes, nvlink, arrival),
                              s);
      }
      std::stable_sort(by_least.begin(), by_least.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      int64_t others_simulated = 0;
      double fastest_s = std::numeric_limits<double>::infinity();
      for (const auto& [least_s, s] : by_least) {
        if (others_simulated > 0 && least_s > fastest_s) break;
        ++others_simulated;
        fastest_s = std::min(fastest_s, spread + after_s[s]);
      }
      others_skipped += static_cast<int64_t>(shapes.size()) - 1 - others_simulated;
      EXPECT_EQ(plans.simulate_calls() - before, 1 + others_simulated + (nodes > 1 ? 0 : 1));
    }
  }
  EXPECT_GT(others_skipped, 0);
}

TEST(ChooserTest, NcclAsTheDefaultIsPricedAsNcclRunsOnNodes) {
  // 8x8 at 64 MiB, rank 6 late (`stragglar sim --topology 8x8 --bytes 64MiB`): hierarchical
  // StragglAR takes 0.59 ms after arrival, the hierarchical ring plan 0.72 ms, NCCL's tree 0.44 ms.
  // Where native is priced as our Ring plan StragglAR is picked; where native is NCCL's own
  // AllReduce it is priced as NCCL's faster closed form, and StragglAR, slower than that, is not.
  // Our Ring plan is priced as itself either way.
  const LinkModel nvlink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  const Topology eight_by_eight{.nodes = 8, .ranks_per_node = 8};
  const NetworkModel network{
      .topology = eight_by_eight, .intra_node = nvlink, .inter_node = kTypicalInterNodeLink};
  std::vector<double> late(64, 0.0);
  late[6] = 0.2;
  for (bool native_is_nccl : {false, true}) {
    PlanCache plans(64, 0,
                    {.topology = eight_by_eight,
                     .inter_node_link = kTypicalInterNodeLink,
                     .native_is_nccl = native_is_nccl});
    const Choice choice = *Chooser(plans, {Algorithm::kNative, Algorithm::kStragglar})
                               .Choose(64 << 20, late, 6, nvlink);
    EXPECT_EQ(choice.algorithm, native_is_nccl ? Algorithm::kNative : Algorithm::kStragglar);
    const PricedPlan ring = *plans.For(Algorithm::kRing, std::nullopt, 64 << 20, nvlink);
    const PricedPlan native = *plans.For(Algorithm::kNative, std::nullopt, 64 << 20, nvlink);
    const std::vector<double> ring_finish =
        SimulatePlan(**plans.Materialized(ring), 64 << 20, network, late)->finish_s;
    EXPECT_EQ(plans.Simulate(ring, 64 << 20, nvlink, late)->finish_s, ring_finish);
    const SimulationResult priced = *plans.Simulate(native, 64 << 20, nvlink, late);
    if (!native_is_nccl) {
      EXPECT_TRUE(native == ring);
      continue;
    }
    // Bulk-synchronous: everyone finishes NCCL's time after the last arrival.
    const double tree = NcclAllReduceCost(NcclModel::kTree, network, 64 << 20).seconds();
    ASSERT_LT(tree, NcclAllReduceCost(NcclModel::kRing, network, 64 << 20).seconds());
    EXPECT_EQ(priced.after_last_arrival_s, tree);
    EXPECT_EQ(priced.completion_s, 0.2 + tree);
    for (double finish_s : priced.finish_s) EXPECT_EQ(finish_s, 0.2 + tree);
    EXPECT_FALSE(plans.Simulate(native, 64 << 20, nvlink, std::vector<double>(63, 0.0)).ok());
  }
  // On one node the flag changes nothing: native is priced as the flat Ring plan.
  PlanCache flat(8, 0, {.topology = Topology::Flat(8), .native_is_nccl = true});
  const PricedPlan native = *flat.For(Algorithm::kNative, std::nullopt, 1 << 20, nvlink);
  EXPECT_TRUE(native == *flat.For(Algorithm::kRing, std::nullopt, 1 << 20, nvlink));
  const std::vector<double> together(8, 0.0);
  EXPECT_EQ(flat.Simulate(native, 1 << 20, nvlink, together)->finish_s,
            SimulatePlan(*SynthesizeRing(8), 1 << 20, nvlink, together)->finish_s);
}

TEST(PolicyTest, RejectsATopologyThatIsNotTheCommunicators) {
  RuntimeConfig config;
  config.topology = Topology{.nodes = 2, .ranks_per_node = 4};
  const LinkModel link{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 1e9};
  EXPECT_THAT(Policy::Create(config, 6, link).status().message(),
              HasSubstr("topology 2x4 has 8 ranks, the communicator 6"));
  EXPECT_TRUE(Policy::Create(config, 8, link).ok());
  config.inter_node_link.bandwidth_bytes_per_s = 0;
  EXPECT_THAT(Policy::Create(config, 8, link).status().message(), HasSubstr("inter-node link"));
}

TEST(PolicyTest, RejectsASlowLinkItCannotPrice) {
  RuntimeConfig config;
  LinkModel link{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 1e9, .slow_rank = 3, .slow_factor = 5};
  EXPECT_TRUE(Policy::Create(config, 8, link).ok());
  EXPECT_THAT(Policy::Create(config, 3, link).status().message(),
              HasSubstr("the slow link's rank 3 is not one of the 3 ranks"));
  link.slow_factor = 0.5;
  EXPECT_THAT(Policy::Create(config, 8, link).status().message(),
              HasSubstr("a finite factor >= 1"));
  link.slow_factor = 5;
  config.topology = Topology{.nodes = 2, .ranks_per_node = 4};
  EXPECT_THAT(Policy::Create(config, 8, link).status().message(),
              HasSubstr("a slow link is priced where every link is of one class"));
}

// A link measured again (a slow one found): priced from the next decision, on nodes of one rank
// between the nodes too; refused, changing nothing, where it cannot be priced.
TEST(PolicyTest, SetLinkPricesTheLinkMeasuredAgain) {
  RuntimeConfig config;
  config.topology = Topology{.nodes = 8, .ranks_per_node = 1};
  const LinkModel even{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 1e9};
  Policy policy = *Policy::Create(config, 8, even);
  ASSERT_TRUE(policy.Absorb(0, {}, {}).ok());  // an epoch, empty: the policy adapts from now on
  EXPECT_NE(policy.Preview(0, 16 << 20)->algorithm, Algorithm::kStragglar);
  LinkModel slow{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 1e9, .slow_rank = 2, .slow_factor = 5};
  ASSERT_TRUE(policy.SetLink(slow).ok());
  EXPECT_EQ(policy.plans().machine().inter_node_link.slow_rank, 2);
  absl::StatusOr<CallDecision> around = policy.Preview(0, 16 << 20);
  EXPECT_EQ(around->algorithm, Algorithm::kStragglar);
  EXPECT_EQ(around->straggler, 2);
  slow.slow_rank = 8;
  EXPECT_THAT(policy.SetLink(slow).message(), HasSubstr("is not one of the 8 ranks"));
  EXPECT_EQ(policy.link().slow_rank, 2);
  config.topology = Topology{.nodes = 2, .ranks_per_node = 4};
  EXPECT_THAT(Policy::Create(config, 8, even)->SetLink(even).message(), HasSubstr("not on 2x4"));
}

TEST(ChooserTest, RanksSharingTwoCoresKeepTheUnpipelinedSchedule) {
  // The MPI preload's model of 4 processes on 2 cores: every transfer of a crowded round shares
  // the cores, so pipelining (every port busy in every round) gains nothing and pays alpha.
  const LinkModel cores{.alpha_s = 7e-6, .bandwidth_bytes_per_s = 5.7e9, .shared_lanes = 2};
  PlanCache plans(4);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kStragglar});
  EXPECT_EQ(*plans.StragglarPieces(16 << 20, cores), 1);
  LinkModel switched = cores;
  switched.shared_lanes = 0;
  EXPECT_GT(*plans.StragglarPieces(16 << 20, switched), 1);
}

TEST(ChooserTest, ForcedPiecesAreCappedToThePlanSizeLimit) {
  const LinkModel paper{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  PlanCache four(4, /*forced_pieces=*/8);
  EXPECT_EQ(*four.StragglarPieces(1 << 10, paper), 8);
  EXPECT_EQ(four.For(Algorithm::kStragglar, 0, 1 << 10, paper)->num_chunks(), 24);
  PlanCache many(33, /*forced_pieces=*/16);
  EXPECT_EQ(*many.StragglarPieces(1 << 30, paper), 4);  // 32 x 4 = 128 pieces
  PlanCache huge(200, /*forced_pieces=*/2);
  EXPECT_EQ(*huge.StragglarPieces(1 << 30, paper), 1);
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
  PlanCache cautious_plans(8);
  Chooser cautious(cautious_plans, {Algorithm::kRing, Algorithm::kHalvingDoubling});
  absl::StatusOr<Choice> choice = cautious.Choose(16 << 20, punctual, std::nullopt, slow);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kRing);
  EXPECT_DOUBLE_EQ(choice->predicted_s, choice->baseline_predicted_s);
  PlanCache eager_plans(8);
  Chooser eager(eager_plans, {Algorithm::kRing, Algorithm::kHalvingDoubling}, /*min_gain=*/0);
  choice = eager.Choose(16 << 20, punctual, std::nullopt, slow);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kHalvingDoubling);
}

TEST(ChooserTest, TiesKeepTheEarlierCandidate) {
  // Two ranks, zero alpha: ring and halving-doubling cost the same; ring is listed first.
  PlanCache plans(2);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kHalvingDoubling});
  absl::StatusOr<Choice> choice =
      chooser.Choose(1e6, {0.0, 0.0}, std::nullopt, {.alpha_s = 0, .bandwidth_bytes_per_s = 1e9});
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kRing);
}

TEST(ChooserTest, CalibratedSmallGainsSwitchAndMeasuredCostsOverrideTheModel) {
  // 16 MiB with alpha 20 us: halving-doubling's 8 fewer rounds are predicted ~4% faster than
  // ring, between the calibrated (1%) and the cautious (5%) bar.
  const LinkModel slow{.alpha_s = 20e-6, .bandwidth_bytes_per_s = 8e9};
  const std::vector<double> punctual(8, 0.0);
  const int64_t bytes = 16 << 20;
  PlanCache plans(8);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kHalvingDoubling});
  Calibration calibration;
  // Only ring measured: still the cautious 5% bar, ring stays.
  for (int i = 0; i < 4; ++i) calibration.Add(Algorithm::kRing, bytes, 1e-3, 1e-3);
  absl::StatusOr<Choice> choice = chooser.Choose(bytes, punctual, std::nullopt, slow, &calibration);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kRing);
  // Both measured as the model says: the 1% bar applies and halving-doubling wins.
  for (int i = 0; i < 4; ++i) calibration.Add(Algorithm::kHalvingDoubling, bytes, 1e-3, 1e-3);
  choice = chooser.Choose(bytes, punctual, std::nullopt, slow, &calibration);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kHalvingDoubling);
  // Halving-doubling measured 20% slower than modelled on this size: ring again.
  for (int i = 0; i < Calibration::kSamplesKept; ++i) {
    calibration.Add(Algorithm::kHalvingDoubling, bytes, 1e-3, 1.2e-3);
  }
  choice = chooser.Choose(bytes, punctual, std::nullopt, slow, &calibration);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kRing);
}

// Two ranks late, the detector named the less late one: StragglAR around the rank predicted last
// pays more, and the chooser finds it.
TEST(ChooserTest, TriesStragglarAroundThePredictedLastRankToo) {
  const LinkModel paper{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  PlanCache plans(8);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kStragglar});
  std::vector<double> arrival(8, 0.0);
  arrival[2] = 1e-3;
  arrival[6] = 4e-3;
  absl::StatusOr<Choice> choice = chooser.Choose(1 << 30, arrival, /*straggler=*/2, paper);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kStragglar);
  EXPECT_EQ(choice->straggler, 6);
}

// A slow link (LinkModel::slow_rank), nobody late: StragglAR around the rank behind it moves the
// least over that link, and the chooser takes it; with the links alike it keeps a baseline.
TEST(ChooserTest, PicksStragglarAroundTheSlowLinksRank) {
  const LinkModel paper{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  LinkModel slow = paper;
  slow.slow_rank = 2;
  slow.slow_factor = 5;
  PlanCache plans(8);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kStragglar});
  const std::vector<double> punctual(8, 0.0);
  absl::StatusOr<Choice> choice = chooser.Choose(16 << 20, punctual, std::nullopt, slow);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->algorithm, Algorithm::kStragglar);
  EXPECT_EQ(choice->straggler, 2);
  EXPECT_LT(choice->predicted_s, choice->baseline_predicted_s);
  choice = chooser.Choose(16 << 20, punctual, std::nullopt, paper);
  ASSERT_TRUE(choice.ok());
  EXPECT_NE(choice->algorithm, Algorithm::kStragglar);
  // A late rank elsewhere and the slow link: both are StragglAR's candidates, priced on the link.
  std::vector<double> late(8, 0.0);
  late[6] = 2e-3;
  choice = chooser.Choose(16 << 20, late, 6, slow);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->algorithm, Algorithm::kStragglar);
  ASSERT_TRUE(choice->straggler.has_value());
  const double ring_s = SimulatePlan(*SynthesizeRing(8), 16 << 20, slow, late)->completion_s;
  const double around_s =
      SimulatePlan(*SynthesizeStragglar(8, *choice->straggler, choice->shape->pieces), 16 << 20,
                   slow, late)
          ->completion_s;
  EXPECT_LT(around_s, ring_s);
}

// The plan cache prices StragglAR around any rank through the plan around the last, renamed; with
// a slow link the slow rank is renamed alike, so the price is the renamed plan's own.
TEST(PlanCacheTest, ASlowLinkIsPricedThroughTheRenamedPlan) {
  LinkModel slow{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  slow.slow_factor = 4;
  PlanCache plans(6);
  std::mt19937 random(5);
  for (int straggler : {0, 2, 5}) {
    for (int slow_rank : {0, 2, 4, 5}) {
      slow.slow_rank = slow_rank;
      const std::vector<double> arrival = Lags(6, random, 1e-4, straggler, 1e-3);
      absl::StatusOr<PricedPlan> plan = plans.For(Algorithm::kStragglar, straggler, 4 << 20, slow);
      ASSERT_TRUE(plan.ok()) << plan.status();
      const SimulationResult cached = *plans.Simulate(*plan, 4 << 20, slow, arrival);
      const SimulationResult direct = *SimulatePlan(
          *SynthesizeStragglar(6, straggler, plan->num_chunks() / 5), 4 << 20, slow, arrival);
      for (int r = 0; r < 6; ++r) {
        EXPECT_NEAR(cached.finish_s[r], direct.finish_s[r], 1e-9 * direct.finish_s[r])
            << straggler << " " << slow_rank << " " << r;
      }
    }
  }
}

// StragglAR's pre-arrival phase is hidden when its straggler comes last by at least the phase's
// model time (the closed form for 4 ranks: a ReduceScatter among the 3 ready ones).
TEST(ChooserTest, RegimeFollowsTheStragglersLeadOverThePhase) {
  const LinkModel link{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  const double bytes = 16 << 20;
  const Plan stragglar = *SynthesizeStragglar(4, /*straggler=*/3, /*pieces=*/1);
  const double phase_s = StragglarReduceScatterSeconds(4, bytes, link);
  ASSERT_GT(phase_s, 0);
  auto regime = [&](const Plan& plan, std::vector<double> arrival_s) {
    absl::StatusOr<CalibrationRegime> result = Chooser::RegimeOf(plan, bytes, link, arrival_s);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.value_or(CalibrationRegime::kPhaseExposed);
  };
  constexpr CalibrationRegime kExposed = CalibrationRegime::kPhaseExposed;
  constexpr CalibrationRegime kHidden = CalibrationRegime::kPhaseHidden;
  EXPECT_EQ(regime(stragglar, {0, 0, 0, 0}), kExposed);
  EXPECT_EQ(regime(stragglar, {0, 1e-6, 0, 1e-6 + 1.01 * phase_s}), kHidden);
  EXPECT_EQ(regime(stragglar, {0, 0, 0, 0.99 * phase_s}), kExposed);
  EXPECT_EQ(regime(stragglar, {0, 0, 0, 20e-3}), kHidden);
  // The lead counts from the latest other rank, and another rank last means nothing hides.
  EXPECT_EQ(regime(stragglar, {0, 5e-3, 0, 5e-3 + 0.5 * phase_s}), kExposed);
  EXPECT_EQ(regime(stragglar, {0, 0, 30e-3, 20e-3}), kExposed);
  // Plans without a pre-arrival phase have one regime.
  EXPECT_EQ(regime(*SynthesizeRing(4), {0, 0, 0, 20e-3}), kExposed);
  EXPECT_EQ(regime(*SynthesizeHalvingDoubling(4), {0, 0, 0, 20e-3}), kExposed);
  // Bad input is the simulator's error.
  EXPECT_EQ(Chooser::RegimeOf(stragglar, -1, link, {0, 0, 0, 20e-3}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// StragglAR measured slow with nobody late (its pre-arrival phase on the critical path, 3x the
// model) must not keep it from a persistent straggler whose delay hides that phase: the chooser
// prices each regime with its own factor.
TEST(ChooserTest, PersistentStragglerIsPricedWithTheHiddenPhasesFactor) {
  const LinkModel link{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
  const int64_t bytes = 16 << 20;
  PlanCache plans(4);
  Chooser chooser(plans, {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kStragglar});
  Calibration calibration;
  for (int i = 0; i < 4; ++i) {
    calibration.Add(Algorithm::kRing, bytes, 1e-3, 1e-3);
    calibration.Add(Algorithm::kHalvingDoubling, bytes, 1e-3, 1e-3);
    calibration.Add(Algorithm::kStragglar, bytes, 1e-3, 3e-3, CalibrationRegime::kPhaseExposed);
  }
  const std::vector<double> late = {0, 0, 0, 20e-3};
  absl::StatusOr<Choice> choice = chooser.Choose(bytes, late, 3, link, &calibration);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->algorithm, Algorithm::kStragglar);
  EXPECT_EQ(choice->straggler, 3);
  // Nobody late: the exposed regime's factor applies, and StragglAR loses.
  choice = chooser.Choose(bytes, {0, 0, 0, 1e-6}, 3, link, &calibration);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_NE(choice->algorithm, Algorithm::kStragglar);
  // Measured just as slow with the phase hidden: now the late case loses too.
  for (int i = 0; i < 4; ++i) {
    calibration.Add(Algorithm::kStragglar, bytes, 1e-3, 3e-3, CalibrationRegime::kPhaseHidden);
  }
  choice = chooser.Choose(bytes, late, 3, link, &calibration);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_NE(choice->algorithm, Algorithm::kStragglar);
}

}  // namespace
}  // namespace stragglar
