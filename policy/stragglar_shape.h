// The shape of a StragglAR plan, which the chooser picks per call among those the plan cache
// offers for the size (PlanCache::StragglarShapes): the paper's flat schedule, pipelined in
// `pieces` per chunk; log-depth StragglAR, broadcasting the straggler's buffer in
// `log_depth_blocks` blocks (> 0); or hierarchical StragglAR on the machine's nodes, whose rails
// run the flat schedule pipelined in `rail_pieces` pieces, or log-depth StragglAR in
// `log_depth_blocks` blocks (> 0), and whose shards move inside nodes in `pieces` pieces (> 1: the
// plan written for per-class queues, which the plan cache offers only where the executor runs
// those queues).
#pragma once

#include <vector>

#include "kernels/plan/plan.h"
#include "kernels/synth/stragglar_schedule.h"

namespace stragglar {

struct StragglarShape {
  int pieces = 1;
  int log_depth_blocks = 0;
  bool hierarchical = false;
  int rail_pieces = 1;

  friend bool operator==(const StragglarShape&, const StragglarShape&) = default;
};

// The family a shape belongs to is its plan's variant (kernels/plan/plan.h), which a benchmark can
// force (STRAGGLAR_ALGORITHM=stragglar|stragglar-log-depth|stragglar-hierarchical); the plan
// cache then picks the shape of that family the chooser would price (PlanCache::ShapeOfFamily).
inline PlanVariant FamilyOf(const StragglarShape& shape) {
  if (shape.hierarchical) return PlanVariant::kHierarchical;
  return shape.log_depth_blocks > 0 ? PlanVariant::kLogDepth : PlanVariant::kFlat;
}

// The piece counts worth pricing for hierarchical StragglAR on per-class queues, whose shards
// have `chunks_per_shard` chunks: 2, 4, 8 and 16, while they divide it. More pieces start the
// all-gather inside nodes earlier but cost a latency each.
inline std::vector<int> HierarchicalQueuePieces(int chunks_per_shard) {
  std::vector<int> pieces;
  for (int each = 2; each <= 16 && chunks_per_shard % each == 0; each *= 2) pieces.push_back(each);
  return pieces;
}

// Hierarchical StragglAR's rails (kernels/synth/stragglar_hierarchical.cc) are the flat schedule,
// pipelined in 1, 2, 4, 8 or 16 pieces, unless log-depth rails are faster after arrival by more
// than this fraction. Log-depth rails run a whole Halving-Doubling AllReduce among the ready nodes
// before the straggler arrives, where flat rails run a ReduceScatter, the least any plan moves
// then, and a straggler less late than that phase pays for it: on 4x2 at 2 MiB, 602 ms with nobody
// late against 343 ms for flat rails in 8 pieces, which the model priced within 1% of each other
// after arrival (docs/results/cluster-nodes-rails-2026-11-30.md).
inline constexpr double kLogDepthRailsMinGain = 0.05;
inline constexpr int kRailPieceChoices[] = {1, 2, 4, 8, 16};
// Whether flat rails over `nodes` nodes take `rail_pieces` pieces per chunk: a rail holds at most
// kMaxPipelinedPieces chunks, and one node has no rails to pipeline.
inline bool RailPiecesFit(int nodes, int rail_pieces) {
  return rail_pieces == 1 || (nodes > 1 && (nodes - 1) * rail_pieces <= kMaxPipelinedPieces);
}

}  // namespace stragglar
