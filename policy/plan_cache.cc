#include "policy/plan_cache.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/synth/stragglar_schedule.h"
#include "policy/hierarchical_rails.h"
#include "policy/model/simulator.h"

namespace stragglar {

absl::StatusOr<const PlanHeader*> PlanCache::ForPlan(Algorithm algorithm,
                                                     std::optional<int> straggler, double bytes,
                                                     const LinkModel& link) {
  if (algorithm != Algorithm::kStragglar) return parts_->store.Get(algorithm, straggler, {});
  if (FlatStragglarTooLarge()) {
    absl::StatusOr<StragglarShape> log_depth = BestLogDepth(bytes, link);
    if (!log_depth.ok()) return log_depth.status();
    return parts_->store.Get(algorithm, straggler, *log_depth);
  }
  absl::StatusOr<int> pieces = StragglarPieces(bytes, link);
  if (!pieces.ok()) return pieces.status();
  return parts_->store.Get(algorithm, straggler, {.pieces = *pieces});
}

absl::StatusOr<PlanCache::ShapeAfterArrival> PlanCache::FastestAfterArrival(
    absl::Span<const StragglarShape> shapes, double bytes, const LinkModel& link) {
  StragglarShape best = shapes.front();
  double best_s = std::numeric_limits<double>::infinity();
  const int straggler = PricedStraggler(link);
  for (const StragglarShape& shape : shapes) {
    absl::StatusOr<const PlanHeader*> plan =
        parts_->store.Get(Algorithm::kStragglar, straggler, shape);
    if (!plan.ok()) return plan.status();
    absl::StatusOr<double> seconds = parts_->pricer.PostArrivalSeconds(**plan, bytes, link);
    if (!seconds.ok()) return seconds.status();
    if (*seconds < best_s) {  // ties keep the earlier
      best_s = *seconds;
      best = shape;
    }
  }
  return ShapeAfterArrival{.shape = best, .seconds = best_s};
}

absl::StatusOr<int> PlanCache::StragglarPieces(double bytes, const LinkModel& link) {
  if (forced_pieces_ > 0) {
    return std::max(1, std::min(forced_pieces_, kMaxPipelinedPieces / std::max(1, num_ranks_ - 1)));
  }
  const LinkKey key = KeyOf(bytes, link);
  if (auto it = pieces_.find(key); it != pieces_.end()) return it->second;
  // Only the rounds after the straggler arrives: the ReduceScatter moves the same bytes in the
  // same messages whatever the depth, and is meant to hide in the straggler's delay.
  std::vector<StragglarShape> flat;
  for (int pieces : {1, 2, 4, 8, 16}) {
    if (pieces > 1 && (num_ranks_ - 1) * pieces > kMaxPipelinedPieces) break;
    flat.push_back({.pieces = pieces});
  }
  absl::StatusOr<ShapeAfterArrival> best = FastestAfterArrival(flat, bytes, link);
  if (!best.ok()) return best.status();
  pieces_.emplace(key, best->shape.pieces);
  return best->shape.pieces;
}

absl::StatusOr<PlanCache::StragglarShape> PlanCache::BestLogDepth(double bytes,
                                                                  const LinkModel& link) {
  std::vector<StragglarShape> log_depth;
  for (int blocks : LogDepthBlockChoices(num_ranks_, bytes, link)) {
    log_depth.push_back({.log_depth_blocks = blocks});
  }
  absl::StatusOr<ShapeAfterArrival> best = FastestAfterArrival(log_depth, bytes, link);
  if (!best.ok()) return best.status();
  return best->shape;
}

absl::StatusOr<PlanCache::StragglarShape> PlanCache::BestHierarchical(double bytes,
                                                                      const LinkModel& link) {
  const Topology& topology = machine().topology;
  HierarchicalRailShapes rails = RailShapesToPrice(topology, bytes, machine().inter_node_link,
                                                   [](int) { return absl::OkStatus(); });
  // On queues, the plan written for them too: each rails with its shards in pieces.
  const auto num_chunks = [&](const StragglarShape& shape) -> absl::StatusOr<int> {
    absl::StatusOr<const PlanHeader*> whole =
        parts_->store.Get(Algorithm::kStragglar, num_ranks_ - 1, shape);
    if (!whole.ok()) return whole.status();
    return (*whole)->num_chunks;
  };
  std::optional<ShapeAfterArrival> best_flat;
  std::optional<ShapeAfterArrival> best_log_depth;
  for (auto [shapes, best] :
       {std::pair{&rails.flat, &best_flat}, {&rails.log_depth, &best_log_depth}}) {
    if (shapes->empty()) continue;
    if (machine().PricedWithQueues()) {
      if (absl::Status added = AddQueuePieces(topology, bytes, num_chunks, *shapes); !added.ok()) {
        return added;
      }
    }
    absl::StatusOr<ShapeAfterArrival> fastest = FastestAfterArrival(*shapes, bytes, link);
    if (!fastest.ok()) return fastest.status();
    *best = *fastest;
  }
  if (!best_log_depth.has_value()) return best_flat->shape;
  if (!best_flat.has_value()) return best_log_depth->shape;
  absl::StatusOr<const PlanHeader*> flat_plan =
      parts_->store.Get(Algorithm::kStragglar, PricedStraggler(link), best_flat->shape);
  if (!flat_plan.ok()) return flat_plan.status();
  absl::StatusOr<double> flat_phase_s = parts_->pricer.PreArrivalSeconds(**flat_plan, bytes, link);
  if (!flat_phase_s.ok()) return flat_phase_s.status();
  absl::StatusOr<double> flat_s = AfterArrivalAt(best_flat->shape, *flat_phase_s, bytes, link);
  if (!flat_s.ok()) return flat_s.status();
  absl::StatusOr<double> log_depth_s =
      AfterArrivalAt(best_log_depth->shape, *flat_phase_s, bytes, link);
  if (!log_depth_s.ok()) return log_depth_s.status();
  return LogDepthRailsWin(
             {.phase_hidden_s = best_log_depth->seconds, .at_flat_phase_s = *log_depth_s},
             {.phase_hidden_s = best_flat->seconds, .at_flat_phase_s = *flat_s})
             ? best_log_depth->shape
             : best_flat->shape;
}

absl::StatusOr<double> PlanCache::AfterArrivalAt(const StragglarShape& shape, double delay_s,
                                                 double bytes, const LinkModel& link) {
  const int straggler = PricedStraggler(link);
  absl::StatusOr<const PlanHeader*> plan =
      parts_->store.Get(Algorithm::kStragglar, straggler, shape);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<SimulationResult> simulated =
      parts_->pricer.Simulate(**plan, bytes, link, OneLateRank(num_ranks_, straggler, delay_s));
  if (!simulated.ok()) return simulated.status();
  return simulated->after_last_arrival_s;
}

absl::StatusOr<std::vector<PlanCache::StragglarShape>> PlanCache::StragglarShapes(
    double bytes, const LinkModel& link) {
  const LinkKey key = KeyOf(bytes, link);
  if (auto it = shapes_.find(key); it != shapes_.end()) return it->second;
  std::vector<StragglarShape> shapes;
  if (!FlatStragglarTooLarge()) {
    absl::StatusOr<int> pieces = StragglarPieces(bytes, link);
    if (!pieces.ok()) return pieces.status();
    shapes.push_back({.pieces = *pieces});
    if (forced_pieces_ > 0) return shapes;
  }
  absl::StatusOr<StragglarShape> best_log_depth = BestLogDepth(bytes, link);
  if (!best_log_depth.ok()) return best_log_depth.status();
  shapes.push_back(*best_log_depth);
  if (machine().topology.multi_node()) {
    absl::StatusOr<StragglarShape> hierarchical = BestHierarchical(bytes, link);
    if (!hierarchical.ok()) return hierarchical.status();
    shapes.push_back(*hierarchical);
  }
  return shapes_.emplace(key, std::move(shapes)).first->second;
}

absl::StatusOr<PlanCache::StragglarShape> PlanCache::ShapeOfFamily(PlanVariant family, double bytes,
                                                                   const LinkModel& link) {
  absl::StatusOr<std::vector<StragglarShape>> shapes = StragglarShapes(bytes, link);
  if (!shapes.ok()) return shapes.status();
  for (const StragglarShape& shape : *shapes) {
    if (FamilyOf(shape) == family) return shape;
  }
  switch (family) {
    case PlanVariant::kLogDepth:
      return BestLogDepth(bytes, link);  // left out of StragglarShapes by forced pieces
    case PlanVariant::kHierarchical:
      if (forced_pieces_ > 0 && machine().topology.multi_node()) {
        // Forced pieces are the rails' (left out of StragglarShapes, as log-depth's), lowered to
        // fit a rail's kMaxPipelinedPieces chunks.
        const int nodes = machine().topology.nodes;
        return StragglarShape{.hierarchical = true,
                              .rail_pieces = std::max(
                                  1, std::min(forced_pieces_, kMaxPipelinedPieces / (nodes - 1)))};
      }
      return absl::FailedPreconditionError(
          "hierarchical StragglAR needs a machine of several nodes (STRAGGLAR_TOPOLOGY=NxG, or "
          "ranks on several hosts)");
    case PlanVariant::kFlat:
      break;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("flat StragglAR is not built above ", kMaxFlatStragglarRanks, " ranks"));
}

}  // namespace stragglar
