// Hierarchical StragglAR on N nodes of G ranks (ranks node by node), for machines where the links
// between nodes are the scarce ones. The straggler's node is the late member of every rail (GPU g
// of every node, joined through their NICs); StragglAR runs rail by rail, on a G-th of the
// buffer each, and NVLink does the rest. The rail plan is the flat schedule over the N nodes,
// pipelined in `rail_pieces` pieces per chunk, or log-depth StragglAR
// (kernels/synth/stragglar_log_depth.cc), whose latency chain grows as log N, for many nodes.
//
// Why pipelined rails: after arrival, what must cross the straggler's node's NIC is its node's
// contribution, once out (S over its G rails), and the result, once in. The flat schedule in one
// piece sends 4/3 S out on 4 nodes; in k pieces per chunk (3k+1)/(3k) S, 25/24 S in 8 (exactly
// (M+1)/M with M = (N-1)k on 4 and 5 nodes, S itself on 3, a little more on some larger ones),
// and every node takes in S, the bound. Before arrival the flat rails run a ReduceScatter among
// the ready nodes, the least any plan moves then; log-depth rails run a whole Halving-Doubling
// AllReduce, and on 4x2 at 2 MiB took 602 ms with nobody late against 343 ms for flat rails in 8
// pieces (docs/results/cluster-nodes-rails-2026-11-30.md).
//
// The buffer is G shards, shard g of the rail plan's C chunks, and rail g reduces shard g.
//  - Before the straggler arrives:
//    1. inside every node, the ready ranks reduce every shard onto its owner (GPU g owns shard g;
//       on the straggler's node a helper also owns the straggler's shard);
//    2. every rail runs the rail plan's pre-arrival rounds among the ready nodes.
//  - After it arrives:
//    3. the straggler adds its shard g into GPU g of its node, and takes its own shard's partial
//       sum from the helper;
//    4. every rail runs the rail plan's post-arrival rounds, its node on the straggler's node now
//       complete;
//    5. inside every node, GPU g hands the finished shard g to the others.
// The phases are written as one serial list of groups and packed by RoundPacker, so a rail starts
// as soon as its shard is in, while the straggler is still handing out the others.
//
// Written for one queue per link class (pieces > 1; docs/scale-model.md, "Per-class queues"),
// phases 3 and 5 move each shard in pieces, piece-major: the straggler hands out the first piece
// of every shard before the second of any, so every rail starts early, and each piece's
// all-gather is listed right after the pieces before it, not after the rails, so it runs over
// NVLink while the next pieces are on the NICs. A rank's all-gather copies keep the list's order
// in its rounds: an executor serves a queue in round order, and a copy placed ahead of one whose
// piece is ready earlier would hold it up. In the round model the copies then sit among the
// rails' rounds and hold them back: slower there, which is why the policy does not offer it.
//
// Timed for per-class queues (SynthesizeTimedHierarchicalStragglar), every shard moves inside
// nodes chunk by chunk, and the rounds are placed in the order the transfers can start on those
// queues (kernels/synth/queue_order.h), not by dependency depth:
//  - the straggler hands out the chunks in the order its node's rails send them;
//  - each node's all-gather copies each chunk once its rail has finished it, in that order;
//  - the straggler's own shard is relayed: one copy of each chunk to a node-mate (a different one
//    chunk by chunk), which copies it to the others. Sent by the straggler to all G - 1 node-mates,
//    its NVLink send queue carried its hand-out and G - 1 copies of its shard, and at 16x8 took
//    1.64 ms where the other nodes finished in 1.14 (docs/scale-model.md).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/synth/queue_order.h"
#include "kernels/synth/round_packer.h"
#include "kernels/synth/stragglar_schedule.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

struct Layout {
  int nodes = 0;
  int per_node = 0;
  int straggler = 0;
  int chunks_per_shard = 0;

