// The shape of a StragglAR plan, which the chooser picks per call among those the plan cache
// offers for the size (PlanCache::StragglarShapes): the paper's flat schedule, pipelined in
// `pieces` per chunk; log-depth StragglAR, broadcasting the straggler's buffer in
// `log_depth_blocks` blocks (> 0); or hierarchical StragglAR on the machine's nodes, whose rails
// run the flat schedule, or log-depth StragglAR in `log_depth_blocks` blocks (> 0), and whose
// shards move inside nodes in `pieces` pieces (> 1: the plan written for per-class queues, which
// the plan cache offers only where the executor runs those queues).
#pragma once

#include <vector>

namespace stragglar {

struct StragglarShape {
  int pieces = 1;
  int log_depth_blocks = 0;
  bool hierarchical = false;

  friend bool operator==(const StragglarShape&, const StragglarShape&) = default;
};

// The three plan families a shape belongs to, which a benchmark can force
// (STRAGGLAR_ALGORITHM=stragglar|stragglar-log-depth|stragglar-hierarchical); the plan cache then
// picks the shape of that family the chooser would price (PlanCache::ShapeOfFamily).
enum class StragglarFamily { kFlat, kLogDepth, kHierarchical };

inline StragglarFamily FamilyOf(const StragglarShape& shape) {
  if (shape.hierarchical) return StragglarFamily::kHierarchical;
  return shape.log_depth_blocks > 0 ? StragglarFamily::kLogDepth : StragglarFamily::kFlat;
}

// The piece counts worth pricing for hierarchical StragglAR on per-class queues, whose shards
// have `chunks_per_shard` chunks: 2, 4, 8 and 16, while they divide it. More pieces start the
// all-gather inside nodes earlier but cost a latency each.
inline std::vector<int> HierarchicalQueuePieces(int chunks_per_shard) {
  std::vector<int> pieces;
  for (int each = 2; each <= 16 && chunks_per_shard % each == 0; each *= 2) pieces.push_back(each);
  return pieces;
}

}  // namespace stragglar
