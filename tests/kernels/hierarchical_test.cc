// Hierarchical StragglAR and the round packer that builds it: correct plans on every layout and
// straggler, the phases the family promises, and a packer that keeps a serial schedule's meaning.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/verifier.h"
#include "kernels/program/program.h"
#include "kernels/program/program_check.h"
#include "kernels/synth/round_packer.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

struct Layout {
  int nodes;
  int per_node;
};

const Layout kLayouts[] = {{2, 2}, {2, 3}, {3, 2}, {2, 4}, {3, 3}, {4, 2},
                           {3, 4}, {5, 3}, {4, 4}, {2, 8}, {6, 5}, {8, 4}};

Plan Hierarchical(int nodes, int per_node, int straggler) {
  absl::StatusOr<Plan> plan = SynthesizeHierarchicalStragglar(nodes, per_node, straggler);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : Plan{};
}

TEST(HierarchicalStragglarTest, EveryLayoutAndStragglerVerifies) {
  for (const Layout& layout : kLayouts) {
    const int n = layout.nodes * layout.per_node;
    for (int straggler = 0; straggler < n; ++straggler) {
      const Plan plan = Hierarchical(layout.nodes, layout.per_node, straggler);
      EXPECT_TRUE(VerifyPlan(plan).ok()) << layout.nodes << "x" << layout.per_node << " straggler "
                                         << straggler << ": " << VerifyPlan(plan);
      EXPECT_EQ(plan.num_chunks, layout.per_node * (layout.nodes - 1));
      ASSERT_EQ(plan.straggler, straggler);
    }
  }
}

TEST(HierarchicalStragglarTest, LowersToProgramsThatMatchThePlan) {
  for (const Layout& layout : {Layout{2, 3}, Layout{3, 4}, Layout{4, 2}}) {
    const int n = layout.nodes * layout.per_node;
    const Plan plan = Hierarchical(layout.nodes, layout.per_node, n / 2);
    for (bool in_place : {false, true}) {
      std::vector<RankProgram> programs;
      for (int rank = 0; rank < n; ++rank) {
        absl::StatusOr<RankProgram> program = LowerPlan(plan, rank, {.in_place = in_place});
        ASSERT_TRUE(program.ok()) << program.status();
        programs.push_back(*std::move(program));
      }
      EXPECT_TRUE(CheckPrograms(plan, programs).ok()) << CheckPrograms(plan, programs);
    }
  }
}

// Which link a transfer uses on `layout`.
bool CrossesNodes(const Layout& layout, const Transfer& transfer) {
  return transfer.src / layout.per_node != transfer.dst / layout.per_node;
}

TEST(HierarchicalStragglarTest, OnlyRailsCrossNodesAndEachCarriesItsShard) {
  // Between nodes, only GPU g talks to GPU g, and only about shard g: a G-th of the buffer per
  // rail. Everything else stays on NVLink.
  for (const Layout& layout : kLayouts) {
    const int n = layout.nodes * layout.per_node;
    const Plan plan = Hierarchical(layout.nodes, layout.per_node, n - 1);
    const int per_shard = plan.num_chunks / layout.per_node;
    int crossing = 0;
    for (const Round& round : plan.rounds) {
      for (const Transfer& transfer : round.transfers) {
        if (!CrossesNodes(layout, transfer)) continue;
        ++crossing;
        const int rail = transfer.src % layout.per_node;
        ASSERT_EQ(transfer.dst % layout.per_node, rail);
        for (int32_t chunk : transfer.chunks) ASSERT_EQ(chunk / per_shard, rail);
      }
    }
    // Every rail moves what the rail plan moves.
    absl::StatusOr<Plan> rail = SynthesizeStragglar(layout.nodes, layout.nodes - 1);
    ASSERT_TRUE(rail.ok());
    int rail_transfers = 0;
    for (const Round& round : rail->rounds) rail_transfers += round.transfers.size();
    EXPECT_EQ(crossing, layout.per_node * rail_transfers) << layout.nodes << "x" << layout.per_node;
  }
}

