#include "policy/hierarchical_rails.h"

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
    const Topology& topology,
    absl::FunctionRef<absl::StatusOr<int>(const StragglarShape&)> num_chunks,
    std::vector<StragglarShape>& rails) {
  for (size_t i = 0, count = rails.size(); i < count; ++i) {
    absl::StatusOr<int> chunks = num_chunks(rails[i]);
    if (!chunks.ok()) return chunks.status();
    for (int pieces : HierarchicalQueuePieces(*chunks / topology.ranks_per_node)) {
      StragglarShape in_pieces = rails[i];
      in_pieces.pieces = pieces;
      rails.push_back(in_pieces);
    }
  }
  return absl::OkStatus();
}

}  // namespace stragglar
