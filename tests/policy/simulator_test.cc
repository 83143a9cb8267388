#include "policy/model/simulator.h"

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/verifier.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

const LinkModel kPaperLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
constexpr double kGiB = 1 << 30;

Plan Synthesize(Algorithm algorithm, int n, int straggler) {
  absl::StatusOr<Plan> plan = SynthesizePlan(
      algorithm, n,
      algorithm == Algorithm::kStragglar ? std::optional<int>(straggler) : std::nullopt);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

double Simulated(const Plan& plan, double bytes, const std::vector<double>& arrival,
                 bool after_last_arrival = false) {
  absl::StatusOr<SimulationResult> result = SimulatePlan(plan, bytes, kPaperLink, arrival);
  EXPECT_TRUE(result.ok()) << result.status();
  return after_last_arrival ? result->after_last_arrival_s : result->completion_s;
}

MATCHER_P(NearlyEquals, expected, "") {
  return std::abs(arg - expected) <= 1e-12 + 1e-9 * expected;
}

TEST(SimulatorTest, ClosedFormsAgreeWithSimulationWhenRanksArriveTogether) {
  for (int n = 2; n <= 64; ++n) {
    const std::vector<double> together(n, 0.0);
    for (double bytes : {0.0, 1e6, 3.0 * kGiB}) {
      EXPECT_THAT(Simulated(Synthesize(Algorithm::kRing, n, 0), bytes, together),
                  NearlyEquals(RingSeconds(n, bytes, kPaperLink)))
          << "ring n=" << n;
      EXPECT_THAT(Simulated(Synthesize(Algorithm::kHalvingDoubling, n, 0), bytes, together),
                  NearlyEquals(HalvingDoublingSeconds(n, bytes, kPaperLink)))
          << "halving-doubling n=" << n;
      // Without a delay StragglAR pays its ReduceScatter and then its post-arrival rounds.
      const Plan stragglar = Synthesize(Algorithm::kStragglar, n, n / 2);
      EXPECT_THAT(Simulated(stragglar, bytes, together),
                  NearlyEquals(StragglarReduceScatterSeconds(n, bytes, kPaperLink) +
                               StragglarPostArrivalSeconds(n, stragglar.post_arrival_rounds(),
                                                           bytes, kPaperLink)))
          << "stragglar n=" << n;
    }
  }
}

TEST(SimulatorTest, DelaysAddToRingAndHideStragglarsReduceScatter) {
  for (int n : {3, 4, 8, 13, 16}) {
    const double bytes = 64e6;
    const int late = 1;
    const double ring_time = RingSeconds(n, bytes, kPaperLink);
    const Plan stragglar = Synthesize(Algorithm::kStragglar, n, late);
    const double reduce_scatter = StragglarReduceScatterSeconds(n, bytes, kPaperLink);
    const double post =
        StragglarPostArrivalSeconds(n, stragglar.post_arrival_rounds(), bytes, kPaperLink);
    for (double delay : {0.0, reduce_scatter / 2, reduce_scatter, 2 * reduce_scatter}) {
      const std::vector<double> arrival = OneLateRank(n, late, delay);
      EXPECT_THAT(Simulated(Synthesize(Algorithm::kRing, n, 0), bytes, arrival),
                  NearlyEquals(delay + ring_time));
      EXPECT_THAT(Simulated(stragglar, bytes, arrival),
                  NearlyEquals(std::max(delay, reduce_scatter) + post));
      EXPECT_THAT(Simulated(stragglar, bytes, arrival, /*after_last_arrival=*/true),
                  NearlyEquals(std::max(delay, reduce_scatter) + post - delay));
    }
  }
}

// The authors' table: Ring / StragglAR after the straggler arrives, alpha = 3 us, 450 GiB/s, 1 GiB.
TEST(SimulatorTest, ReproducesThePapersRingOverStragglarTable) {
  const std::vector<std::pair<int, double>> table = {
      {4, 1.127}, {8, 1.363}, {16, 1.565}, {32, 1.718}, {64, 1.826}, {128, 1.897}, {256, 1.941}};
  for (const auto& [n, expected] : table) {
    const double delay = 1.0;  // long enough to hide the ReduceScatter
    const std::vector<double> arrival = OneLateRank(n, n - 1, delay);
    const double ring = Simulated(Synthesize(Algorithm::kRing, n, 0), kGiB, arrival, true);
    const double stragglar =
        Simulated(Synthesize(Algorithm::kStragglar, n, n - 1), kGiB, arrival, true);
    EXPECT_NEAR(ring / stragglar, expected, expected * 0.005) << "n=" << n;
  }
}

TEST(SimulatorTest, BreakEvenDelayMatchesTheClosedForm) {
  for (int n : {4, 8, 16}) {
    for (double bytes : {1e6, 1.0 * kGiB}) {
      const Plan stragglar = Synthesize(Algorithm::kStragglar, n, n - 1);
      const Plan ring = Synthesize(Algorithm::kRing, n, 0);
      absl::StatusOr<double> break_even = BreakEvenDelay(stragglar, ring, bytes, kPaperLink);
      ASSERT_TRUE(break_even.ok());
      const double expected = std::max(
          0.0,
          StragglarReduceScatterSeconds(n, bytes, kPaperLink) +
              StragglarPostArrivalSeconds(n, stragglar.post_arrival_rounds(), bytes, kPaperLink) -
              RingSeconds(n, bytes, kPaperLink));
      EXPECT_NEAR(*break_even, expected, 2e-9) << "n=" << n << " bytes=" << bytes;
      // Just above it StragglAR wins; just below it loses.
      EXPECT_LT(Simulated(stragglar, bytes, OneLateRank(n, n - 1, *break_even + 1e-8)),
                Simulated(ring, bytes, OneLateRank(n, n - 1, *break_even + 1e-8)));
      if (expected > 1e-8) {
        EXPECT_GT(Simulated(stragglar, bytes, OneLateRank(n, n - 1, *break_even - 1e-8)),
                  Simulated(ring, bytes, OneLateRank(n, n - 1, *break_even - 1e-8)));
      }
    }
  }
}

TEST(SimulatorTest, PipeliningBringsStragglarTowardsTheSOverBBound) {
  // n = 4: the paper's schedule takes 4 rounds of s/3 after the straggler arrives (4/3 s/B);
  // 8 pieces per rank take 3*8 + 1 = 25 rounds of s/24 (25/24 s/B), every port busy throughout.
  const LinkModel link{.alpha_s = 0, .bandwidth_bytes_per_s = 1e9};
  const double bytes = 24e6;
  const std::vector<double> arrival = OneLateRank(4, 2, 1.0);
  absl::StatusOr<SimulationResult> plain =
      SimulatePlan(*SynthesizeStragglar(4, 2), bytes, link, arrival);
  absl::StatusOr<SimulationResult> pipelined =
      SimulatePlan(*SynthesizeStragglar(4, 2, 8), bytes, link, arrival);
  ASSERT_TRUE(plain.ok() && pipelined.ok());
  EXPECT_NEAR(plain->after_last_arrival_s, 4.0 / 3 * bytes / 1e9, 1e-12);
  EXPECT_NEAR(pipelined->after_last_arrival_s, 25.0 / 24 * bytes / 1e9, 1e-12);
  // The ReduceScatter before arrival moves the same bytes either way.
  EXPECT_NEAR(pipelined->completion_s, 1.0 + pipelined->after_last_arrival_s, 1e-12);
}

// `plan` with its chunk c cut into units[c] chunks: blocks of unequal sizes, the same schedule.
Plan WithChunksCutInto(const Plan& plan, const std::vector<int>& units) {
  std::vector<int> first(units.size() + 1, 0);
  std::partial_sum(units.begin(), units.end(), first.begin() + 1);
  Plan cut = plan;
  cut.num_chunks = first.back();
  for (Round& round : cut.rounds) {
    for (Transfer& transfer : round.transfers) {
      ChunkList chunks;
      for (const ChunkList::Run& run : transfer.chunks.runs()) {
        chunks.AppendRange(first[run.begin], first[run.end]);
      }
      transfer.chunks = std::move(chunks);
    }
  }
  return cut;
}

TEST(SimulatorTest, LogDepthBlocksOfUnequalSizesAreNeverFaster) {
  // docs/scale-model.md leaves open whether blocks of unequal sizes could beat Theorem 2's bound
  // for equal ones. For log-depth StragglAR's own schedule they do not: at 64 MiB, with the block
  // count the policy picks, no random resizing of its blocks, however lopsided, finishes sooner
  // after arrival, and at n = 64 the equal blocks meet the bound exactly.
  std::mt19937 random(3);
  for (int n : {64, 100}) {
    constexpr int kBlocks = 16, kUnits = 64;
    const double bytes = 64.0 * (1 << 20);
    const Plan plan = *SynthesizeLogDepthStragglar(n, n - 1, kBlocks);
    const int chunks_per_block = plan.num_chunks / kBlocks;
    const std::vector<double> arrival = OneLateRank(n, n - 1, 1.0);
    const auto after_arrival = [&](const std::vector<int>& block_units) {
      std::vector<int> units(plan.num_chunks);
      for (int c = 0; c < plan.num_chunks; ++c) units[c] = block_units[c / chunks_per_block];
      return Simulated(WithChunksCutInto(plan, units), bytes, arrival, /*after_last_arrival=*/true);
    };
    const std::vector<int> equal(kBlocks, kUnits);
    const double equal_s = after_arrival(equal);
    if (n == 64) {
      const double bound = (kBlocks - 1 + 6) * (kPaperLink.alpha_s +
                                                bytes / kBlocks / kPaperLink.bandwidth_bytes_per_s);
      EXPECT_THAT(equal_s, NearlyEquals(bound));
    }
    // Sizes matter: one block holding nearly everything is a pipeline of one, far slower.
    std::vector<int> lopsided(kBlocks, 1);
    lopsided[0] = kBlocks * kUnits - (kBlocks - 1);
    EXPECT_GT(after_arrival(lopsided), 2 * equal_s);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<int> block_units = equal;
      for (int moves = 1 + trial % 8; moves > 0; --moves) {
        const int from = random() % kBlocks, to = random() % kBlocks;
        const int units = std::min(block_units[from] - 1, 1 + static_cast<int>(random() % 32));
        block_units[from] -= units;
        block_units[to] += units;
      }
      ASSERT_GE(after_arrival(block_units), equal_s * (1 - 1e-12))
          << n << " ranks, blocks " << ::testing::PrintToString(block_units);
    }
  }
  // The cut plans are still plans: the verifier accepts one.
  const Plan plan = *SynthesizeLogDepthStragglar(12, 5, 4);
  std::vector<int> units(plan.num_chunks);
  for (int c = 0; c < plan.num_chunks; ++c) units[c] = 1 + c % 3;
  EXPECT_TRUE(VerifyPlan(WithChunksCutInto(plan, units)).ok());
}