TEST(HierarchicalStragglarTest, RailsStartWhileTheStragglerIsStillHandingOutShards) {
  // 3 nodes of 4, straggler 11 (node 2, GPU 3): after it arrives it sends its shards to GPUs 0, 1
  // and 2 of its node in three rounds. Packed, rail 3 (whose shard it completes first, with the
  // helper's part) crosses nodes before the third of those sends.
  const Layout layout{3, 4};
  const Plan plan = Hierarchical(layout.nodes, layout.per_node, 11);
  int last_straggler_send = -1;
  int first_rail_after_arrival = -1;
  for (int r = plan.pre_arrival_rounds; r < plan.num_rounds(); ++r) {
    for (const Transfer& transfer : plan.rounds[r].transfers) {
      if (transfer.src == 11 && !CrossesNodes(layout, transfer)) last_straggler_send = r;
      if (CrossesNodes(layout, transfer) && first_rail_after_arrival < 0) {
        first_rail_after_arrival = r;
      }
    }
  }
  ASSERT_GE(first_rail_after_arrival, 0);
  EXPECT_LT(first_rail_after_arrival, last_straggler_send);
  // And nothing involves the straggler before it arrives.
  for (int r = 0; r < plan.pre_arrival_rounds; ++r) {
    for (const Transfer& transfer : plan.rounds[r].transfers) {
      EXPECT_NE(transfer.src, 11);
      EXPECT_NE(transfer.dst, 11);
    }
  }
}

TEST(HierarchicalStragglarTest, LogDepthRailsVerifyAndKeepTheirLatencyChainShort) {
  // Rails of log-depth StragglAR: every layout, straggler and block count verifies; the rails carry
  // G times the rail plan's chunks; and over many nodes the post-arrival phase is shorter than
  // with the flat rails, whose chain is N - 2 + ceil(log2 N) rounds long.
  for (const Layout& layout : kLayouts) {
    const int n = layout.nodes * layout.per_node;
    for (int straggler : {0, n / 2, n - 1}) {
      for (int blocks : {1, 2, 4}) {
        absl::StatusOr<Plan> plan =
            SynthesizeHierarchicalStragglar(layout.nodes, layout.per_node, straggler, blocks);
        ASSERT_TRUE(plan.ok()) << plan.status();
        EXPECT_TRUE(VerifyPlan(*plan).ok())
            << layout.nodes << "x" << layout.per_node << " " << straggler << " " << blocks << ": "
            << VerifyPlan(*plan);
        const Plan rail =
            *SynthesizeLogDepthStragglar(layout.nodes, straggler / layout.per_node, blocks);
        EXPECT_EQ(plan->num_chunks, layout.per_node * rail.num_chunks);
        EXPECT_EQ(plan->variant, PlanVariant::kHierarchical);
      }
    }
  }
  const Plan flat_rails = Hierarchical(16, 2, 31);
  const Plan log_rails = *SynthesizeHierarchicalStragglar(16, 2, 31, 2);
  EXPECT_LT(log_rails.post_arrival_rounds(), flat_rails.post_arrival_rounds());
  // One rank per node: the rail plan is the whole plan.
  EXPECT_EQ(*SynthesizeHierarchicalStragglar(5, 1, 4, 2), *SynthesizeLogDepthStragglar(5, 4, 2));
  EXPECT_THAT(SynthesizeHierarchicalStragglar(2, 4, 0, 3).status().message(),
              HasSubstr("must be a power of two"));
}