  int Rank(int node, int local) const { return node * per_node + local; }
  int straggler_node() const { return straggler / per_node; }
  int straggler_local() const { return straggler % per_node; }
  // The ready rank of the straggler's node that gathers the others' part of the straggler's shard.
  int helper_local() const { return (straggler_local() + 1) % per_node; }
  ChunkList Shard(int shard) const { return Piece(shard, 0, 1); }
  // Piece `piece` of `pieces` of a shard: consecutive chunks, in the rail plan's block order.
  ChunkList Piece(int shard, int piece, int pieces) const {
    const int per_piece = chunks_per_shard / pieces;
    const int first = shard * chunks_per_shard + piece * per_piece;
    return ChunkRange(first, first + per_piece);
  }
  // The shards rank `local` of `node` reduces before the straggler arrives.
  ChunkList OwnedShards(int node, int local) const {
    ChunkList chunks = Shard(local);
    if (node == straggler_node() && local == helper_local()) {
      chunks.Append(Shard(straggler_local()));
    }
    return chunks;
  }
};

// Phase 1: the ready ranks of every node send each owner their part of its shards, the k-th member
// after them in round k.
void ReduceShardsInsideNodes(const Layout& layout, RoundPacker& packer) {
  for (int node = 0; node < layout.nodes; ++node) {
    std::vector<int> members;
    for (int local = 0; local < layout.per_node; ++local) {
      if (layout.Rank(node, local) != layout.straggler) members.push_back(local);
    }
    const int count = static_cast<int>(members.size());
    for (int k = 1; k < count; ++k) {
      std::vector<Transfer> group;
      for (int i = 0; i < count; ++i) {
        const int owner = members[(i + k) % count];
        group.push_back({layout.Rank(node, members[i]), layout.Rank(node, owner),
                         TransferOp::kReduce, layout.OwnedShards(node, owner)});
      }
      packer.Place(std::move(group));
    }
  }
}

// The rail plan's rounds [begin, end) on every rail: rail rank j is rank j of the rail's GPU on
// node j, rail chunk c is chunk c of the rail's shard. Raises `last_round[rank]` to the last round
// the rank has a rail transfer in.
template <typename Packer>
void RunRails(const Layout& layout, const Plan& rail_plan, int begin, int end, int not_before,
              Packer& packer, std::vector<int>& last_round) {
  for (int round = begin; round < end; ++round) {
    for (int rail = 0; rail < layout.per_node; ++rail) {
      std::vector<Transfer> group;
      for (const Transfer& transfer : rail_plan.rounds[round].transfers) {
        ChunkList chunks;
        for (const ChunkList::Run& run : transfer.chunks.runs()) {
          const int offset = rail * layout.chunks_per_shard;
          chunks.AppendRange(offset + run.begin, offset + run.end);
        }
        group.push_back({layout.Rank(transfer.src, rail), layout.Rank(transfer.dst, rail),
                         transfer.op, std::move(chunks)});
      }
      std::vector<int> ranks;
      for (const Transfer& transfer : group)
        ranks.insert(ranks.end(), {transfer.src, transfer.dst});
      const int round = packer.Place(std::move(group), not_before);
      for (int rank : ranks) last_round[rank] = std::max(last_round[rank], round);
    }
  }
}

// Phase 3, piece by piece: the straggler's own shard first (its rail can start at once), then
// the others in order around the node.
void HandOut(const Layout& layout, int pieces, int not_before, RoundPacker& packer) {
  const int node = layout.straggler_node();
  const int own = layout.straggler_local();
  for (int piece = 0; piece < pieces; ++piece) {
    packer.Place({{layout.Rank(node, layout.helper_local()), layout.straggler, TransferOp::kReduce,
                   layout.Piece(own, piece, pieces)}},
                 not_before);
    for (int k = 1; k < layout.per_node; ++k) {
      const int local = (own + k) % layout.per_node;
      packer.Place({{layout.straggler, layout.Rank(node, local), TransferOp::kReduce,
                     layout.Piece(local, piece, pieces)}},
                   not_before);
    }
  }
}