TEST(SimulatorTest, RingWithoutItsTransfersIsPricedByItsRun) {
  std::mt19937 random(9);
  std::uniform_real_distribution<double> lag(0, 1e-3);
  const auto arrivals = [&](int n) {
    std::vector<double> arrival(n);
    for (double& at : arrival) at = lag(random);
    return arrival;
  };
  for (int n : {2, 5, 8, 16}) {
    const std::vector<double> arrival = arrivals(n);
    EXPECT_EQ(SimulatePlan(*SynthesizeRingHeader(n), 12345678, kPaperLink, arrival)->finish_s,
              SimulatePlan(*SynthesizeRing(n), 12345678, kPaperLink, arrival)->finish_s)
        << n;
  }
  // On nodes its cycle crosses them: the same up to rounding.
  for (const Topology& topology : {Topology{.nodes = 2, .ranks_per_node = 4}, Topology{3, 4}}) {
    const NetworkModel network{
        .topology = topology, .intra_node = kPaperLink, .inter_node = kTypicalInterNodeLink};
    const int n = topology.num_ranks();
    const std::vector<double> arrival = arrivals(n);
    const SimulationResult elided =
        *SimulatePlan(*SynthesizeRingHeader(n), 12345678, network, arrival);
    const SimulationResult whole = *SimulatePlan(*SynthesizeRing(n), 12345678, network, arrival);
    for (int r = 0; r < n; ++r) EXPECT_THAT(elided.finish_s[r], NearlyEquals(whole.finish_s[r]));
    // The hierarchical ring has no one run to price it by.
    EXPECT_EQ(
        SimulatePlan(*SynthesizeHierarchicalRingHeader(topology.nodes, topology.ranks_per_node), 1,
                     network, arrival)
            .status()
            .code(),
        absl::StatusCode::kFailedPrecondition);
  }
}

