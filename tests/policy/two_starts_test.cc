// SimulateFromTwoStarts (policy/simulator.h): two simulations of a plan's rounds in one pass. Each
// lane is the simulation from its own start, bit for bit, for every plan family, with ring runs
// and compact rounds, on one node and on nodes, renamed or not; and a start of -infinity is "no
// path", so two lanes split the max-plus map exactly: the simulation from the later of two starts
// is the later of the lanes, bit for bit, which is what the plan cache's post-arrival profile
// relies on.
#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"
#include "policy/model/network_model.h"
#include "policy/model/ring_runs.h"
#include "policy/model/simulator.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

constexpr double kNoPath = -std::numeric_limits<double>::infinity();
constexpr double kBytes = 12345678;
const LinkModel kNvlink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450e9};
// A NIC whose transfers share lanes: costs depend on a round's transfer count.
const LinkModel kSharedNic{.alpha_s = 20e-6, .bandwidth_bytes_per_s = 25e9, .shared_lanes = 2};

struct Case {
  std::string name;
  Plan plan;
  Topology topology;
};

// StragglAR's three families and two baselines, on one node and on nodes (ring runs that cross
// nodes included: the flat schedule's ReduceScatter on 3x4).
std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"flat 7", *SynthesizeStragglar(7, 3, 2), Topology::Flat(7)});
  cases.push_back({"flat 3x4", *SynthesizeStragglar(12, 11), Topology{3, 4}});
  cases.push_back({"log-depth 16", *SynthesizeLogDepthStragglar(16, 5, 4), Topology::Flat(16)});
  cases.push_back({"log-depth 2x8", *SynthesizeLogDepthStragglar(16, 15, 2), Topology{2, 8}});
  cases.push_back({"hierarchical 3x4", *SynthesizeHierarchicalStragglar(3, 4, 6), Topology{3, 4}});
  cases.push_back(
      {"hierarchical log rails 4x2", *SynthesizeHierarchicalStragglar(4, 2, 7, 2), Topology{4, 2}});
  cases.push_back({"ring 2x4", *SynthesizeHierarchicalRing(2, 4), Topology{2, 4}});
  cases.push_back({"halving-doubling 8", *SynthesizeHalvingDoubling(8), Topology::Flat(8)});
  return cases;
}

NetworkModel NetworkOf(const Topology& topology) {
  return {.topology = topology, .intra_node = kNvlink, .inter_node = kSharedNic};
}

std::vector<double> RandomStarts(int n, std::mt19937& random) {
  std::uniform_real_distribution<double> lag(0, 1e-3);
  std::vector<double> start(static_cast<size_t>(n));
  for (double& at : start) at = lag(random);
  return start;
}

// A renaming that moves every rank (rank c is renamed (c * 5 + 1) mod n where that is a
// permutation, else rotated by one).
std::vector<int> Renaming(int n) {
  std::vector<int> renamed(static_cast<size_t>(n));
  const bool coprime = std::gcd(5, n) == 1;
  for (int c = 0; c < n; ++c) renamed[c] = coprime ? (c * 5 + 1) % n : (c + 1) % n;
  return renamed;
}

// The one-start simulation the lanes must equal.
std::vector<double> SimulatedFrom(const Case& each, absl::Span<const RingRun> runs,
                                  const CompactRounds* compact, absl::Span<const int> renamed,
                                  int begin, int end, absl::Span<const double> start) {
  absl::StatusOr<SimulationResult> result =
      renamed.empty() ? SimulateRounds(each.plan, runs, compact, begin, end, kBytes,
                                       NetworkOf(each.topology), start)
                      : SimulateRenamedRounds(each.plan, runs, compact, renamed, begin, end, kBytes,
                                              NetworkOf(each.topology), start);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->finish_s : std::vector<double>{};
}

std::array<std::vector<double>, 2> Lanes(const Case& each, absl::Span<const RingRun> runs,
                                         const CompactRounds* compact,
                                         absl::Span<const int> renamed, int begin, int end,
                                         const std::vector<double>& first,
                                         const std::vector<double>& second) {
  absl::StatusOr<std::array<std::vector<double>, 2>> lanes =
      SimulateFromTwoStarts(each.plan, runs, compact, renamed, begin, end, kBytes,
                            NetworkOf(each.topology), {first, second});
  EXPECT_TRUE(lanes.ok()) << lanes.status();
  return lanes.ok() ? *lanes : std::array<std::vector<double>, 2>{};
}

// Calls `check` with each way of reading a case's rounds: with its ring runs or without, from its
// compact rounds or its transfers, renamed or not; and each phase and the whole plan.
template <typename Check>
void ForEachReading(const Case& each, Check check) {
  const std::vector<RingRun> runs = FindRingRuns(each.plan);
  const std::optional<CompactRounds> compact = CompactRoundsOf(each.plan);
  ASSERT_TRUE(compact.has_value()) << each.name;
  const std::vector<int> renamed = Renaming(each.plan.num_ranks);
  const int pre = each.plan.pre_arrival_rounds;
  const std::vector<std::pair<int, int>> phases = {
      {0, each.plan.num_rounds()}, {0, pre}, {pre, each.plan.num_rounds()}};
  for (const bool with_runs : {false, true}) {
    for (const bool from_compact : {false, true}) {
      for (const bool rename : {false, true}) {
        for (const auto& [begin, end] : phases) {
          SCOPED_TRACE(each.name + (with_runs ? ", runs" : "") + (from_compact ? ", compact" : "") +
                       (rename ? ", renamed" : "") + ", rounds " + std::to_string(begin) + "-" +
                       std::to_string(end));
          check(with_runs ? absl::Span<const RingRun>(runs) : absl::Span<const RingRun>(),
                from_compact ? &*compact : nullptr,
                rename ? absl::Span<const int>(renamed) : absl::Span<const int>(), begin, end);
        }
      }
    }
  }
}