// Phase 5 in the round model: k-th neighbour first on every node, so that each round's copies use
// distinct ports. A copy waits until both of its ranks are done with their rails: a rank runs its
// rounds in order, so a copy slipped in among a rank's rail rounds would hold its rail back until
// the sender's rail is done.
void AllGatherAfterRails(const Layout& layout, int not_before,
                         const std::vector<int>& last_rail_round, RoundPacker& packer) {
  for (int k = 1; k < layout.per_node; ++k) {
    for (int m = 0; m < layout.nodes; ++m) {
      for (int local = 0; local < layout.per_node; ++local) {
        const int src = layout.Rank(m, local);
        const int dst = layout.Rank(m, (local + k) % layout.per_node);
        packer.Place({{src, dst, TransferOp::kCopy, layout.Shard(local)}},
                     std::max({not_before, last_rail_round[src] + 1, last_rail_round[dst] + 1}));
      }
    }
  }
}

// Phase 5 for per-class queues: piece by piece, k-th neighbour first, each rank's copies in list
// order (a copy after the rank's previous one), not waiting for the rails.
void AllGatherByPiece(const Layout& layout, int pieces, int not_before, RoundPacker& packer) {
  std::vector<int> next_copy(layout.nodes * layout.per_node, not_before);
  for (int piece = 0; piece < pieces; ++piece) {
    for (int k = 1; k < layout.per_node; ++k) {
      for (int m = 0; m < layout.nodes; ++m) {
        for (int local = 0; local < layout.per_node; ++local) {
          const int src = layout.Rank(m, local);
          const int dst = layout.Rank(m, (local + k) % layout.per_node);
          const int round =
              packer.Place({{src, dst, TransferOp::kCopy, layout.Piece(local, piece, pieces)}},
                           std::max(next_copy[src], next_copy[dst]));
          next_copy[src] = next_copy[dst] = round + 1;
        }
      }
    }
  }
}

// A rail rank's post-arrival chunks in the order it first sends them (the late node's: the order
// its node's rails need the straggler's hand-out in), then the rest in index order.
std::vector<int> ChunksInSendOrder(const Plan& rail_plan, int rail_rank) {
  std::vector<int> order;
  std::vector<bool> listed(rail_plan.num_chunks, false);
  for (int round = rail_plan.pre_arrival_rounds; round < rail_plan.num_rounds(); ++round) {
    for (const Transfer& transfer : rail_plan.rounds[round].transfers) {
      if (transfer.src != rail_rank) continue;
      for (int32_t chunk : transfer.chunks) {
        if (!listed[chunk]) order.push_back(chunk);
        listed[chunk] = true;
      }
    }
  }
  for (int chunk = 0; chunk < rail_plan.num_chunks; ++chunk) {
    if (!listed[chunk]) order.push_back(chunk);
  }
  return order;
}

// A rail rank's chunks in the order the rail plan finishes them there (its last write of each).
std::vector<int> ChunksInFinishOrder(const Plan& rail_plan, int rail_rank) {
  std::vector<int> last_write(rail_plan.num_chunks, -1);
  for (int round = 0; round < rail_plan.num_rounds(); ++round) {
    for (const Transfer& transfer : rail_plan.rounds[round].transfers) {
      if (transfer.dst != rail_rank) continue;
      for (int32_t chunk : transfer.chunks) last_write[chunk] = round;
    }
  }
  std::vector<int> order(rail_plan.num_chunks);
  for (int chunk = 0; chunk < rail_plan.num_chunks; ++chunk) order[chunk] = chunk;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return last_write[a] < last_write[b]; });
  return order;
}

// Phase 3 chunk by chunk, in the order the straggler's node's rails send them: for each, the
// straggler's own shard's partial sum from the helper first, then the others around the node.
void HandOutInRailOrder(const Layout& layout, const Plan& rail_plan, QueueOrderPlacer& list) {
  const int node = layout.straggler_node();
  const int own = layout.straggler_local();
  const auto chunk_of = [&](int shard, int chunk) {
    return ChunkRange(shard * layout.chunks_per_shard + chunk,
                      shard * layout.chunks_per_shard + chunk + 1);
  };
  for (int chunk : ChunksInSendOrder(rail_plan, node)) {
    list.Place({{layout.Rank(node, layout.helper_local()), layout.straggler, TransferOp::kReduce,
                 chunk_of(own, chunk)}});
    for (int k = 1; k < layout.per_node; ++k) {
      const int local = (own + k) % layout.per_node;
      list.Place({{layout.straggler, layout.Rank(node, local), TransferOp::kReduce,
                   chunk_of(local, chunk)}});
    }
  }
}

