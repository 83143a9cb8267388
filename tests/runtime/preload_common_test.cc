#include "runtime/preload_common.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

// One rank's view of a gather whose other ranks' values are given: what LearnTopology reads.
class GatheringBackend final : public CommBackend {
 public:
  GatheringBackend(int rank, std::vector<double> others) : rank_(rank), all_(std::move(others)) {}
  double Now() override { return 0; }
  absl::Status StartGather(absl::Span<const double> mine) override {
    if (mine.size() != 1) return absl::InternalError("one value per rank expected");
    all_[rank_] = mine[0];
    ++gathers_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> FinishGather() override { return all_; }
  absl::Status BroadcastFromRankZero(std::string&) override { return absl::OkStatus(); }
  int gathers() const { return gathers_; }

 private:
  int rank_;
  std::vector<double> all_;
  int gathers_ = 0;
};

TEST(PreloadCommonTest, LearnTopologyFromTheRanksNodesOrTheEnvironment) {
  const PreloadConfig unset;
  // Rank 2 of 2 nodes of 2, its node id 30 (what a host hash or node leader would be).
  GatheringBackend nodes(2, {10, 10, 0, 30});
  EXPECT_EQ(*LearnTopology(unset, nodes, 4, 30, "comm0"),
            (Topology{.nodes = 2, .ranks_per_node = 2}));
  // One host: flat, nothing to say.
  GatheringBackend one_host(1, {5, 0, 5, 5});
  EXPECT_EQ(*LearnTopology(unset, one_host, 4, 5, "comm0"), std::nullopt);
  // Ranks not numbered node by node: priced as one node (and said once).
  GatheringBackend interleaved(0, {0, 7, 3, 7});
  EXPECT_EQ(*LearnTopology(unset, interleaved, 4, 3, "comm0"), std::nullopt);
  // STRAGGLAR_TOPOLOGY wins when it fits the communicator; the gather still happens, so ranks
  // with different environments make the same calls.
  PreloadConfig forced;
  forced.topology = Topology{.nodes = 4, .ranks_per_node = 1};
  GatheringBackend fits(0, {0, 5, 5, 5});
  EXPECT_EQ(*LearnTopology(forced, fits, 4, 5, "comm0"), forced.topology);
  EXPECT_EQ(fits.gathers(), 1);
  GatheringBackend larger(0, {0, 5, 6, 6, 7, 7});
  EXPECT_EQ(*LearnTopology(forced, larger, 6, 5, "comm1"),
            (Topology{.nodes = 3, .ranks_per_node = 2}));
  // However many ranks: 4096 in nodes of 8 are priced per link class too.
  std::vector<double> eights(4096);
  for (int r = 0; r < 4096; ++r) eights[r] = r / 8;
  GatheringBackend many(0, eights);
  EXPECT_EQ(*LearnTopology(unset, many, 4096, 0, "comm2"),
            (Topology{.nodes = 512, .ranks_per_node = 8}));
  // A gather that returns the wrong count is an error, not a guess.
  GatheringBackend short_gather(0, {0, 1});
  EXPECT_FALSE(LearnTopology(unset, short_gather, 4, 1, "comm0").ok());
}

TEST(PreloadCommonTest, LocalRankFromTheLauncherInItsOrder) {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    unsetenv(name);
  }
  EXPECT_EQ(LocalRankFromEnv(), 0);
  setenv("SLURM_LOCALID", "2", 1);
  EXPECT_EQ(LocalRankFromEnv(), 2);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);
  EXPECT_EQ(LocalRankFromEnv(), 5) << "OpenMPI's before Slurm's";
  setenv("LOCAL_RANK", "", 1);
  EXPECT_EQ(LocalRankFromEnv(), 5) << "an empty value is no value";
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(LocalRankFromEnv(), 3) << "torchrun's first";
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    unsetenv(name);
  }
}

TEST(PreloadCommonTest, HostNodeIdIsStableAndExactInADouble) {
  const int64_t id = HostNodeId();
  EXPECT_EQ(HostNodeId(), id);
  EXPECT_GE(id, 0);
  EXPECT_LT(id, int64_t{1} << 52);
  EXPECT_EQ(static_cast<int64_t>(static_cast<double>(id)), id);
}

// The INFO lines both preloads write: what a communicator measured and which plans it ran.
TEST(PreloadCommonTest, DescribePlanSaysTheShapeOfWhatRuns) {
  EXPECT_EQ(DescribePlan(*SynthesizeStragglar(4, 3), 16 << 20),
            "stragglar around rank 3 for 16 MiB: 3 chunks, 2 rounds before the straggler arrives "
            "and 4 after");
  EXPECT_EQ(DescribePlan(*SynthesizeStragglar(4, 1, 8), 64 << 20),
            "stragglar around rank 1 for 64 MiB: 24 chunks (8 pieces per rank), 2 rounds before "
            "the straggler arrives and 25 after");
  EXPECT_EQ(DescribePlan(*SynthesizeRing(4), 1 << 20), "ring for 1 MiB: 4 chunks, 6 rounds");
  EXPECT_EQ(DescribePlan(*SynthesizeLogDepthStragglar(4, 3, 8), 1 << 20),
            "stragglar around rank 3 for 1 MiB: 8 chunks (log-depth: the straggler's buffer in 8 "
            "blocks), 4 rounds before the straggler arrives and 9 after");
  EXPECT_EQ(DescribePlan(*SynthesizeLogDepthStragglar(9, 0, 2), 1 << 20),
            "stragglar around rank 0 for 1 MiB: 8 chunks (log-depth: the straggler's buffer in 2 "
            "blocks), 6 rounds before the straggler arrives and 5 after");
  EXPECT_EQ(DescribePlan(*SynthesizeHierarchicalStragglar(2, 2, 3), 1 << 20),
            "stragglar around rank 3 for 1 MiB: 2 chunks (hierarchical), 1 rounds before the "
            "straggler arrives and 3 after");
}

TEST(PreloadCommonTest, DescribeLinkGivesLatencyAndBandwidth) {
  EXPECT_EQ(DescribeLink({.alpha_s = 7.34e-6, .bandwidth_bytes_per_s = 5.67e9}),
            "link: 7.34 us + 5.67 GB/s per message");
}

// Each rank's speeds each way, and a slowest batch only where it is 10% or more below the fastest.
TEST(PreloadCommonTest, DescribeLinkSpeedsGivesEachRankEachWay) {
  EXPECT_EQ(DescribeLinkSpeeds({{12.4e6, 12.5e6, 12.0e6, 6.25e6}, {3.1e6, 12.5e6, 2.5e6, 12.5e6}}),
            "links (send/receive, MB/s): 0 12.4/12.5 (6.25), 1 3.1 (2.5)/12.5");
}

}  // namespace
}  // namespace stragglar
