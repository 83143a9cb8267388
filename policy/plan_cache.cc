#include "policy/plan_cache.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/plan/plan_memo.h"
#include "kernels/synth/stragglar_schedule.h"
#include "kernels/synth/synthesizers.h"
#include "policy/nccl_models.h"
#include "policy/queue_simulator.h"

namespace stragglar {
namespace {}  // namespace

absl::StatusOr<CalibrationRegime> RegimeFromPhase(
    const Plan& plan, absl::Span<const double> arrival_s,
    absl::FunctionRef<absl::StatusOr<bool>(double gap_s)> gap_hides_phase) {
  if (!plan.straggler.has_value() || plan.pre_arrival_rounds == 0 ||
      arrival_s.size() != static_cast<size_t>(plan.num_ranks)) {
    return CalibrationRegime::kPhaseExposed;
  }
  const int straggler = *plan.straggler;
  double latest_other_s = -std::numeric_limits<double>::infinity();
  for (int r = 0; r < plan.num_ranks; ++r) {
    if (r != straggler) latest_other_s = std::max(latest_other_s, arrival_s[r]);
  }
  const double gap_s = arrival_s[straggler] - latest_other_s;
  if (!(gap_s > 0)) return CalibrationRegime::kPhaseExposed;
  absl::StatusOr<bool> hidden = gap_hides_phase(gap_s);
  if (!hidden.ok()) return hidden.status();
  return *hidden ? CalibrationRegime::kPhaseHidden : CalibrationRegime::kPhaseExposed;
}

absl::StatusOr<const Plan*> PlanCache::WithPiecesPlan(Algorithm algorithm,
                                                      std::optional<int> straggler, int pieces) {
  return WithShapePlan(algorithm, straggler, {.pieces = pieces});
}

absl::StatusOr<const Plan*> PlanCache::WithShapePlan(Algorithm algorithm,
                                                     std::optional<int> straggler,
                                                     const StragglarShape& shape) {
  const PlanKey key = {algorithm, straggler.value_or(-1), shape.pieces, shape.log_depth_blocks,
                       shape.hierarchical};
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  const bool stragglar = algorithm == Algorithm::kStragglar && straggler.has_value();
  const Topology& topology = machine_.topology;
  if (algorithm == Algorithm::kNative) {
    // The library's own AllReduce has no plan of ours: it is priced as Ring's, or on nodes as
    // NCCL's closed form, through a header of its own that no executor ever asks for.
    if (!machine_.native_is_nccl || !topology.multi_node()) {
      return WithShapePlan(Algorithm::kRing, std::nullopt, {});
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
    const Plan* plan = &plans_.emplace(key, *std::move(header)).first->second;
    indexes_.emplace(plan, SimulationIndex{.ring_runs = RingRunsOfRing(num_ranks_)});
    return plan;
  }
  const int last = num_ranks_ - 1;
  const bool by_renaming = RenamesStragglars(shape);
  const bool on_nodes_by_index =
      stragglar && topology.multi_node() && !shape.hierarchical && !PricedWithQueues();
  if (stragglar && (by_renaming || on_nodes_by_index) && *straggler >= 0 && *straggler < last) {
    // The plan around the last rank renamed (kernels/plan/rank_relabel.h), kept as a header and
    // given its transfers only for an executor (Materialized). Priced through that plan where
    // renaming keeps the costs (renamed_: one machine; hierarchical StragglAR on nodes, renamed
    // keeping nodes). On nodes the flat and log-depth plans are the synthesizer's, which rename
    // that plan but cost otherwise: priced exactly by its index with the ranks renamed as it is
    // simulated (indexed_by_renaming_, SimulatePartOn).
    absl::StatusOr<const Plan*> canonical = WithShapePlan(algorithm, last, shape);
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
  // hierarchical ring's are 285 MB at 512x8, which a preload running its library's own
  // AllReduce may never read.
  const bool ring_on_nodes =
      algorithm == Algorithm::kRing && topology.multi_node() && !PricedWithQueues();
  if (on_nodes_by_index || ring_on_nodes) {
    if (absl::Status status = ElideAfterIndexing(kept); !status.ok()) return status;
  }
  return &kept;
}

bool PlanCache::RenamesStragglars(const StragglarShape& shape) const {
  return machine_.topology.multi_node() == shape.hierarchical;
}

absl::StatusOr<Plan> PlanCache::Synthesize(Algorithm algorithm, std::optional<int> straggler,
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

Plan PlanCache::HeaderOf(const Plan& canonical, int straggler) {
  return Plan{.algorithm = canonical.algorithm,
              .num_ranks = canonical.num_ranks,
              .num_chunks = canonical.num_chunks,
              .straggler = straggler,
              .pre_arrival_rounds = canonical.pre_arrival_rounds,
              .variant = canonical.variant,
              .rounds = std::vector<Round>(static_cast<size_t>(canonical.num_rounds())),
              .transfers_elided = true};
}

absl::Status PlanCache::ElideAfterIndexing(Plan& plan) {
  absl::StatusOr<const SimulationIndex*> index = IndexOf(plan);
  if (!index.ok()) return index.status();
  if (!(*index)->compact.has_value()) return absl::OkStatus();  // a rank over 16 bits: keep it
  for (Round& round : plan.rounds) std::vector<Transfer>().swap(round.transfers);
  plan.transfers_elided = true;
  return absl::OkStatus();
}

absl::StatusOr<Plan> PlanCache::SynthesizeRingPlan(bool with_transfers) const {
  const Topology& topology = machine_.topology;
  if (!topology.multi_node()) {
    return with_transfers ? SynthesizeRing(num_ranks_) : SynthesizeRingWithoutTransfers(num_ranks_);
  }
  return with_transfers
             ? SynthesizeHierarchicalRing(topology.nodes, topology.ranks_per_node)
             : SynthesizeHierarchicalRingWithoutTransfers(topology.nodes, topology.ranks_per_node);
}

absl::StatusOr<const Plan*> PlanCache::MaterializedPlan(const Plan& plan) {
  if (!plan.transfers_elided) return &plan;
  if (auto done = materialized_.find(&plan); done != materialized_.end()) return &done->second;
  const auto owned = std::find_if(plans_.begin(), plans_.end(),
                                  [&](const auto& kept) { return &kept.second == &plan; });
  if (owned == plans_.end()) {
    return absl::InvalidArgumentError("the plan to materialize is not from this plan cache");
  }
  absl::StatusOr<Plan> whole = WholePlan(owned->first, plan);
  if (!whole.ok()) return whole.status();
  return &materialized_.emplace(&plan, *std::move(whole)).first->second;
}

absl::StatusOr<Plan> PlanCache::WholePlan(const PlanKey& key, const Plan& header) {
  if (const Renamed* renamed = RenamedOf(header)) {
    return renamed->relabel.Apply(*renamed->canonical);
  }
  const auto& [algorithm, straggler, pieces, blocks, hierarchical] = key;
  const StragglarShape shape{
      .pieces = pieces, .log_depth_blocks = blocks, .hierarchical = hierarchical};
  if (auto by_index = indexed_by_renaming_.find(&header); by_index != indexed_by_renaming_.end()) {
    // The synthesizer's plan is the canonical one renamed. The canonical plan's transfers were
    // dropped once indexed; unless an executor has asked for it too, it is synthesized again,
    // not kept (84 MB at 1024 ranks), as the synthesizer's plan around this straggler would.
    const RankRelabel& relabel = by_index->second.relabel;
    const Plan& canonical = *by_index->second.canonical;
    if (!canonical.transfers_elided) return relabel.Apply(canonical);
    if (auto done = materialized_.find(&canonical); done != materialized_.end()) {
      return relabel.Apply(done->second);
    }
    absl::StatusOr<Plan> synthesized = Synthesize(algorithm, num_ranks_ - 1, shape);
    if (!synthesized.ok()) return synthesized.status();
    return relabel.Apply(*std::move(synthesized));
  }
  return Synthesize(algorithm, straggler >= 0 ? std::optional<int>(straggler) : std::nullopt,
                    shape);
}

absl::StatusOr<const Plan*> PlanCache::ForPlan(Algorithm algorithm, std::optional<int> straggler,
                                               double bytes, const LinkModel& link) {
  if (algorithm != Algorithm::kStragglar) return WithShapePlan(algorithm, straggler, {});
  if (FlatStragglarTooLarge()) {
    absl::StatusOr<StragglarShape> log_depth = BestLogDepth(bytes, link);
    if (!log_depth.ok()) return log_depth.status();
    return WithShapePlan(algorithm, straggler, *log_depth);
  }
  absl::StatusOr<int> pieces = StragglarPieces(bytes, link);
  if (!pieces.ok()) return pieces.status();
  return WithShapePlan(algorithm, straggler, {.pieces = *pieces});
}

absl::StatusOr<double> PlanCache::PostArrivalSeconds(const Plan& plan, double bytes,
                                                     const LinkModel& link) {
  if (const Renamed* renamed = RenamedOf(plan)) {
    return PostArrivalSeconds(*renamed->canonical, bytes, link);  // every rank alike
  }
  if (PricedWithQueues()) {
    // Later than the pre-arrival rounds take round by round, which queues never make longer.
    absl::StatusOr<SimulationResult> together =
        SimulatePartOf(plan, 0, plan.num_rounds(), bytes, link,
                       std::vector<double>(static_cast<size_t>(num_ranks_), 0.0));
    if (!together.ok()) return together.status();
    std::vector<double> arrival_s(static_cast<size_t>(num_ranks_), 0.0);
    if (plan.straggler.has_value()) arrival_s[*plan.straggler] = 2 * together->completion_s + 1e-3;
    absl::StatusOr<SimulationResult> late =
        SimulatePlanWithQueues(plan, bytes, NetworkOf(link), arrival_s);
    if (!late.ok()) return late.status();
    return late->after_last_arrival_s;
  }
  absl::StatusOr<SimulationResult> simulated =
      SimulatePartOf(plan, plan.pre_arrival_rounds, plan.num_rounds(), bytes, link,
                     std::vector<double>(static_cast<size_t>(num_ranks_), 0.0));
  if (!simulated.ok()) return simulated.status();
  return simulated->completion_s;
}

absl::StatusOr<PlanCache::StragglarShape> PlanCache::FastestAfterArrival(
    absl::Span<const StragglarShape> shapes, double bytes, const LinkModel& link) {
  StragglarShape best = shapes.front();
  double best_s = std::numeric_limits<double>::infinity();
  for (const StragglarShape& shape : shapes) {
    absl::StatusOr<const Plan*> plan = WithShapePlan(Algorithm::kStragglar, num_ranks_ - 1, shape);
    if (!plan.ok()) return plan.status();
    absl::StatusOr<double> seconds = PostArrivalSeconds(**plan, bytes, link);
    if (!seconds.ok()) return seconds.status();
    if (*seconds < best_s) {  // ties keep the earlier
      best_s = *seconds;
      best = shape;
    }
  }
  return best;
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
  absl::StatusOr<StragglarShape> best = FastestAfterArrival(flat, bytes, link);
  if (!best.ok()) return best.status();
  pieces_.emplace(key, best->pieces);
  return best->pieces;
}

absl::StatusOr<PlanCache::StragglarShape> PlanCache::BestLogDepth(double bytes,
                                                                  const LinkModel& link) {
  std::vector<StragglarShape> log_depth;
  for (int blocks : LogDepthBlockChoices(num_ranks_, bytes, link)) {
    log_depth.push_back({.log_depth_blocks = blocks});
  }
  return FastestAfterArrival(log_depth, bytes, link);
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
  if (machine_.topology.multi_node()) {
    // Hierarchical StragglAR with the better rails after arrival: the flat schedule over the
    // nodes (up to kMaxFlatRailNodes), or log-depth StragglAR with the block counts worth pricing
    // for a rail's shard.
    const Topology& topology = machine_.topology;
    std::vector<StragglarShape> hierarchical;
    for (int blocks : HierarchicalRailBlockChoices(topology, bytes, machine_.inter_node_link)) {
      hierarchical.push_back({.log_depth_blocks = blocks, .hierarchical = true});
    }
    // On queues, the plan written for them too: each of those rails with its shards in pieces
    // (the counts that divide a shard's chunks).
    for (size_t i = 0, rails = hierarchical.size(); PricedWithQueues() && i < rails; ++i) {
      absl::StatusOr<const Plan*> whole =
          WithShapePlan(Algorithm::kStragglar, num_ranks_ - 1, hierarchical[i]);
      if (!whole.ok()) return whole.status();
      const int shard_chunks = (*whole)->num_chunks / topology.ranks_per_node;
      for (int pieces : HierarchicalQueuePieces(shard_chunks)) {
        hierarchical.push_back({.pieces = pieces,
                                .log_depth_blocks = hierarchical[i].log_depth_blocks,
                                .hierarchical = true});
      }
    }
    absl::StatusOr<StragglarShape> best_hierarchical =
        FastestAfterArrival(hierarchical, bytes, link);
    if (!best_hierarchical.ok()) return best_hierarchical.status();
    shapes.push_back(*best_hierarchical);
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
      return absl::FailedPreconditionError(
          "hierarchical StragglAR needs a machine of several nodes (STRAGGLAR_TOPOLOGY=NxG, or "
          "ranks on several hosts)");
    case PlanVariant::kFlat:
      break;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("flat StragglAR is not built above ", kMaxFlatStragglarRanks, " ranks"));
}

absl::StatusOr<double> PlanCache::PreArrivalSecondsOf(const Plan& plan, double bytes,
                                                      const LinkModel& link) {
  if (plan.pre_arrival_rounds == 0) return 0.0;
  if (const Renamed* renamed = RenamedOf(plan)) {
    return PreArrivalSecondsOf(*renamed->canonical, bytes, link);  // every rank alike
  }
  const std::pair<const Plan*, LinkKey> key = {&plan, KeyOf(bytes, link)};
  if (auto it = pre_arrival_s_.find(key); it != pre_arrival_s_.end()) return it->second;
  absl::StatusOr<SimulationResult> simulated =
      SimulatePartOf(plan, 0, plan.pre_arrival_rounds, bytes, link,
                     std::vector<double>(static_cast<size_t>(plan.num_ranks), 0.0));
  if (!simulated.ok()) return simulated.status();
  pre_arrival_s_.emplace(key, simulated->completion_s);
  return simulated->completion_s;
}

absl::StatusOr<const PlanCache::PostArrivalProfile*> PlanCache::ProfileOf(const Plan& plan,
                                                                          double bytes,
                                                                          const LinkModel& link) {
  const std::pair<const Plan*, LinkKey> key = {&plan, KeyOf(bytes, link)};
  if (auto it = post_arrival_.find(key); it != post_arrival_.end()) return &it->second;
  const int straggler = *plan.straggler;
  // The ready ranks' pattern of leaving the pre-arrival rounds when they arrive together, from the
  // first to leave.
  const std::vector<double> zeros(static_cast<size_t>(plan.num_ranks), 0.0);
  absl::StatusOr<SimulationResult> pre =
      SimulatePartOf(plan, 0, plan.pre_arrival_rounds, bytes, link, zeros);
  if (!pre.ok()) return pre.status();
  std::vector<double> pattern = std::move(pre->finish_s);
  pattern[straggler] = std::numeric_limits<double>::infinity();
  const double first_s = *std::min_element(pattern.begin(), pattern.end());
  for (double& leave_s : pattern) leave_s -= first_s;
  pattern[straggler] = 0;
  // The two sides' paths apart, in one pass: the ready ranks from the pattern, the straggler from
  // 0.
  absl::StatusOr<std::array<std::vector<double>, 2>> paths =
      PathsFromReadyAndStraggler(plan, bytes, NetworkOf(link), pattern);
  if (!paths.ok()) return paths.status();
  PostArrivalProfile profile{.ready_leave_s = std::move(pattern),
                             .from_ready_s = std::move((*paths)[0]),
                             .from_straggler_s = std::move((*paths)[1])};
  return &post_arrival_.emplace(key, std::move(profile)).first->second;
}

absl::StatusOr<std::array<std::vector<double>, 2>> PlanCache::PathsFromReadyAndStraggler(
    const Plan& plan, double bytes, const NetworkModel& network,
    absl::Span<const double> ready_start_s) {
  constexpr double kNoPath = -std::numeric_limits<double>::infinity();
  const int straggler = *plan.straggler;
  std::vector<double> from_ready(ready_start_s.begin(), ready_start_s.end());
  from_ready[straggler] = kNoPath;
  std::vector<double> from_straggler(static_cast<size_t>(plan.num_ranks), kNoPath);
  from_straggler[straggler] = 0;
  absl::StatusOr<Indexed> indexed = IndexedFor(plan);
  if (!indexed.ok()) return indexed.status();
  if (!indexed->names.empty()) ++renamed_simulations_;
  return SimulateFromTwoStarts(*indexed->plan, indexed->index->ring_runs, indexed->compact(),
                               indexed->names, plan.pre_arrival_rounds, plan.num_rounds(), bytes,
                               network, {from_ready, from_straggler});
}

absl::StatusOr<SimulationResult> PlanCache::SimulatePlanOf(const Plan& plan, double bytes,
                                                           const LinkModel& link,
                                                           absl::Span<const double> arrival_s) {
  if (const Renamed* renamed = RenamedOf(plan)) {
    return renamed->FromCanonical(
        SimulatePlanOf(*renamed->canonical, bytes, link, renamed->relabel.ToCanonical(arrival_s)));
  }
  ++simulate_calls_;
  // Only a header of native's on nodes with Machine::native_is_nccl has native as its algorithm.
  if (plan.algorithm == Algorithm::kNative) return NcclRing(bytes, link, arrival_s);
  if (PricedWithQueues()) return SimulatePlanWithQueues(plan, bytes, NetworkOf(link), arrival_s);
  if (plan.algorithm != Algorithm::kStragglar || !plan.straggler.has_value() ||
      plan.pre_arrival_rounds == 0 || arrival_s.size() != static_cast<size_t>(plan.num_ranks)) {
    return SimulatePartOf(plan, 0, plan.num_rounds(), bytes, link, arrival_s);
  }
  absl::StatusOr<SimulationResult> pre =
      SimulatePartOf(plan, 0, plan.pre_arrival_rounds, bytes, link, arrival_s);
  if (!pre.ok()) return pre.status();
  absl::StatusOr<const PostArrivalProfile*> profile = ProfileOf(plan, bytes, link);
  if (!profile.ok()) return profile.status();
  const std::vector<double>& pattern = (*profile)->ready_leave_s;
  const int straggler = *plan.straggler;
  const double arrives_s = pre->finish_s[straggler];  // it has no pre-arrival transfer
  const int first_ready = straggler == 0 ? 1 : 0;
  const double ready_s = pre->finish_s[first_ready] - pattern[first_ready];
  // The ready ranks leave at most `latest_shift_s` after their pattern, at least
  // `earliest_shift_s`.
  double earliest_shift_s = ready_s, latest_shift_s = ready_s;
  for (int r = 0; r < plan.num_ranks; ++r) {
    if (r == straggler) continue;
    earliest_shift_s = std::min(earliest_shift_s, pre->finish_s[r] - pattern[r]);
    latest_shift_s = std::max(latest_shift_s, pre->finish_s[r] - pattern[r]);
  }
  SimulationResult result{.finish_s = std::vector<double>(arrival_s.size())};
  // Rounding aside, the ready ranks leave in the pattern they leave in when together: each rank
  // finishes at the later of the two sides' paths.
  const bool in_pattern =
      latest_shift_s - earliest_shift_s <= kPatternTolerance * std::abs(ready_s);
  for (size_t r = 0; r < arrival_s.size(); ++r) {
    const double from_straggler_s = arrives_s + (*profile)->from_straggler_s[r];
    const double from_ready_s =
        (in_pattern ? ready_s : latest_shift_s) + (*profile)->from_ready_s[r];
    // Apart, the ready ranks' side is at most from_ready_s (the map is monotonic): it is exact
    // only where the straggler's side is later anyway.
    if (!in_pattern && from_straggler_s < from_ready_s) {
      return SimulatePartOf(plan, 0, plan.num_rounds(), bytes, link, arrival_s);
    }
    result.finish_s[r] = std::max(from_ready_s, from_straggler_s);
  }
  ++closed_form_calls_;
  const double last_finish_s = *std::max_element(result.finish_s.begin(), result.finish_s.end());
  result.completion_s = last_finish_s - *std::min_element(arrival_s.begin(), arrival_s.end());
  result.after_last_arrival_s =
      last_finish_s - *std::max_element(arrival_s.begin(), arrival_s.end());
  return result;
}

absl::StatusOr<double> PlanCache::AfterLastArrivalAtLeastOf(const Plan& plan, double bytes,
                                                            const LinkModel& link,
                                                            absl::Span<const double> arrival_s) {
  if (arrival_s.size() != static_cast<size_t>(plan.num_ranks) || arrival_s.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("simulation needs ", plan.num_ranks,
                                                   " arrival times, got ", arrival_s.size()));
  }
  if (plan.algorithm != Algorithm::kStragglar || !plan.straggler.has_value() ||
      plan.pre_arrival_rounds == 0 || PricedWithQueues()) {
    return 0.0;
  }
  if (const Renamed* renamed = RenamedOf(plan)) {
    return AfterLastArrivalAtLeastOf(*renamed->canonical, bytes, link,
                                     renamed->relabel.ToCanonical(arrival_s));
  }
  double straggler_path_s = 0;
  auto renamed = indexed_by_renaming_.find(&plan);
  if (renamed != indexed_by_renaming_.end() &&
      !post_arrival_.contains({&plan, KeyOf(bytes, link)})) {
    // Its own profile would simulate it three times; the bound on every
    // renamed plan is found once.
    absl::StatusOr<const RenamingBounds*> bounds =
        RenamingBoundsOf(*renamed->second.canonical, bytes, link);
    if (!bounds.ok()) return bounds.status();
    straggler_path_s = (*bounds)->straggler_path_at_least_s;
  } else {
    absl::StatusOr<const PostArrivalProfile*> profile = ProfileOf(plan, bytes, link);
    if (!profile.ok()) return profile.status();
    const std::vector<double>& from_straggler_s = (*profile)->from_straggler_s;
    straggler_path_s = *std::max_element(from_straggler_s.begin(), from_straggler_s.end());
  }
  const double last_arrival_s = *std::max_element(arrival_s.begin(), arrival_s.end());
  const double bound_s = arrival_s[*plan.straggler] + straggler_path_s - last_arrival_s;
  // The simulation adds the same hops in another order: keep clear of its rounding.
  return std::max(0.0,
                  bound_s - kBoundMargin * std::abs(bound_s) - 1e-12 * std::abs(last_arrival_s));
}

absl::StatusOr<const PlanCache::RenamingBounds*> PlanCache::RenamingBoundsOf(
    const Plan& canonical, double bytes, const LinkModel& link) {
  const std::pair<const Plan*, LinkKey> key = {&canonical, KeyOf(bytes, link)};
  if (auto it = renaming_bounds_.find(key); it != renaming_bounds_.end()) return &it->second;
  const NetworkModel network = NetworkOf(link);
  const LinkModel& intra = network.intra_node;
  const LinkModel& inter = network.inter_node;
  // Fewer sharers slow a transfer less; none (0) not at all.
  const double most_lanes = intra.shared_lanes > 0 && inter.shared_lanes > 0
                                ? std::max(intra.shared_lanes, inter.shared_lanes)
                                : 0;
  const double fewest_lanes = intra.shared_lanes > 0 && inter.shared_lanes > 0
                                  ? std::min(intra.shared_lanes, inter.shared_lanes)
                                  : std::max(intra.shared_lanes, inter.shared_lanes);
  const NetworkModel fastest = NetworkModel::Flat(
      num_ranks_,
      {.alpha_s = std::min(intra.alpha_s, inter.alpha_s),
       .bandwidth_bytes_per_s = std::max(intra.bandwidth_bytes_per_s, inter.bandwidth_bytes_per_s),
       .shared_lanes = most_lanes});
  const NetworkModel slowest = NetworkModel::Flat(
      num_ranks_,
      {.alpha_s = std::max(intra.alpha_s, inter.alpha_s),
       .bandwidth_bytes_per_s = std::min(intra.bandwidth_bytes_per_s, inter.bandwidth_bytes_per_s),
       .shared_lanes = fewest_lanes});
  const int pre_rounds = canonical.pre_arrival_rounds;
  const std::vector<double> zeros(static_cast<size_t>(num_ranks_), 0.0);
  absl::StatusOr<SimulationResult> pre_fastest =
      SimulatePartOn(canonical, 0, pre_rounds, bytes, fastest, zeros);
  if (!pre_fastest.ok()) return pre_fastest.status();
  absl::StatusOr<SimulationResult> pre_slowest =
      SimulatePartOn(canonical, 0, pre_rounds, bytes, slowest, zeros);
  if (!pre_slowest.ok()) return pre_slowest.status();
  // The straggler's paths, as in ProfileOf (the ready ranks' side is not needed).
  absl::StatusOr<std::array<std::vector<double>, 2>> paths =
      PathsFromReadyAndStraggler(canonical, bytes, fastest, zeros);
  if (!paths.ok()) return paths.status();
  const std::vector<double>& from_straggler_s = (*paths)[1];
  const RenamingBounds bounds{.straggler_path_at_least_s = *std::max_element(
                                  from_straggler_s.begin(), from_straggler_s.end()),
                              .pre_arrival_at_least_s = pre_fastest->completion_s,
                              .pre_arrival_at_most_s = pre_slowest->completion_s};
  return &renaming_bounds_.emplace(key, bounds).first->second;
}

absl::StatusOr<SimulationResult> PlanCache::NcclRing(double bytes, const LinkModel& link,
                                                     absl::Span<const double> arrival_s) const {
  if (arrival_s.size() != static_cast<size_t>(num_ranks_) || arrival_s.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulation needs ", num_ranks_, " arrival times, got ", arrival_s.size()));
  }
  const NetworkModel network{
      .topology = machine_.topology, .intra_node = link, .inter_node = machine_.inter_node_link};
  double seconds = std::numeric_limits<double>::infinity();
  for (NcclModel model : kAllNcclModels) {
    seconds = std::min(seconds, NcclAllReduceCost(model, network, bytes).seconds());
  }
  const auto [first, last] = std::minmax_element(arrival_s.begin(), arrival_s.end());
  SimulationResult result{.finish_s = std::vector<double>(arrival_s.size(), *last + seconds)};
  result.after_last_arrival_s = seconds;
  result.completion_s = *last + seconds - *first;
  return result;
}

absl::StatusOr<SimulationResult> PlanCache::SimulatePartOf(const Plan& plan, int begin_round,
                                                           int end_round, double bytes,
                                                           const LinkModel& link,
                                                           absl::Span<const double> arrival_s) {
  if (const Renamed* renamed = RenamedOf(plan)) {
    return renamed->FromCanonical(SimulatePartOf(*renamed->canonical, begin_round, end_round, bytes,
                                                 link, renamed->relabel.ToCanonical(arrival_s)));
  }
  return SimulatePartOn(plan, begin_round, end_round, bytes, NetworkOf(link), arrival_s);
}

absl::StatusOr<SimulationResult> PlanCache::SimulatePartOn(const Plan& plan, int begin_round,
                                                           int end_round, double bytes,
                                                           const NetworkModel& network,
                                                           absl::Span<const double> arrival_s) {
  absl::StatusOr<Indexed> indexed = IndexedFor(plan);
  if (!indexed.ok()) return indexed.status();
  if (indexed->names.empty()) {
    return SimulateRounds(plan, indexed->index->ring_runs, indexed->compact(), begin_round,
                          end_round, bytes, network, arrival_s);
  }
  ++renamed_simulations_;
  return SimulateRenamedRounds(*indexed->plan, indexed->index->ring_runs, indexed->compact(),
                               indexed->names, begin_round, end_round, bytes, network, arrival_s);
}

absl::StatusOr<PlanCache::Indexed> PlanCache::IndexedFor(const Plan& plan) {
  auto renamed = indexed_by_renaming_.find(&plan);
  if (renamed == indexed_by_renaming_.end()) {
    absl::StatusOr<const SimulationIndex*> found = IndexOf(plan);
    if (!found.ok()) return found.status();
    return Indexed{.plan = &plan, .index = *found};
  }
  const Plan& canonical = *renamed->second.canonical;
  absl::StatusOr<const SimulationIndex*> found = IndexOf(canonical);
  if (!found.ok()) return found.status();
  Indexed indexed{.plan = &canonical, .index = *found, .names = std::vector<int>(num_ranks_)};
  for (int rank = 0; rank < num_ranks_; ++rank) {
    indexed.names[rank] = renamed->second.relabel.Renamed(rank);
  }
  return indexed;
}

int64_t PlanCache::kept_transfers() const {
  int64_t transfers = 0;
  for (const auto& [key, plan] : plans_) transfers += TransferCount(plan);
  for (const auto& [header, plan] : materialized_) transfers += TransferCount(plan);
  return transfers;
}

absl::StatusOr<const PlanCache::SimulationIndex*> PlanCache::IndexOf(const Plan& plan) {
  auto index = indexes_.find(&plan);
  if (index != indexes_.end()) return &index->second;
  SimulationIndex found{.ring_runs = FindRingRuns(plan)};
  // Compact rounds only for a plan with rounds simulated one by one: outside its ring runs, or
  // on a machine of nodes, where a run may mix link classes. Ring's are all runs (200 MB saved
  // at 4096 ranks).
  int in_runs = 0;
  for (const RingRun& run : found.ring_runs) in_runs += run.rounds;
  if (in_runs < plan.num_rounds() || machine_.topology.multi_node()) {
    found.compact = CompactRoundsOf(plan);
  }
  return &indexes_.emplace(&plan, std::move(found)).first->second;
}

const PlanCache::Renamed* PlanCache::RenamedOf(const Plan& plan) const {
  auto it = renamed_.find(&plan);
  return it == renamed_.end() ? nullptr : &it->second;
}

absl::StatusOr<SimulationResult> PlanCache::Renamed::FromCanonical(
    absl::StatusOr<SimulationResult> result) const {
  if (result.ok()) result->finish_s = relabel.FromCanonical(result->finish_s);
  return result;
}

NetworkModel PlanCache::NetworkOf(const LinkModel& link) const {
  return machine_.topology.multi_node() ? NetworkModel{.topology = machine_.topology,
                                                       .intra_node = link,
                                                       .inter_node = machine_.inter_node_link}
                                        : NetworkModel::Flat(num_ranks_, link);
}

absl::StatusOr<CalibrationRegime> PlanCache::RegimeOfPlan(const Plan& plan, double bytes,
                                                          const LinkModel& link,
                                                          absl::Span<const double> arrival_s) {
  return RegimeFromPhase(plan, arrival_s, [&](double gap_s) -> absl::StatusOr<bool> {
    if (auto renamed = indexed_by_renaming_.find(&plan); renamed != indexed_by_renaming_.end()) {
      absl::StatusOr<const RenamingBounds*> bounds =
          RenamingBoundsOf(*renamed->second.canonical, bytes, link);
      if (!bounds.ok()) return bounds.status();
      // Clear of the rounding by which the simulations may differ.
      if (gap_s < (*bounds)->pre_arrival_at_least_s * (1 - kBoundMargin)) return false;
      if (gap_s >= (*bounds)->pre_arrival_at_most_s * (1 + kBoundMargin)) return true;
    }
    absl::StatusOr<double> phase_s = PreArrivalSecondsOf(plan, bytes, link);
    if (!phase_s.ok()) return phase_s.status();
    return gap_s >= *phase_s;
  });
}

}  // namespace stragglar
