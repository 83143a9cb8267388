#include "policy/hierarchical_rails.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace stragglar {

HierarchicalRailShapes RailShapesToPrice(
    const Topology& topology, double bytes, const LinkModel& inter_node,
    absl::FunctionRef<absl::Status(int rail_pieces)> flat_rails_fit) {
  HierarchicalRailShapes shapes;
  for (int blocks : HierarchicalRailBlockChoices(topology, bytes, inter_node)) {
    if (blocks > 0) {
      shapes.log_depth.push_back({.log_depth_blocks = blocks, .hierarchical = true});
      continue;
    }
    for (int rail_pieces : kRailPieceChoices) {
      if (!RailPiecesFit(topology.nodes, rail_pieces)) break;
      shapes.flat_refusal = flat_rails_fit(rail_pieces);
      if (!shapes.flat_refusal.ok()) break;
      shapes.flat.push_back({.hierarchical = true, .rail_pieces = rail_pieces});
    }
  }
  return shapes;
}

absl::Status AddQueuePieces(
    const Topology& topology, double bytes,
    absl::FunctionRef<absl::StatusOr<int>(const StragglarShape&)> num_chunks,
    std::vector<StragglarShape>& rails) {
  for (size_t i = 0, count = rails.size(); i < count; ++i) {
    absl::StatusOr<int> chunks = num_chunks(rails[i]);
    if (!chunks.ok()) return chunks.status();
    const int chunks_per_shard = *chunks / topology.ranks_per_node;
    for (int pieces : HierarchicalQueuePieces(chunks_per_shard)) {
      StragglarShape in_pieces = rails[i];
      in_pieces.pieces = pieces;
      rails.push_back(in_pieces);
    }
    if (topology.nodes <= kMaxTimedQueueNodes) {
      StragglarShape timed = rails[i];
      timed.pieces = chunks_per_shard;
      timed.queue_timed_bytes = QueueTimedBytes(bytes);
      rails.push_back(timed);
    }
  }
  return absl::OkStatus();
}

int64_t QueueTimedBytes(double bytes) {
  return static_cast<int64_t>(
      std::bit_ceil(static_cast<uint64_t>(std::max(1.0, std::ceil(bytes)))));
}

QueueTiming QueueTimingFor(const Topology& topology, int64_t bytes, const LinkModel& intra_node,
                           const LinkModel& inter_node) {
  return {.bytes = static_cast<double>(bytes),
          .ranks_per_node = topology.ranks_per_node,
          .intra_node = {.alpha_s = intra_node.alpha_s, .seconds_per_byte = intra_node.beta()},
          .inter_node = {.alpha_s = inter_node.alpha_s, .seconds_per_byte = inter_node.beta()}};
}

}  // namespace stragglar
