// The shape of a StragglAR plan, which the chooser picks per call among those the plan cache
// offers for the size (PlanCache::StragglarShapes): the paper's flat schedule, pipelined in
// `pieces` per chunk; log-depth StragglAR, broadcasting the straggler's buffer in
// `log_depth_blocks` blocks (> 0); or hierarchical StragglAR on the machine's nodes, whose rails
// run the flat schedule pipelined in `rail_pieces` pieces, or log-depth StragglAR in
// `log_depth_blocks` blocks (> 0), and whose shards move inside nodes in `pieces` pieces (> 1: the
// plan written for per-class queues, which the plan cache offers only where the executor runs
// those queues). `queue_timed_bytes` > 0: that plan timed for per-class queues at calls of this
// size (SynthesizeTimedHierarchicalStragglar), shards moved chunk by chunk.
#pragma once

#include <cstdint>

#include "kernels/plan/plan.h"

namespace stragglar {

struct StragglarShape {
  int pieces = 1;
  int log_depth_blocks = 0;
  bool hierarchical = false;
  int rail_pieces = 1;
  int64_t queue_timed_bytes = 0;

  friend bool operator==(const StragglarShape&, const StragglarShape&) = default;
};

// The family a shape belongs to is its plan's variant (kernels/plan/plan.h), which a benchmark can
// force (STRAGGLAR_ALGORITHM=stragglar|stragglar-log-depth|stragglar-hierarchical); the plan
// cache then picks the shape of that family the chooser would price (PlanCache::ShapeOfFamily).
inline PlanVariant FamilyOf(const StragglarShape& shape) {
  if (shape.hierarchical) return PlanVariant::kHierarchical;
  return shape.log_depth_blocks > 0 ? PlanVariant::kLogDepth : PlanVariant::kFlat;
}

}  // namespace stragglar
