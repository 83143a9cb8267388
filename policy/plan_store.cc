#include "policy/plan_store.h"

#include <algorithm>
#include <vector>

#include "kernels/plan/plan_memo.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {

absl::StatusOr<const Plan*> PlanStore::Get(Algorithm algorithm, std::optional<int> straggler,
                                           const StragglarShape& shape) {
  const Key key = {algorithm, straggler.value_or(-1), shape.pieces, shape.log_depth_blocks,
                   shape.hierarchical};
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  const bool stragglar = algorithm == Algorithm::kStragglar && straggler.has_value();
  const Topology& topology = machine_.topology;
  if (algorithm == Algorithm::kNative) {
    // The library's own AllReduce has no plan of ours: it is priced as Ring's, or on nodes as
    // NCCL's closed form, through a header of its own that no executor ever asks for.
    if (!machine_.native_is_nccl || !topology.multi_node()) {
      return Get(Algorithm::kRing, std::nullopt, {});
    }
    absl::StatusOr<Plan> header = SynthesizeRingPlan(/*with_transfers=*/false);
    if (!header.ok()) return header.status();
    header->algorithm = Algorithm::kNative;
    return &plans_.emplace(key, *std::move(header)).first->second;
  }
  if (algorithm == Algorithm::kRing && !topology.multi_node()) {
    // Priced by its one ring run, without its transfers, which wait for an executor
    // (Materialized).
    absl::StatusOr<Plan> header = SynthesizeRingPlan(/*with_transfers=*/false);
    if (!header.ok()) return header.status();
    return &plans_.emplace(key, *std::move(header)).first->second;
  }
  const int last = num_ranks_ - 1;
  const bool by_renaming = RenamesStragglars(shape);
  const bool on_nodes_by_index =
      stragglar && topology.multi_node() && !shape.hierarchical && !machine_.PricedWithQueues();
  if (stragglar && (by_renaming || on_nodes_by_index) && *straggler >= 0 && *straggler < last) {
    // The plan around the last rank renamed, kept as a header and given its transfers only for an
    // executor (Materialized).
    absl::StatusOr<const Plan*> canonical = Get(algorithm, last, shape);
    if (!canonical.ok()) return canonical.status();
    const Plan* plan = &plans_.emplace(key, HeaderOf(**canonical, *straggler)).first->second;
    const Renamed renamed{.canonical = *canonical,
                          .relabel = shape.hierarchical
                                         ? RankRelabel::KeepingNodes(
                                               topology.nodes, topology.ranks_per_node, *straggler)
                                         : RankRelabel::For(plan->variant, num_ranks_, *straggler)};
    (by_renaming ? renamed_ : indexed_by_renaming_).emplace(plan, renamed);
    return plan;
  }
  absl::StatusOr<Plan> plan = Synthesize(algorithm, straggler, shape);
  if (!plan.ok()) return plan.status();
  Plan& kept = plans_.emplace(key, *std::move(plan)).first->second;
  // On nodes the plans are priced by their index, so their transfers wait for an executor: the
  // hierarchical ring's are 285 MB at 512x8, which a preload running its library's own AllReduce
  // may never read. The index (compact rounds, 6 bytes a transfer against 40) is built first; a
  // plan it cannot hold (a rank over 16 bits) keeps its transfers. Either way before the plan is
  // handed out.
  const bool ring_on_nodes =
      algorithm == Algorithm::kRing && topology.multi_node() && !machine_.PricedWithQueues();
  if (on_nodes_by_index || ring_on_nodes) {
    absl::StatusOr<bool> indexed_alone = index_before_dropping_(kept);
    if (!indexed_alone.ok()) return indexed_alone.status();
    if (*indexed_alone) {
      for (Round& round : kept.rounds) std::vector<Transfer>().swap(round.transfers);
      kept.transfers_elided = true;
    }
  }
  return &kept;
}

