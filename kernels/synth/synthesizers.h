// Plan synthesizers, one algorithm per file (ring.cc, halving_doubling.cc, stragglar.cc). Each
// returns a plan that VerifyPlan accepts; tests check that for every rank count they cover.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "kernels/synth/queue_order.h"

namespace stragglar {

// Ring: a ReduceScatter then an AllGather around 0, 1, ..., n-1; 2(n-1) rounds of one chunk each,
// with n chunks. num_ranks >= 2.
absl::StatusOr<Plan> SynthesizeRing(int num_ranks);
// SynthesizeRing's plan without its rounds (PlanHeader): O(1) instead of O(n²).
absl::StatusOr<PlanHeader> SynthesizeRingHeader(int num_ranks);

// The hierarchical ring (kernels/synth/ring_hierarchical.cc) on `nodes` nodes of `ranks_per_node`
// ranks, numbered node by node: a ring ReduceScatter inside every node, a ring AllReduce along
// every rail (local rank g of every node) on a ranks_per_node-th of the buffer, then a ring
// AllGather inside every node: 2(ranks_per_node - 1) + 2(nodes - 1) rounds, nodes *
// ranks_per_node chunks, variant kHierarchical. With one node, or one rank per node, it is
// SynthesizeRing's flat plan. InvalidArgument for fewer than 2 ranks.
absl::StatusOr<Plan> SynthesizeHierarchicalRing(int nodes, int ranks_per_node);
// Its plan's header, as SynthesizeRingHeader: 285 MB fewer at 512x8.
absl::StatusOr<PlanHeader> SynthesizeHierarchicalRingHeader(int nodes, int ranks_per_node);

// Halving-Doubling (recursive halving ReduceScatter, recursive doubling AllGather) over 2^p chunks,
// p = floor(log2 n): 2p rounds for n = 2^p. Other n fold the n - 2^p extra ranks into partners with
// a half-buffer exchange that splits each pair's data between its two members, so it costs
// 2*ceil(log2 n) rounds and moves 2*s*(1.5 - 1/2^p) bytes per rank (the 3-2 elimination bound).
absl::StatusOr<Plan> SynthesizeHalvingDoubling(int num_ranks);

// StragglAR for any num_ranks >= 2 and straggler in [0, num_ranks): a ring ReduceScatter among the
// n-1 punctual ranks (pre-arrival, n-2 rounds), then the synthesized post-arrival schedule. The
// canonical plan (straggler n-1) is synthesized once per (n, pieces) and cached while it is small
// enough (up to about 1400 ranks); other stragglers relabel it. `pieces` > 1 pipelines it:
// (n-1)*pieces chunks, rank r's block of the ReduceScatter being chunks [r*pieces, (r+1)*pieces),
// and the post-arrival schedule of SynthesizePipelinedPostArrival (InvalidArgument beyond
// kMaxPipelinedPieces chunks).
absl::StatusOr<Plan> SynthesizeStragglar(int num_ranks, int straggler, int pieces = 1);
// SynthesizeStragglar(num_ranks, num_ranks - 1, pieces), the canonical plan, not kept for
// relabelling: for a caller that keeps it and renames it itself (PlanCache), so that a job holds
// it once (84 MB at 1024 ranks), not twice.
absl::StatusOr<Plan> SynthesizeStragglarUnkept(int num_ranks, int pieces = 1);

// Hierarchical StragglAR (kernels/synth/stragglar_hierarchical.cc) on `nodes` nodes of
// `ranks_per_node` ranks, numbered node by node: the straggler's node is the late member of every
// rail, each rail runs StragglAR over nodes on a ranks_per_node-th of the buffer, and the rest
// moves inside nodes. The rail plan is the flat schedule pipelined in `rail_pieces` pieces
// (rail_blocks 0: ranks_per_node * (nodes - 1) * rail_pieces chunks), or log-depth StragglAR in
// `rail_blocks` blocks (ranks_per_node times its chunks). With one node it is SynthesizeStragglar's
// flat plan; with one rank per node, the rail plan. `pieces` > 1 writes it for executors with one
// queue per link class: each shard's hand-out and all-gather move in that many pieces, piece by
// piece, overlapping the rails (slower in the round model). InvalidArgument for fewer than 2
// ranks, a straggler out of range, a bad block count, pieces that do not divide a shard's chunks,
// rail pieces below 1, beyond kMaxPipelinedPieces chunks per rail, or with log-depth rails.
absl::StatusOr<Plan> SynthesizeHierarchicalStragglar(int nodes, int ranks_per_node, int straggler,
                                                     int rail_blocks = 0, int pieces = 1,
                                                     int rail_pieces = 1);
// The same written for per-class queues and timed for them (kernels/synth/queue_order.h): every
// shard handed out and gathered chunk by chunk, the rounds in the order the transfers can start
// on those queues for calls of `timing.bytes`, the straggler's own shard relayed through its
// node-mates. Correct for every size; fastest near the one it is timed for. InvalidArgument as
// above, for a bad timing, or one timed for nodes of another size.
absl::StatusOr<Plan> SynthesizeTimedHierarchicalStragglar(int nodes, int ranks_per_node,
                                                          int straggler, int rail_blocks,
                                                          int rail_pieces,
                                                          const QueueTiming& timing);

// Log-depth StragglAR (kernels/synth/stragglar_log_depth.cc) for large flat rank counts: before the
// straggler arrives the ready ranks run Halving-Doubling among themselves; after, the straggler's
// buffer is broadcast in `blocks` pipelined blocks (a power of two up to kMaxLogDepthBlocks) over a
// circulant pattern, each ready rank adding it once: LogDepthRoundLowerBound rounds at n = 2^q, a
// few more elsewhere. It has max(blocks, bit_floor(n - 1)) chunks. InvalidArgument for fewer than
// 2 ranks, a straggler out of range or a bad block count.
inline constexpr int kMaxLogDepthBlocks = 4096;
absl::StatusOr<Plan> SynthesizeLogDepthStragglar(int num_ranks, int straggler, int blocks);
// K - 1 + ceil(log2 n): no plan finishes its post-arrival phase in less than this many rounds'
// time when each transfer after arrival carries one of K equal blocks (docs/scale-model.md); with
// K = n - 1 it is flat StragglAR's L(n).
int LogDepthRoundLowerBound(int num_ranks, int blocks);

// How many transfers a plan holds, in closed form, so that a caller can refuse a plan that would
// not fit in memory before building it (each costs about 40 bytes; README, "stragglar rounds").
// Ring: exactly 2n(n-1). The flat StragglAR schedule: exactly 2(n-1)^2 in
// one piece, at most that times `pieces` pipelined. The hierarchical ring, and hierarchical
// StragglAR with any rails: at most the hierarchical ring's 2N(N-1)G + 2G(G-1)N for N nodes of G
// ranks, with its rails' part, 2N(N-1)G, times `rail_pieces` for flat rails pipelined in them.
// Log-depth StragglAR and Halving-Doubling hold O(n log n) and are not bounded here.
int64_t RingTransfers(int num_ranks);
int64_t FlatStragglarTransfersBound(int num_ranks, int pieces);
int64_t HierarchicalTransfersBound(int nodes, int ranks_per_node, int rail_pieces = 1);

// Dispatches to the above; `straggler` is required for kStragglar and must be empty otherwise.
absl::StatusOr<Plan> SynthesizePlan(Algorithm algorithm, int num_ranks,
                                    std::optional<int> straggler);

// Appends a ring ReduceScatter over `ring` (ring[i] sends to ring[i+1]) of ring.size() blocks of
// `pieces` adjacent chunks each, which leaves block i (chunks [i*pieces, (i+1)*pieces)) complete at
// ring[i]: ring.size()-1 rounds appended to `plan`.
void AppendRingReduceScatter(const std::vector<int>& ring, Plan& plan, int pieces = 1);

// One step of a ring over `ring` (ring[i] sends to ring[i+1]) whose block i is chunks
// [first_chunk + i*pieces, first_chunk + (i+1)*pieces), appended to `transfers`: step `step` (of
// ring.size() - 1) of the ReduceScatter above, or of the AllGather that starts with block i
// complete at ring[i] and leaves every block everywhere.
void AppendRingReduceScatterStep(absl::Span<const int> ring, int step, int first_chunk, int pieces,
                                 std::vector<Transfer>& transfers);
void AppendRingAllGatherStep(absl::Span<const int> ring, int step, int first_chunk, int pieces,
                             std::vector<Transfer>& transfers);

}  // namespace stragglar