TEST(SimulatorTest, AnotherPlansTransfersAreRefused) {
  // StragglAR around 4 under the header of StragglAR around 3: as many rounds and ranks.
  const Plan around_four = *SynthesizeStragglar(9, 4, 2);
  const Plan around_three = *SynthesizeStragglar(9, 3, 2);
  ASSERT_EQ(around_three.num_rounds(), around_four.num_rounds());
  const absl::Status mixed =
      SimulateRounds(PlanRounds{.header = HeaderOf(around_three), .transfers = &around_four}, 0,
                     around_four.num_rounds(), 1, NetworkModel::Flat(9, kPaperLink),
                     std::vector<double>(9, 0.0))
          .status();
  EXPECT_EQ(mixed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mixed.message(), HasSubstr("the transfers are not this plan's"));
}

// One rank's link 5x slower (LinkModel::slow_rank): every transfer to or from it moves its bytes
// 5x slower, the others as before.
LinkModel WithSlowRank(int rank, double factor) {
  LinkModel link = kPaperLink;
  link.slow_rank = rank;
  link.slow_factor = factor;
  return link;
}

TEST(SimulatorTest, ASlowLinkCostsRingItsSlowHopEveryRound) {
  for (int n : {4, 8, 13}) {
    for (int slow : {0, n / 2, n - 1}) {
      const double bytes = 16 << 20;
      const LinkModel link = WithSlowRank(slow, 5);
      const std::vector<double> together(n, 0.0);
      // Each of Ring's 2(n - 1) rounds waits for the hops into and out of the slow rank.
      const double slow_hop_s = link.alpha_s + 5 * (bytes / n) / link.bandwidth_bytes_per_s;
      const SimulationResult whole = *SimulatePlan(*SynthesizeRing(n), bytes, link, together);
      EXPECT_THAT(whole.completion_s, NearlyEquals(2 * (n - 1) * slow_hop_s)) << n << " " << slow;
      // Its header alone is priced by its ring run in closed form: the same, up to rounding.
      const SimulationResult by_run =
          *SimulatePlan(*SynthesizeRingHeader(n), bytes, link, together);
      for (int r = 0; r < n; ++r) EXPECT_THAT(by_run.finish_s[r], NearlyEquals(whole.finish_s[r]));
    }
  }
}