// Phase 5 chunk by chunk, each node in the order its rails finish the chunks. The straggler's
// shard goes to one node-mate per chunk (the next one each time), which copies it to the others.
void GatherInFinishOrder(const Layout& layout, const Plan& rail_plan, QueueOrderPlacer& list) {
  const int mates = layout.per_node - 1;
  for (int node = 0; node < layout.nodes; ++node) {
    const std::vector<int> order = ChunksInFinishOrder(rail_plan, node);
    for (size_t i = 0; i < order.size(); ++i) {
      const int relay =
          (layout.straggler_local() + 1 + static_cast<int>(i) % mates) % layout.per_node;
      for (int local = 0; local < layout.per_node; ++local) {
        const ChunkList chunk = ChunkRange(local * layout.chunks_per_shard + order[i],
                                           local * layout.chunks_per_shard + order[i] + 1);
        int src = layout.Rank(node, local);
        if (src == layout.straggler) {
          list.Place({{src, layout.Rank(node, relay), TransferOp::kCopy, chunk}});
          src = layout.Rank(node, relay);
        }
        for (int k = 1; k < layout.per_node; ++k) {
          const int dst = layout.Rank(node, (local + k) % layout.per_node);
          if (dst != src) list.Place({{src, dst, TransferOp::kCopy, chunk}});
        }
      }
    }
  }
}

}  // namespace