TEST(HierarchicalStragglarTest, PipelinedRailsVerifyAndCarryTheirPieces) {
  for (const Layout& layout : kLayouts) {
    const int n = layout.nodes * layout.per_node;
    for (int straggler : {0, n / 2, n - 1}) {
      for (int rail_pieces : {2, 4}) {
        absl::StatusOr<Plan> plan = SynthesizeHierarchicalStragglar(layout.nodes, layout.per_node,
                                                                    straggler, 0, 1, rail_pieces);
        ASSERT_TRUE(plan.ok()) << plan.status();
        EXPECT_TRUE(VerifyPlan(*plan).ok())
            << layout.nodes << "x" << layout.per_node << " " << straggler << " " << rail_pieces
            << ": " << VerifyPlan(*plan);
        EXPECT_EQ(plan->num_chunks, layout.per_node * (layout.nodes - 1) * rail_pieces);
        EXPECT_EQ(plan->variant, PlanVariant::kHierarchical);
      }
    }
  }
  // One rank per node: the pipelined flat plan.
  EXPECT_EQ(*SynthesizeHierarchicalStragglar(5, 1, 4, 0, 1, 2), *SynthesizeStragglar(5, 4, 2));
  EXPECT_THAT(SynthesizeHierarchicalStragglar(3, 4, 0, 2, 1, 2).status().message(),
              HasSubstr("only flat rails are pipelined"));
  EXPECT_THAT(SynthesizeHierarchicalStragglar(3, 4, 0, 0, 1, 0).status().message(),
              HasSubstr("0 rail pieces (at least 1)"));
  EXPECT_THAT(SynthesizeHierarchicalStragglar(3, 4, 0, 0, 1, 65).status().message(),
              HasSubstr("flat rails over 3 nodes take at most 64 pieces per chunk"));
}

TEST(HierarchicalStragglarTest, PipelinedRailsApproachTheBoundAcrossTheStragglersNic) {
  // After arrival every node takes in the buffer (S) once over its NIC, the least it can, and the
  // straggler's node sends out (M + 1) / M of it, M = (N - 1) * rail pieces: 4/3 in one piece on 4
  // nodes, 25/24 in 8 (on 3 nodes S itself). Before arrival the ready nodes send (N - 2) / (N - 1)
  // of it each, a ReduceScatter's share, and the straggler's node nothing.
  for (const Layout& layout : {Layout{3, 2}, Layout{4, 2}, Layout{4, 4}, Layout{5, 2}}) {
    const int n = layout.nodes * layout.per_node;
    for (int rail_pieces : {1, 2, 4, 8}) {
      SCOPED_TRACE(absl::StrCat(layout.nodes, "x", layout.per_node, " in ", rail_pieces));
      const Plan plan =
          *SynthesizeHierarchicalStragglar(layout.nodes, layout.per_node, n - 1, 0, 1, rail_pieces);
      std::vector<int> sent_before(layout.nodes), sent_after(layout.nodes),
          taken_after(layout.nodes);
      for (int r = 0; r < plan.num_rounds(); ++r) {
        for (const Transfer& transfer : plan.rounds[r].transfers) {
          if (!CrossesNodes(layout, transfer)) continue;
          const int chunks = static_cast<int>(transfer.chunks.size());
          const int from = transfer.src / layout.per_node, to = transfer.dst / layout.per_node;
          if (r < plan.pre_arrival_rounds) {
            sent_before[from] += chunks;
          } else {
            sent_after[from] += chunks;
            taken_after[to] += chunks;
          }
        }
      }
      const int m = (layout.nodes - 1) * rail_pieces;
      EXPECT_EQ(sent_after.back() * m, plan.num_chunks * (layout.nodes == 3 ? m : m + 1));
      EXPECT_EQ(sent_before.back(), 0);
      for (int node = 0; node < layout.nodes; ++node) {
        EXPECT_EQ(taken_after[node], plan.num_chunks) << node;
        if (node + 1 < layout.nodes) {
          EXPECT_EQ(sent_before[node] * (layout.nodes - 1), plan.num_chunks * (layout.nodes - 2))
              << node;
        }
      }
    }
  }
}

TEST(HierarchicalStragglarTest, OneLevelIsTheFlatPlan) {
  EXPECT_EQ(Hierarchical(1, 6, 2), *SynthesizeStragglar(6, 2));
  EXPECT_EQ(Hierarchical(5, 1, 4), *SynthesizeStragglar(5, 4));
  EXPECT_THAT(SynthesizeHierarchicalStragglar(1, 1, 0).status().message(),
              HasSubstr("at least 2 ranks"));
  EXPECT_THAT(SynthesizeHierarchicalStragglar(2, 4, 8).status().message(),
              HasSubstr("straggler 8 outside [0, 8)"));
  EXPECT_FALSE(SynthesizeHierarchicalStragglar(0, 4, 0).ok());
}