TEST(SimulatorTest, ASlowLinksRingRunsAgreeWithRoundByRound) {
  std::mt19937 random(11);
  std::uniform_real_distribution<double> lag(0, 1e-3);
  for (int n : {5, 8}) {
    // The slow rank in the ReduceScatter's ring runs (1), and the straggler, outside them.
    for (int slow : {1, n - 1}) {
      const Plan stragglar = *SynthesizeStragglar(n, n - 1, 2);
      std::vector<double> arrival(n);
      for (double& at : arrival) at = lag(random);
      const NetworkModel network = NetworkModel::Flat(n, WithSlowRank(slow, 3));
      const std::vector<RingRun> runs = FindRingRuns(stragglar);
      ASSERT_FALSE(runs.empty());
      const SimulationResult by_runs =
          *SimulateRounds(stragglar, runs, 0, stragglar.num_rounds(), 4 << 20, network, arrival);
      const SimulationResult by_rounds =
          *SimulateRounds(stragglar, {}, 0, stragglar.num_rounds(), 4 << 20, network, arrival);
      for (int r = 0; r < n; ++r) {
        EXPECT_THAT(by_runs.finish_s[r], NearlyEquals(by_rounds.finish_s[r])) << n << " " << r;
      }
    }
  }
}

TEST(SimulatorTest, StragglarAroundTheSlowLinkBeatsRingWithNobodyLate) {
  // StragglAR around the rank behind the slow link moves its buffer in once and the result out
  // once over that link; Ring moves 2(n - 1)/n of it each way. With all links alike, Ring wins.
  for (int n : {4, 8}) {
    const double bytes = 16 << 20;
    const std::vector<double> together(n, 0.0);
    const int slow = 2;
    const Plan ring = *SynthesizeRing(n);
    const Plan around_slow = *SynthesizeStragglar(n, slow, 4);
    const double ring_slow_s =
        SimulatePlan(ring, bytes, WithSlowRank(slow, 5), together)->completion_s;
    const double stragglar_slow_s =
        SimulatePlan(around_slow, bytes, WithSlowRank(slow, 5), together)->completion_s;
    EXPECT_LT(stragglar_slow_s, ring_slow_s) << n;
    EXPECT_GT(SimulatePlan(around_slow, bytes, kPaperLink, together)->completion_s,
              SimulatePlan(ring, bytes, kPaperLink, together)->completion_s)
        << n;
    // Around another rank it gains nothing: the slow link carries a ReduceScatter's share too.
    const Plan around_other = *SynthesizeStragglar(n, n - 1, 4);
    EXPECT_GT(SimulatePlan(around_other, bytes, WithSlowRank(slow, 5), together)->completion_s,
              stragglar_slow_s)
        << n;
  }
}

