// The rails hierarchical StragglAR (kernels/synth/stragglar_hierarchical.cc) is priced with, and
// the rule that picks between them: one list and one rule for the plan cache, which the policy
// runs (PlanCache::BestHierarchical), and for `stragglar sim`, which prints what it would pick
// (tools/sim_command.cc), so that the two cannot drift apart.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/synth/queue_order.h"
#include "kernels/synth/stragglar_schedule.h"
#include "policy/model/simulator.h"
#include "policy/model/topology.h"
#include "policy/stragglar_shape.h"

namespace stragglar {

// Flat rails are the flat schedule over the nodes, pipelined in one of these piece counts.
inline constexpr int kRailPieceChoices[] = {1, 2, 4, 8, 16};
// Whether flat rails over `nodes` nodes take `rail_pieces` pieces per chunk: a rail holds at most
// kMaxPipelinedPieces chunks, and one node has no rails to pipeline.
inline bool RailPiecesFit(int nodes, int rail_pieces) {
  return rail_pieces == 1 || (nodes > 1 && (nodes - 1) * rail_pieces <= kMaxPipelinedPieces);
}

// The piece counts worth pricing for hierarchical StragglAR on per-class queues, whose shards
// have `chunks_per_shard` chunks: 2, 4, 8 and 16, while they divide it. More pieces start the
// all-gather inside nodes earlier but cost a latency each.
inline std::vector<int> HierarchicalQueuePieces(int chunks_per_shard) {
  std::vector<int> pieces;
  for (int each = 2; each <= 16 && chunks_per_shard % each == 0; each *= 2) pieces.push_back(each);
  return pieces;
}

// The model's times after the last arrival for the best rails of one kind: with the straggler
// late enough to hide their pre-arrival phase, and as late as the flat rails' pre-arrival phase
// (priced round by round with the ready ranks arriving together), the least delay at which flat
// rails reach their best.
struct RailsAfterArrival {
  double phase_hidden_s = 0;
  double at_flat_phase_s = 0;
};
// Log-depth rails run a whole Halving-Doubling AllReduce among the ready nodes before the
// straggler arrives, where flat rails run a ReduceScatter, the least any plan moves then. So they
// are picked only where they gain more with their phase hidden than they lose with the straggler
// as late as the flat rails' phase (neither the policy nor a forced family knows the delay to
// come), and gain by more than kLogDepthRailsMinGain, the model's error: on 4x2 at 2 MiB,
// log-depth rails priced within 1% of flat rails in 8 pieces took 252 ms two phases late against
// 226 (docs/results/cluster-nodes-rails-2026-11-30.md). On 8x2 at 1 MiB the model priced them 5.5%
// faster with their phase hidden and 2.3x slower one flat phase late; with the straggler 353 ms
// late (twice the benchmark's phase) they took 433 ms against 217-225 for flat rails
// (docs/results/cluster-nodes-8x2-aligned-2026-12-01.md).
inline constexpr double kLogDepthRailsMinGain = 0.05;
inline bool LogDepthRailsWin(const RailsAfterArrival& log_depth, const RailsAfterArrival& flat) {
  const double gain_s = flat.phase_hidden_s - log_depth.phase_hidden_s;
  const double loss_s = log_depth.at_flat_phase_s - flat.at_flat_phase_s;
  return gain_s > kLogDepthRailsMinGain * flat.phase_hidden_s && loss_s < gain_s;
}

// The hierarchical shapes worth pricing on `topology` for a call of `bytes`, by kind of rails.
struct HierarchicalRailShapes {
  // HierarchicalRailBlockChoices' 0, in every kRailPieceChoices count that RailPiecesFit and
  // `flat_rails_fit` accepts; the list ends at the first count refused.
  std::vector<StragglarShape> flat;
  // HierarchicalRailBlockChoices' log-depth blocks (> 0).
  std::vector<StragglarShape> log_depth;
  // `flat_rails_fit`'s refusal, where it refused a count: why the flat list is short or empty.
  absl::Status flat_refusal;
};
// `flat_rails_fit(rail_pieces)` bounds the plan's size where the caller must (`stragglar sim`
// prices up to 4096 ranks); the plan cache accepts every count.
HierarchicalRailShapes RailShapesToPrice(
    const Topology& topology, double bytes, const LinkModel& inter_node,
    absl::FunctionRef<absl::Status(int rail_pieces)> flat_rails_fit);

// The most nodes the plan timed for per-class queues is offered on. At 128x8 and 1 GiB it took
// 5.42 ms after arrival with log-depth rails of 32 blocks against 4.22 ms for the plan in 8 pieces
// (a rank's 224 copies of one chunk each cost 3 us of latency apiece), and the sim priced the
// machine in 7.2 s instead of 0.5 (its list scheduling retimes every copy waiting on a queue each
// time the queue moves); at 64x8 it was still 1.34x NCCL's tree against 1.31x, in 3.0 s.
inline constexpr int kMaxTimedQueueNodes = 64;

// For per-class queues (several nodes of several ranks): appends to `rails` each of its shapes
// again with its shards in each of the HierarchicalQueuePieces of its plan, whose chunk count
// `num_chunks(shape)` gives, and, on at most kMaxTimedQueueNodes nodes, once more timed for those
// queues (every chunk a piece) at QueueTimedBytes(bytes).
absl::Status AddQueuePieces(
    const Topology& topology, double bytes,
    absl::FunctionRef<absl::StatusOr<int>(const StragglarShape&)> num_chunks,
    std::vector<StragglarShape>& rails);

// The size a plan timed for per-class queues is timed at for calls of `bytes`: the power of two at
// or above it, so that a job's many sizes share a few plans (a plan timed for 256 MiB took
// 1.12 ms at 16x8 and 256 MiB, timed for 1 GiB 1.24 ms).
int64_t QueueTimedBytes(double bytes);

// What SynthesizeTimedHierarchicalStragglar times its order with: calls of `bytes` on `topology`'s
// nodes, each class's message cost from its link model.
QueueTiming QueueTimingFor(const Topology& topology, int64_t bytes, const LinkModel& intra_node,
                           const LinkModel& inter_node);

}  // namespace stragglar