// ---------------------------------------------------------------------------------------------
// The packer on its own.

Transfer Move(int src, int dst, TransferOp op, ChunkList chunks) {
  return {.src = src, .dst = dst, .op = op, .chunks = std::move(chunks)};
}

TEST(RoundPackerTest, IndependentGroupsShareARoundAndDependentOnesWait) {
  RoundPacker packer(4, 2);
  EXPECT_EQ(packer.Place({Move(0, 1, TransferOp::kReduce, {0})}), 0);
  // Other ranks, other ports: the same round.
  EXPECT_EQ(packer.Place({Move(2, 3, TransferOp::kReduce, {1})}), 0);
  // Reads what round 0 wrote on rank 1: the next round.
  EXPECT_EQ(packer.Place({Move(1, 2, TransferOp::kReduce, {0})}), 1);
  // Rank 0's send port is busy in round 0, and nothing else holds it back.
  EXPECT_EQ(packer.Place({Move(0, 3, TransferOp::kCopy, {0})}), 1);
  // Reads rank 3's chunk 1, written in round 0: round 1 at the earliest, where rank 2 already
  // receives: round 2.
  EXPECT_EQ(packer.Place({Move(3, 2, TransferOp::kCopy, {1})}), 2);
  EXPECT_EQ(packer.Place({Move(1, 0, TransferOp::kCopy, {1})}, /*not_before=*/5), 5);
  EXPECT_EQ(packer.num_rounds(), 6);
}

TEST(RoundPackerTest, WriteAfterReadMayShareTheRound) {
  RoundPacker packer(3, 1);
  EXPECT_EQ(packer.Place({Move(0, 1, TransferOp::kReduce, {0})}), 0);
  // Rank 0's chunk was read in round 0; overwriting it in round 0 is what an exchange does.
  EXPECT_EQ(packer.Place({Move(2, 0, TransferOp::kCopy, {0})}), 0);
  // But reading rank 0's new value must wait for it.
  EXPECT_EQ(packer.Place({Move(0, 2, TransferOp::kCopy, {0})}), 1);
}

TEST(RoundPackerTest, LaterWritesNeverOvertakeEarlierReadsAndWrites) {
  RoundPacker packer(4, 2);
  ASSERT_EQ(packer.Place({Move(0, 1, TransferOp::kCopy, {0})}, /*not_before=*/3), 3);
  // Rank 0's chunk 0 was read in round 3: overwriting it cannot move before that.
  EXPECT_EQ(packer.Place({Move(2, 0, TransferOp::kCopy, {0})}), 3);
  // Rank 1's chunk 0 was written in round 3: a later write lands after it, or it would be lost.
  EXPECT_EQ(packer.Place({Move(3, 1, TransferOp::kCopy, {0})}), 4);
}

TEST(RoundPackerTest, PackedSerialScheduleMeansTheSame) {
  // A ring AllReduce written one transfer per group: packed, it is the ring's 2(n - 1) rounds of n
  // transfers, and it verifies.
  const int n = 6;
  RoundPacker packer(n, n);
  for (int step = 0; step < 2 * (n - 1); ++step) {
    for (int rank = 0; rank < n; ++rank) {
      const int chunk = ((rank - step) % n + n) % n;
      packer.Place({Move(rank, (rank + 1) % n,
                         step < n - 1 ? TransferOp::kReduce : TransferOp::kCopy, {chunk})});
    }
  }
  EXPECT_EQ(packer.num_rounds(), 2 * (n - 1));
  const Plan plan{.algorithm = Algorithm::kRing,
                  .num_ranks = n,
                  .num_chunks = n,
                  .rounds = packer.TakeRounds()};
  for (const Round& round : plan.rounds) EXPECT_EQ(round.transfers.size(), static_cast<size_t>(n));
  EXPECT_TRUE(VerifyPlan(plan).ok()) << VerifyPlan(plan);
}

}  // namespace
}  // namespace stragglar