TEST(SimulatorTest, ASlowLinkIsCheckedAndPricedWhereEveryLinkIsOfOneClass) {
  const Plan ring = *SynthesizeRing(4);
  const std::vector<double> together(4, 0.0);
  EXPECT_THAT(SimulatePlan(ring, 1e6, WithSlowRank(4, 2), together).status().message(),
              HasSubstr("the slow link's rank 4 is not one of the 4 ranks"));
  EXPECT_THAT(SimulatePlan(ring, 1e6, WithSlowRank(1, 0.5), together).status().message(),
              HasSubstr("a finite factor >= 1, got rank 1 at 0.5"));
  EXPECT_THAT(SimulatePlan(ring, 1e6, WithSlowRank(-2, 2), together).status().message(),
              HasSubstr("a rank >= 0 (-1: none)"));
  const NetworkModel nodes{.topology = {.nodes = 2, .ranks_per_node = 2},
                           .intra_node = WithSlowRank(1, 2),
                           .inter_node = kTypicalInterNodeLink};
  EXPECT_THAT(SimulatePlan(ring, 1e6, nodes, together).status().message(),
              HasSubstr("where every link is of one class (one node, or nodes of one rank), not "
                        "on 2x2 (rank 1)"));
  // Nodes of one rank: every link is a NIC's, and the slow one is priced as on one node.
  const LinkModel slow_nic = [] {
    LinkModel nic = kTypicalInterNodeLink;
    nic.slow_rank = 1;
    nic.slow_factor = 3;
    return nic;
  }();
  const NetworkModel hosts{.topology = {.nodes = 4, .ranks_per_node = 1},
                           .intra_node = slow_nic,
                           .inter_node = slow_nic};
  const double slow_hop_s = slow_nic.alpha_s + 3 * (1e6 / 4) / slow_nic.bandwidth_bytes_per_s;
  EXPECT_THAT(SimulatePlan(ring, 1e6, hosts, together)->completion_s, NearlyEquals(6 * slow_hop_s));
  EXPECT_THAT(SimulatePlan(*SynthesizeRingHeader(4), 1e6, hosts, together)->completion_s,
              NearlyEquals(6 * slow_hop_s));
  // A factor of 1 is every link alike, bit for bit.
  EXPECT_EQ(SimulatePlan(ring, 1e6, WithSlowRank(1, 1), together)->finish_s,
            SimulatePlan(ring, 1e6, kPaperLink, together)->finish_s);
}

TEST(SimulatorTest, BadInputsAreRejected) {
  const Plan ring = Synthesize(Algorithm::kRing, 4, 0);
  EXPECT_THAT(SimulatePlan(ring, 1e6, kPaperLink, {0, 0, 0}).status().message(),
              HasSubstr("needs 4 arrival times, got 3"));
  EXPECT_THAT(SimulatePlan(ring, -1, kPaperLink, {0, 0, 0, 0}).status().message(),
              HasSubstr("bytes must be finite and >= 0"));
  EXPECT_FALSE(
      SimulatePlan(ring, 1e6, {.alpha_s = 0, .bandwidth_bytes_per_s = 0}, {0, 0, 0, 0}).ok());
  EXPECT_FALSE(SimulatePlan(ring, 1e6, kPaperLink, {0, 0, 0, NAN}).ok());
  EXPECT_FALSE(BreakEvenDelay(ring, ring, 1e6, kPaperLink).ok());
}

}  // namespace
}  // namespace stragglar