TEST(TwoStartsTest, EachLaneIsTheSimulationFromItsStartBitForBit) {
  std::mt19937 random(11);
  for (const Case& each : Cases()) {
    const int n = each.plan.num_ranks;
    ForEachReading(each, [&](absl::Span<const RingRun> runs, const CompactRounds* compact,
                             absl::Span<const int> renamed, int begin, int end) {
      const std::vector<double> first = RandomStarts(n, random);
      const std::vector<double> second = RandomStarts(n, random);
      const std::array<std::vector<double>, 2> lanes =
          Lanes(each, runs, compact, renamed, begin, end, first, second);
      EXPECT_EQ(lanes[0], SimulatedFrom(each, runs, compact, renamed, begin, end, first));
      EXPECT_EQ(lanes[1], SimulatedFrom(each, runs, compact, renamed, begin, end, second));
    });
  }
}

TEST(TwoStartsTest, MinusInfinityIsNoPathSoTwoLanesSplitTheLaterStartExactly) {
  std::mt19937 random(12);
  for (const Case& each : Cases()) {
    const int n = each.plan.num_ranks;
    // The plan's straggler alone in one lane, the others in the other (a baseline: rank 0).
    const int alone = each.plan.straggler.value_or(0);
    ForEachReading(each, [&](absl::Span<const RingRun> runs, const CompactRounds* compact,
                             absl::Span<const int> renamed, int begin, int end) {
      const std::vector<double> start = RandomStarts(n, random);
      std::vector<double> others = start, only(static_cast<size_t>(n), kNoPath);
      others[alone] = kNoPath;
      only[alone] = start[alone];
      const std::array<std::vector<double>, 2> lanes =
          Lanes(each, runs, compact, renamed, begin, end, others, only);
      const std::vector<double> together =
          SimulatedFrom(each, runs, compact, renamed, begin, end, start);
      ASSERT_EQ(together.size(), static_cast<size_t>(n));
      for (int rank = 0; rank < n; ++rank) {
        EXPECT_EQ(std::max(lanes[0][rank], lanes[1][rank]), together[rank]) << "rank " << rank;
      }
    });
  }
}

TEST(TwoStartsTest, ARankNoPathReachesKeepsMinusInfinity) {
  // Before StragglAR's straggler arrives nothing reaches it, and it reaches no one.
  const Plan plan = *SynthesizeStragglar(6, 2);
  const std::vector<double> zeros(6, 0.0);
  std::vector<double> others = zeros, only(6, kNoPath);
  others[2] = kNoPath;
  only[2] = 0.5;
  absl::StatusOr<std::array<std::vector<double>, 2>> lanes =
      SimulateFromTwoStarts(plan, {}, nullptr, {}, 0, plan.pre_arrival_rounds, kBytes,
                            NetworkModel::Flat(6, kNvlink), {others, only});
  ASSERT_TRUE(lanes.ok()) << lanes.status();
  for (int rank = 0; rank < 6; ++rank) {
    EXPECT_EQ((*lanes)[0][rank] == kNoPath, rank == 2) << rank;
    EXPECT_EQ((*lanes)[1][rank], rank == 2 ? 0.5 : kNoPath) << rank;
  }
  // After it, its data reaches every rank.
  lanes = SimulateFromTwoStarts(plan, {}, nullptr, {}, plan.pre_arrival_rounds, plan.num_rounds(),
                                kBytes, NetworkModel::Flat(6, kNvlink), {others, only});
  ASSERT_TRUE(lanes.ok()) << lanes.status();
  for (int rank = 0; rank < 6; ++rank) EXPECT_GT((*lanes)[1][rank], 0.5) << rank;
}

TEST(TwoStartsTest, BadInputsAreRejected) {
  const Plan plan = *SynthesizeStragglar(4, 3);
  const NetworkModel network = NetworkModel::Flat(4, kNvlink);
  const std::vector<double> good = {0, 0, 0, kNoPath};
  const auto message = [&](std::vector<double> first, std::vector<int> renamed = {}) {
    return std::string(SimulateFromTwoStarts(plan, {}, nullptr, renamed, 0, plan.num_rounds(),
                                             kBytes, network, {first, good})
                           .status()
                           .message());
  };
  EXPECT_THAT(message({0, 0, 0}), HasSubstr("needs 4 arrival times, got 3"));
  EXPECT_THAT(message({0, 0, 0, NAN}), HasSubstr("finite or -infinity"));
  EXPECT_THAT(message({0, 0, 0, std::numeric_limits<double>::infinity()}),
              HasSubstr("finite or -infinity"));
  EXPECT_THAT(message(good, {0, 1, 2}), HasSubstr("renaming 3 ranks of a plan of 4"));
  EXPECT_THAT(message(good, {0, 1, 2, 4}), HasSubstr("renamed rank 4 is out of range"));
  EXPECT_THAT(std::string(SimulateFromTwoStarts(plan, {}, nullptr, {}, 0, plan.num_rounds() + 1,
                                                kBytes, network, {good, good})
                              .status()
                              .message()),
              HasSubstr("are not within the plan's"));
  EXPECT_TRUE(message(good).empty());
}

}  // namespace
}  // namespace stragglar
