#include "policy/plan_store.h"

#include <vector>

#include "kernels/plan/plan_memo.h"
#include "kernels/synth/synthesizers.h"
#include "policy/hierarchical_rails.h"

namespace stragglar {

PlanStore::Kept& PlanStore::Keep(Kept kept) {
  Kept& stored = plans_.emplace(kept.key, std::move(kept)).first->second;
  by_header_.emplace(&stored.header, &stored);
  return stored;
}

absl::StatusOr<const PlanHeader*> PlanStore::Get(Algorithm algorithm, std::optional<int> straggler,
                                                 const StragglarShape& shape) {
  const Key key = {
      algorithm,          straggler.value_or(-1), shape.pieces,           shape.log_depth_blocks,
      shape.hierarchical, shape.rail_pieces,      shape.queue_timed_bytes};
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second.header;
  const bool stragglar = algorithm == Algorithm::kStragglar && straggler.has_value();
  const Topology& topology = machine_.topology;
  if (algorithm == Algorithm::kNative) {
    // The library's own AllReduce has no plan of ours: it is priced as Ring's, or on nodes as
    // NCCL's closed form, through a header of its own that no executor ever asks for.
    if (!machine_.native_is_nccl || !topology.multi_node()) {
      return Get(Algorithm::kRing, std::nullopt, {});
    }
    absl::StatusOr<PlanHeader> header = SynthesizeRingPlanHeader();
    if (!header.ok()) return header.status();
    header->algorithm = Algorithm::kNative;
    return &Keep({.key = key, .header = *header}).header;
  }
  if (algorithm == Algorithm::kRing && !topology.multi_node()) {
    // Priced by its one ring run, without its transfers, which wait for an executor
    // (Materialized).
    absl::StatusOr<PlanHeader> header = SynthesizeRingPlanHeader();
    if (!header.ok()) return header.status();
    return &Keep({.key = key, .header = *header}).header;
  }
  const int last = num_ranks_ - 1;
  const bool by_renaming = RenamesStragglars(shape);
  const bool on_nodes_by_index =
      stragglar && topology.multi_node() && !shape.hierarchical && !machine_.PricedWithQueues();
  if (stragglar && (by_renaming || on_nodes_by_index) && *straggler >= 0 && *straggler < last) {
    // The plan around the last rank renamed, kept as a header and given its transfers only for an
    // executor (Materialized).
    absl::StatusOr<const PlanHeader*> canonical = Get(algorithm, last, shape);
    if (!canonical.ok()) return canonical.status();
    PlanHeader header = **canonical;
    header.straggler = *straggler;
    const PlanHeader* kept = &Keep({.key = key, .header = header}).header;
    const Renamed renamed{.canonical = *canonical,
                          .relabel = shape.hierarchical
                                         ? RankRelabel::KeepingNodes(
                                               topology.nodes, topology.ranks_per_node, *straggler)
                                         : RankRelabel::For(kept->variant, num_ranks_, *straggler)};
    (by_renaming ? renamed_ : indexed_by_renaming_).emplace(kept, renamed);
    return kept;
  }
  absl::StatusOr<Plan> plan = Synthesize(algorithm, straggler, shape);
  if (!plan.ok()) return plan.status();
  const PlanHeader header = HeaderOf(*plan);
  // On nodes the plans are priced by their index, so their transfers wait for an executor: the
  // hierarchical ring's are 285 MB at 512x8, which a preload running its library's own AllReduce
  // may never read. The index (compact rounds, 6 bytes a transfer against 40) is built first, by
  // the header's address; a plan it cannot hold (a rank over 16 bits) keeps its transfers. Either
  // way before the plan is handed out.
  const bool ring_on_nodes =
      algorithm == Algorithm::kRing && topology.multi_node() && !machine_.PricedWithQueues();
  Kept& kept = Keep({.key = key, .header = header, .plan = *std::move(plan)});
  if (on_nodes_by_index || ring_on_nodes) {
    absl::StatusOr<bool> indexed_alone = index_before_dropping_(kept.header, *kept.plan);
    if (!indexed_alone.ok()) return indexed_alone.status();
    if (*indexed_alone) kept.plan.reset();
  }
  return &kept.header;
}

const Plan* PlanStore::TransfersOf(const PlanHeader& header) const {
  auto it = by_header_.find(&header);
  if (it == by_header_.end() || !it->second->plan.has_value()) return nullptr;
  return &*it->second->plan;
}

absl::StatusOr<Plan> PlanStore::Synthesize(Algorithm algorithm, std::optional<int> straggler,
                                           const StragglarShape& shape) const {
  if (algorithm == Algorithm::kRing) return SynthesizeRingPlan();
  if (algorithm != Algorithm::kStragglar || !straggler.has_value()) {
    return SynthesizePlan(algorithm, num_ranks_, straggler);
  }
  const Topology& topology = machine_.topology;
  if (shape.hierarchical && shape.queue_timed_bytes > 0) {
    return SynthesizeTimedHierarchicalStragglar(
        topology.nodes, topology.ranks_per_node, *straggler, shape.log_depth_blocks,
        shape.rail_pieces,
        QueueTimingFor(topology, shape.queue_timed_bytes, machine_.intra_node_link,
                       machine_.inter_node_link));
  }
  if (shape.hierarchical) {
    return SynthesizeHierarchicalStragglar(topology.nodes, topology.ranks_per_node, *straggler,
                                           shape.log_depth_blocks, shape.pieces, shape.rail_pieces);
  }
  if (shape.log_depth_blocks > 0) {
    return SynthesizeLogDepthStragglar(num_ranks_, *straggler, shape.log_depth_blocks);
  }
  if (*straggler == num_ranks_ - 1) {
    // The others are this plan renamed, or priced by its index renamed: the synthesizer need not
    // keep a copy.
    return SynthesizeStragglarUnkept(num_ranks_, shape.pieces);
  }
  return SynthesizeStragglar(num_ranks_, *straggler, shape.pieces);
}

absl::StatusOr<Plan> PlanStore::SynthesizeRingPlan() const {
  const Topology& topology = machine_.topology;
  if (!topology.multi_node()) return SynthesizeRing(num_ranks_);
  return SynthesizeHierarchicalRing(topology.nodes, topology.ranks_per_node);
}

absl::StatusOr<PlanHeader> PlanStore::SynthesizeRingPlanHeader() const {
  const Topology& topology = machine_.topology;
  if (!topology.multi_node()) return SynthesizeRingHeader(num_ranks_);
  return SynthesizeHierarchicalRingHeader(topology.nodes, topology.ranks_per_node);
}

absl::StatusOr<const Plan*> PlanStore::Materialized(const PlanHeader& header) {
  auto owned = by_header_.find(&header);
  if (owned == by_header_.end()) {
    return absl::InvalidArgumentError("the plan to materialize is not from this plan cache");
  }
  const Kept& kept = *owned->second;
  if (kept.plan.has_value()) return &*kept.plan;
  if (auto done = materialized_.find(&header); done != materialized_.end()) return &done->second;
  absl::StatusOr<Plan> whole = WholePlan(kept);
  if (!whole.ok()) return whole.status();
  return &materialized_.emplace(&header, *std::move(whole)).first->second;
}

const Plan* PlanStore::CanonicalTransfers(const Renamed& renamed) const {
  if (const Plan* kept = TransfersOf(*renamed.canonical)) return kept;
  auto done = materialized_.find(renamed.canonical);
  return done == materialized_.end() ? nullptr : &done->second;
}

absl::StatusOr<Plan> PlanStore::WholePlan(const Kept& kept) {
  const auto& [algorithm, straggler, pieces, blocks, hierarchical, rail_pieces, timed_bytes] =
      kept.key;
  const StragglarShape shape{.pieces = pieces,
                             .log_depth_blocks = blocks,
                             .hierarchical = hierarchical,
                             .rail_pieces = rail_pieces,
                             .queue_timed_bytes = timed_bytes};
  const Renamed* renamed = RenamedOf(kept.header);
  if (renamed == nullptr) renamed = IndexedByRenaming(kept.header);
  if (renamed != nullptr) {
    // Its canonical plan renamed: the synthesizer's own plan around this straggler, but for
    // hierarchical StragglAR on nodes, renamed keeping nodes. Where the canonical plan's transfers
    // were dropped once indexed (on nodes, priced by index) and no executor has asked for it, it
    // is synthesized again, not kept (84 MB at 1024 ranks).
    if (const Plan* canonical = CanonicalTransfers(*renamed)) {
      return renamed->relabel.Apply(*canonical);
    }
    absl::StatusOr<Plan> synthesized = Synthesize(algorithm, num_ranks_ - 1, shape);
    if (!synthesized.ok()) return synthesized.status();
    return renamed->relabel.Apply(*std::move(synthesized));
  }
  return Synthesize(algorithm, straggler >= 0 ? std::optional<int>(straggler) : std::nullopt,
                    shape);
}

int64_t PlanStore::kept_transfers() const {
  int64_t transfers = 0;
  for (const auto& [key, kept] : plans_) {
    if (kept.plan.has_value()) transfers += TransferCount(*kept.plan);
  }
  for (const auto& [header, plan] : materialized_) transfers += TransferCount(plan);
  return transfers;
}

}  // namespace stragglar
