// The shape of a StragglAR plan, which the chooser picks per call among those the plan cache
// offers for the size (PlanCache::StragglarShapes): the paper's flat schedule, pipelined in
// `pieces` per chunk; log-depth StragglAR, broadcasting the straggler's buffer in
// `log_depth_blocks` blocks (> 0); or hierarchical StragglAR on the machine's nodes, whose rails
// run the flat schedule, or log-depth StragglAR in `log_depth_blocks` blocks (> 0), and whose
// shards move inside nodes in `pieces` pieces (> 1: the plan written for per-class queues, which
// the plan cache does not offer while executors run rounds).
#pragma once

namespace stragglar {

struct StragglarShape {
  int pieces = 1;
  int log_depth_blocks = 0;
  bool hierarchical = false;

  friend bool operator==(const StragglarShape&, const StragglarShape&) = default;
};

}  // namespace stragglar