absl::StatusOr<Plan> PlanStore::Synthesize(Algorithm algorithm, std::optional<int> straggler,
                                           const StragglarShape& shape) const {
  if (algorithm == Algorithm::kRing) return SynthesizeRingPlan(/*with_transfers=*/true);
  if (algorithm != Algorithm::kStragglar || !straggler.has_value()) {
    return SynthesizePlan(algorithm, num_ranks_, straggler);
  }
  const Topology& topology = machine_.topology;
  if (shape.hierarchical) {
    return SynthesizeHierarchicalStragglar(topology.nodes, topology.ranks_per_node, *straggler,
                                           shape.log_depth_blocks, shape.pieces);
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

Plan PlanStore::HeaderOf(const Plan& canonical, int straggler) {
  return Plan{.algorithm = canonical.algorithm,
              .num_ranks = canonical.num_ranks,
              .num_chunks = canonical.num_chunks,
              .straggler = straggler,
              .pre_arrival_rounds = canonical.pre_arrival_rounds,
              .variant = canonical.variant,
              .rounds = std::vector<Round>(static_cast<size_t>(canonical.num_rounds())),
              .transfers_elided = true};
}

absl::StatusOr<Plan> PlanStore::SynthesizeRingPlan(bool with_transfers) const {
  const Topology& topology = machine_.topology;
  if (!topology.multi_node()) {
    return with_transfers ? SynthesizeRing(num_ranks_) : SynthesizeRingWithoutTransfers(num_ranks_);
  }
  return with_transfers
             ? SynthesizeHierarchicalRing(topology.nodes, topology.ranks_per_node)
             : SynthesizeHierarchicalRingWithoutTransfers(topology.nodes, topology.ranks_per_node);
}

absl::StatusOr<const Plan*> PlanStore::Materialized(const Plan& header) {
  if (!header.transfers_elided) return &header;
  if (auto done = materialized_.find(&header); done != materialized_.end()) return &done->second;
  const auto owned = std::find_if(plans_.begin(), plans_.end(),
                                  [&](const auto& kept) { return &kept.second == &header; });
  if (owned == plans_.end()) {
    return absl::InvalidArgumentError("the plan to materialize is not from this plan cache");
  }
  absl::StatusOr<Plan> whole = WholePlan(owned->first, header);
  if (!whole.ok()) return whole.status();
  return &materialized_.emplace(&header, *std::move(whole)).first->second;
}

absl::StatusOr<Plan> PlanStore::WholePlan(const Key& key, const Plan& header) {
  if (const Renamed* renamed = RenamedOf(header)) {
    return renamed->relabel.Apply(*renamed->canonical);
  }
  const auto& [algorithm, straggler, pieces, blocks, hierarchical] = key;
  const StragglarShape shape{
      .pieces = pieces, .log_depth_blocks = blocks, .hierarchical = hierarchical};
  if (const Renamed* by_index = IndexedByRenaming(header)) {
    // The synthesizer's plan is the canonical one renamed. The canonical plan's transfers were
    // dropped once indexed; unless an executor has asked for it too, it is synthesized again,
    // not kept (84 MB at 1024 ranks), as the synthesizer's plan around this straggler would.
    const Plan& canonical = *by_index->canonical;
    if (!canonical.transfers_elided) return by_index->relabel.Apply(canonical);
    if (auto done = materialized_.find(&canonical); done != materialized_.end()) {
      return by_index->relabel.Apply(done->second);
    }
    absl::StatusOr<Plan> synthesized = Synthesize(algorithm, num_ranks_ - 1, shape);
    if (!synthesized.ok()) return synthesized.status();
    return by_index->relabel.Apply(*std::move(synthesized));
  }
  return Synthesize(algorithm, straggler >= 0 ? std::optional<int>(straggler) : std::nullopt,
                    shape);
}

int64_t PlanStore::kept_transfers() const {
  int64_t transfers = 0;
  for (const auto& [key, plan] : plans_) transfers += TransferCount(plan);
  for (const auto& [header, plan] : materialized_) transfers += TransferCount(plan);
  return transfers;
}

}  // namespace stragglar