namespace {

// Both public forms: `timing` set, the plan timed for per-class queues (`pieces` unused).
absl::StatusOr<Plan> Synthesize(int nodes, int ranks_per_node, int straggler, int rail_blocks,
                                int pieces, int rail_pieces, const QueueTiming* timing) {
  if (nodes < 1 || ranks_per_node < 1 || nodes * ranks_per_node < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("hierarchical stragglar needs at least 2 ranks, "
                     "got ",
                     nodes, " nodes of ", ranks_per_node));
  }
  const int num_ranks = nodes * ranks_per_node;
  if (straggler < 0 || straggler >= num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("straggler ", straggler, " outside [0, ", num_ranks, ")"));
  }
  if (rail_pieces < 1 || (rail_blocks > 0 && rail_pieces > 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hierarchical stragglar: ", rail_pieces, " rail pieces",
                     rail_blocks > 0 ? " with log-depth rails (only flat rails are pipelined)"
                                     : " (at least 1)"));
  }
  if (nodes > 1 && rail_pieces > 1 &&
      static_cast<int64_t>(nodes - 1) * rail_pieces > kMaxPipelinedPieces) {
    return absl::InvalidArgumentError(
        absl::StrCat("hierarchical stragglar: flat rails over ", nodes, " nodes take at most ",
                     kMaxPipelinedPieces / (nodes - 1), " pieces per chunk (", kMaxPipelinedPieces,
                     " chunks a rail), got ", rail_pieces));
  }
  // One node: there is only one level, and the flat plan is that level. One rank per node: the
  // rail plan is the whole plan.
  if (nodes == 1) return SynthesizeStragglar(num_ranks, straggler, rail_pieces);
  if (ranks_per_node == 1) {
    return rail_blocks > 0 ? SynthesizeLogDepthStragglar(num_ranks, straggler, rail_blocks)
                           : SynthesizeStragglar(num_ranks, straggler, rail_pieces);
  }
  absl::StatusOr<Plan> rail_plan =
      rail_blocks > 0 ? SynthesizeLogDepthStragglar(nodes, straggler / ranks_per_node, rail_blocks)
                      : SynthesizeStragglar(nodes, straggler / ranks_per_node, rail_pieces);
  if (!rail_plan.ok()) return rail_plan.status();
  const Layout layout{.nodes = nodes,
                      .per_node = ranks_per_node,
                      .straggler = straggler,
                      .chunks_per_shard = rail_plan->num_chunks};
  if (timing == nullptr && (pieces < 1 || layout.chunks_per_shard % pieces != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("hierarchical stragglar: ", pieces,
                                                   " pieces do not divide a shard's ",
                                                   layout.chunks_per_shard, " chunks"));
  }
  const int num_chunks = ranks_per_node * layout.chunks_per_shard;
  // The packer keeps 8 bytes per (rank, chunk), and every rank holds every chunk: 4096x16 with
  // log-depth rails is 65536 x 32768 of them, 16 GiB (the sim then took 53 s and 17 GB).
  constexpr int64_t kMaxPackedCells = int64_t{1} << 27;  // 1 GiB
  if (static_cast<int64_t>(num_ranks) * num_chunks > kMaxPackedCells) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "hierarchical StragglAR on ", nodes, "x", ranks_per_node, ": ", num_ranks, " ranks x ",
        num_chunks, " chunks would take ", static_cast<int64_t>(num_ranks) * num_chunks * 8 >> 20,
        " MiB to schedule; at most ", kMaxPackedCells, " rank-chunk pairs (1 GiB)"));
  }
  RoundPacker packer(num_ranks, num_chunks);

  ReduceShardsInsideNodes(layout, packer);
  std::vector<int> last_rail_round(num_ranks, -1);
  RunRails(layout, *rail_plan, 0, rail_plan->pre_arrival_rounds, 0, packer, last_rail_round);
  const int pre_arrival_rounds = packer.num_rounds();

  if (timing != nullptr) {
    QueueOrderPlacer list(num_ranks, num_chunks);
    HandOutInRailOrder(layout, *rail_plan, list);
    RunRails(layout, *rail_plan, rail_plan->pre_arrival_rounds, rail_plan->num_rounds(), 0, list,
             last_rail_round);
    GatherInFinishOrder(layout, *rail_plan, list);
    list.PlaceInto(packer, pre_arrival_rounds, *timing);
  } else {
    HandOut(layout, pieces, pre_arrival_rounds, packer);
    RunRails(layout, *rail_plan, rail_plan->pre_arrival_rounds, rail_plan->num_rounds(),
             pre_arrival_rounds, packer, last_rail_round);
    if (pieces == 1) {
      AllGatherAfterRails(layout, pre_arrival_rounds, last_rail_round, packer);
    } else {
      AllGatherByPiece(layout, pieces, pre_arrival_rounds, packer);
    }
  }
  return Plan{.algorithm = Algorithm::kStragglar,
              .num_ranks = num_ranks,
              .num_chunks = num_chunks,
              .straggler = straggler,
              .pre_arrival_rounds = pre_arrival_rounds,
              .variant = PlanVariant::kHierarchical,
              .rounds = packer.TakeRounds()};
}

}  // namespace

absl::StatusOr<Plan> SynthesizeHierarchicalStragglar(int nodes, int ranks_per_node, int straggler,
                                                     int rail_blocks, int pieces, int rail_pieces) {
  return Synthesize(nodes, ranks_per_node, straggler, rail_blocks, pieces, rail_pieces, nullptr);
}

absl::StatusOr<Plan> SynthesizeTimedHierarchicalStragglar(int nodes, int ranks_per_node,
                                                          int straggler, int rail_blocks,
                                                          int rail_pieces,
                                                          const QueueTiming& timing) {
  if (absl::Status valid = ValidateQueueTiming(timing); !valid.ok()) return valid;
  if (timing.ranks_per_node != ranks_per_node) {
    return absl::InvalidArgumentError(
        absl::StrCat("timed hierarchical stragglar: timed for nodes of ", timing.ranks_per_node,
                     " ranks, asked for ", ranks_per_node));
  }
  return Synthesize(nodes, ranks_per_node, straggler, rail_blocks, /*pieces=*/1, rail_pieces,
                    &timing);
}

}  // namespace stragglar
