#include "policy/plan_pricer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "policy/model/nccl_models.h"
#include "policy/model/queue_simulator.h"

namespace stragglar {
namespace {

// `link` for a renamed plan's canonical plan: its slow rank by its canonical name.
LinkModel ForCanonical(const PlanStore::Renamed& renamed, const LinkModel& link) {
  return link.WithSlowRankRenamed([&](int rank) { return renamed.relabel.Canonical(rank); });
}

// `result` of a renamed plan's canonical plan, per rank of the renamed one.
absl::StatusOr<SimulationResult> FromCanonical(const PlanStore::Renamed& renamed,
                                               absl::StatusOr<SimulationResult> result) {
  if (result.ok()) result->finish_s = renamed.relabel.FromCanonical(result->finish_s);
  return result;
}

}  // namespace

absl::StatusOr<bool> PlanPricer::IndexAlone(const PlanHeader& header, const Plan& plan) {
  return IndexFrom(header, plan).compact.has_value();
}

absl::StatusOr<CalibrationRegime> RegimeFromPhase(
    const PlanHeader& plan, absl::Span<const double> arrival_s,
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

absl::StatusOr<double> PlanPricer::PostArrivalSeconds(const PlanHeader& plan, double bytes,
                                                      const LinkModel& link) {
  if (const PlanStore::Renamed* renamed = store_->RenamedOf(plan)) {
    // Every rank's links alike but the slow one's, which is renamed too.
    return PostArrivalSeconds(*renamed->canonical, bytes, ForCanonical(*renamed, link));
  }
  if (machine().PricedWithQueues()) {
    // Later than the pre-arrival rounds take round by round, which queues never make longer.
    absl::StatusOr<SimulationResult> together =
        SimulatePart(plan, 0, plan.num_rounds(), bytes, link,
                     std::vector<double>(static_cast<size_t>(num_ranks()), 0.0));
    if (!together.ok()) return together.status();
    std::vector<double> arrival_s(static_cast<size_t>(num_ranks()), 0.0);
    if (plan.straggler.has_value()) arrival_s[*plan.straggler] = 2 * together->completion_s + 1e-3;
    absl::StatusOr<const Plan*> transfers = TransfersFor(plan);
    if (!transfers.ok()) return transfers.status();
    absl::StatusOr<SimulationResult> late =
        SimulatePlanWithQueues(**transfers, bytes, NetworkOf(link), arrival_s);
    if (!late.ok()) return late.status();
    return late->after_last_arrival_s;
  }
  absl::StatusOr<SimulationResult> simulated =
      SimulatePart(plan, plan.pre_arrival_rounds, plan.num_rounds(), bytes, link,
                   std::vector<double>(static_cast<size_t>(num_ranks()), 0.0));
  if (!simulated.ok()) return simulated.status();
  return simulated->completion_s;
}

absl::StatusOr<double> PlanPricer::PreArrivalSeconds(const PlanHeader& plan, double bytes,
                                                     const LinkModel& link) {
  if (plan.pre_arrival_rounds == 0) return 0.0;
  if (const PlanStore::Renamed* renamed = store_->RenamedOf(plan)) {
    return PreArrivalSeconds(*renamed->canonical, bytes, ForCanonical(*renamed, link));
  }
  const std::pair<const PlanHeader*, LinkKey> key = {&plan, KeyOf(bytes, link)};
  if (auto it = pre_arrival_s_.find(key); it != pre_arrival_s_.end()) return it->second;
  absl::StatusOr<SimulationResult> simulated =
      SimulatePart(plan, 0, plan.pre_arrival_rounds, bytes, link,
                   std::vector<double>(static_cast<size_t>(plan.num_ranks), 0.0));
  if (!simulated.ok()) return simulated.status();
  pre_arrival_s_.emplace(key, simulated->completion_s);
  return simulated->completion_s;
}

absl::StatusOr<const PlanPricer::PostArrivalProfile*> PlanPricer::ProfileOf(const PlanHeader& plan,
                                                                            double bytes,
                                                                            const LinkModel& link) {
  const std::pair<const PlanHeader*, LinkKey> key = {&plan, KeyOf(bytes, link)};
  if (auto it = post_arrival_.find(key); it != post_arrival_.end()) return &it->second;
  const int straggler = *plan.straggler;
  // The ready ranks' pattern of leaving the pre-arrival rounds when they arrive together, from the
  // first to leave.
  const std::vector<double> zeros(static_cast<size_t>(plan.num_ranks), 0.0);
  absl::StatusOr<SimulationResult> pre =
      SimulatePart(plan, 0, plan.pre_arrival_rounds, bytes, link, zeros);
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

absl::StatusOr<std::array<std::vector<double>, 2>> PlanPricer::PathsFromReadyAndStraggler(
    const PlanHeader& plan, double bytes, const NetworkModel& network,
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
  return SimulateFromTwoStarts(RoundsFor(*indexed), indexed->names, plan.pre_arrival_rounds,
                               plan.num_rounds(), bytes, network, {from_ready, from_straggler});
}

absl::StatusOr<SimulationResult> PlanPricer::Simulate(const PlanHeader& plan, double bytes,
                                                      const LinkModel& link,
                                                      absl::Span<const double> arrival_s) {
  if (const PlanStore::Renamed* renamed = store_->RenamedOf(plan)) {
    return FromCanonical(*renamed,
                         Simulate(*renamed->canonical, bytes, ForCanonical(*renamed, link),
                                  renamed->relabel.ToCanonical(arrival_s)));
  }
  ++simulate_calls_;
  // Only a header of native's on nodes with PlanMachine::native_is_nccl has native as its
  // algorithm.
  if (plan.algorithm == Algorithm::kNative) return NcclRing(bytes, link, arrival_s);
  if (machine().PricedWithQueues()) {
    absl::StatusOr<const Plan*> transfers = TransfersFor(plan);
    if (!transfers.ok()) return transfers.status();
    return SimulatePlanWithQueues(**transfers, bytes, NetworkOf(link), arrival_s);
  }
  if (plan.algorithm != Algorithm::kStragglar || !plan.straggler.has_value() ||
      plan.pre_arrival_rounds == 0 || arrival_s.size() != static_cast<size_t>(plan.num_ranks)) {
    return SimulatePart(plan, 0, plan.num_rounds(), bytes, link, arrival_s);
  }
  absl::StatusOr<SimulationResult> pre =
      SimulatePart(plan, 0, plan.pre_arrival_rounds, bytes, link, arrival_s);
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
      return SimulatePart(plan, 0, plan.num_rounds(), bytes, link, arrival_s);
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

absl::StatusOr<double> PlanPricer::AfterLastArrivalAtLeast(const PlanHeader& plan, double bytes,
                                                           const LinkModel& link,
                                                           absl::Span<const double> arrival_s) {
  if (arrival_s.size() != static_cast<size_t>(plan.num_ranks) || arrival_s.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("simulation needs ", plan.num_ranks,
                                                   " arrival times, got ", arrival_s.size()));
  }
  if (plan.algorithm != Algorithm::kStragglar || !plan.straggler.has_value() ||
      plan.pre_arrival_rounds == 0 || machine().PricedWithQueues()) {
    return 0.0;
  }
  if (const PlanStore::Renamed* renamed = store_->RenamedOf(plan)) {
    return AfterLastArrivalAtLeast(*renamed->canonical, bytes, ForCanonical(*renamed, link),
                                   renamed->relabel.ToCanonical(arrival_s));
  }
  double straggler_path_s = 0;
  const PlanStore::Renamed* by_index = store_->IndexedByRenaming(plan);
  if (by_index != nullptr && !post_arrival_.contains({&plan, KeyOf(bytes, link)})) {
    // Its own profile would simulate it three times; the bound on every
    // renamed plan is found once.
    absl::StatusOr<const RenamingBounds*> bounds =
        RenamingBoundsOf(*by_index->canonical, bytes, link);
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

absl::StatusOr<const PlanPricer::RenamingBounds*> PlanPricer::RenamingBoundsOf(
    const PlanHeader& canonical, double bytes, const LinkModel& link) {
  const std::pair<const PlanHeader*, LinkKey> key = {&canonical, KeyOf(bytes, link)};
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
      num_ranks(),
      {.alpha_s = std::min(intra.alpha_s, inter.alpha_s),
       .bandwidth_bytes_per_s = std::max(intra.bandwidth_bytes_per_s, inter.bandwidth_bytes_per_s),
       .shared_lanes = most_lanes});
  // A slow link's factor on every transfer: the slowest any transfer can be.
  const double slow_factor = std::max(intra.slow_factor, inter.slow_factor);
  const NetworkModel slowest = NetworkModel::Flat(
      num_ranks(),
      {.alpha_s = std::max(intra.alpha_s, inter.alpha_s),
       .bandwidth_bytes_per_s =
           std::min(intra.bandwidth_bytes_per_s, inter.bandwidth_bytes_per_s) / slow_factor,
       .shared_lanes = fewest_lanes});
  const int pre_rounds = canonical.pre_arrival_rounds;
  const std::vector<double> zeros(static_cast<size_t>(num_ranks()), 0.0);
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

absl::StatusOr<SimulationResult> PlanPricer::NcclRing(double bytes, const LinkModel& link,
                                                      absl::Span<const double> arrival_s) const {
  if (arrival_s.size() != static_cast<size_t>(num_ranks()) || arrival_s.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulation needs ", num_ranks(), " arrival times, got ", arrival_s.size()));
  }
  const NetworkModel network{
      .topology = machine().topology, .intra_node = link, .inter_node = machine().inter_node_link};
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

absl::StatusOr<SimulationResult> PlanPricer::SimulatePart(const PlanHeader& plan, int begin_round,
                                                          int end_round, double bytes,
                                                          const LinkModel& link,
                                                          absl::Span<const double> arrival_s) {
  if (const PlanStore::Renamed* renamed = store_->RenamedOf(plan)) {
    return FromCanonical(*renamed, SimulatePart(*renamed->canonical, begin_round, end_round, bytes,
                                                ForCanonical(*renamed, link),
                                                renamed->relabel.ToCanonical(arrival_s)));
  }
  return SimulatePartOn(plan, begin_round, end_round, bytes, NetworkOf(link), arrival_s);
}

absl::StatusOr<SimulationResult> PlanPricer::SimulatePartOn(const PlanHeader& plan, int begin_round,
                                                            int end_round, double bytes,
                                                            const NetworkModel& network,
                                                            absl::Span<const double> arrival_s) {
  absl::StatusOr<Indexed> indexed = IndexedFor(plan);
  if (!indexed.ok()) return indexed.status();
  if (indexed->names.empty()) {
    return SimulateRounds(RoundsFor(*indexed), begin_round, end_round, bytes, network, arrival_s);
  }
  ++renamed_simulations_;
  return SimulateRenamedRounds(RoundsFor(*indexed), indexed->names, begin_round, end_round, bytes,
                               network, arrival_s);
}

absl::StatusOr<PlanPricer::Indexed> PlanPricer::IndexedFor(const PlanHeader& plan) {
  const PlanStore::Renamed* renamed = store_->IndexedByRenaming(plan);
  if (renamed == nullptr) {
    absl::StatusOr<const SimulationIndex*> found = IndexOf(plan);
    if (!found.ok()) return found.status();
    return Indexed{.header = &plan, .index = *found};
  }
  const PlanHeader& canonical = *renamed->canonical;
  absl::StatusOr<const SimulationIndex*> found = IndexOf(canonical);
  if (!found.ok()) return found.status();
  Indexed indexed{.header = &canonical, .index = *found, .names = std::vector<int>(num_ranks())};
  for (int rank = 0; rank < num_ranks(); ++rank) {
    indexed.names[rank] = renamed->relabel.Renamed(rank);
  }
  return indexed;
}

absl::StatusOr<const PlanPricer::SimulationIndex*> PlanPricer::IndexOf(const PlanHeader& header) {
  auto index = indexes_.find(&header);
  if (index != indexes_.end()) return &index->second;
  if (!store_->Owns(header)) {
    return absl::InvalidArgumentError("the plan to price is not from this plan cache");
  }
  const Plan* plan = store_->TransfersOf(header);
  if (plan == nullptr && header.algorithm == Algorithm::kRing &&
      header.variant == PlanVariant::kFlat && !machine().topology.multi_node()) {
    // Ring's header on one machine: one ring run, known without its transfers.
    return &indexes_.emplace(&header, SimulationIndex{.ring_runs = RingRunsOfRing(num_ranks())})
                .first->second;
  }
  if (plan == nullptr) return HeaderAloneError(header, "an index to price it by");
  return &IndexFrom(header, *plan);
}

const PlanPricer::SimulationIndex& PlanPricer::IndexFrom(const PlanHeader& header,
                                                         const Plan& plan) {
  if (auto index = indexes_.find(&header); index != indexes_.end()) return index->second;
  SimulationIndex found{.ring_runs = FindRingRuns(plan)};
  // Compact rounds only for a plan with rounds simulated one by one: outside its ring runs, or
  // on a machine of nodes, where a run may mix link classes. Ring's are all runs (200 MB saved
  // at 4096 ranks).
  int in_runs = 0;
  for (const RingRun& run : found.ring_runs) in_runs += run.rounds;
  if (in_runs < plan.num_rounds() || machine().topology.multi_node()) {
    found.compact = CompactRoundsOf(plan);
  }
  return indexes_.emplace(&header, std::move(found)).first->second;
}

absl::Status PlanPricer::HeaderAloneError(const PlanHeader& header, absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat(AlgorithmName(header.algorithm), "'s plan for ", header.num_ranks,
                   " ranks is kept as its header alone, without ", what));
}

absl::StatusOr<const Plan*> PlanPricer::TransfersFor(const PlanHeader& header) const {
  if (!store_->Owns(header)) {
    return absl::InvalidArgumentError("the plan to price is not from this plan cache");
  }
  const Plan* plan = store_->TransfersOf(header);
  if (plan == nullptr) return HeaderAloneError(header, "the transfers the queues read");
  return plan;
}

PlanRounds PlanPricer::RoundsFor(const Indexed& indexed) const {
  return {.header = *indexed.header,
          .runs = indexed.index->ring_runs,
          .compact = indexed.compact(),
          .transfers = store_->TransfersOf(*indexed.header)};
}

NetworkModel PlanPricer::NetworkOf(const LinkModel& link) const {
  return machine().topology.multi_node() ? NetworkModel{.topology = machine().topology,
                                                        .intra_node = link,
                                                        .inter_node = machine().inter_node_link}
                                         : NetworkModel::Flat(num_ranks(), link);
}

absl::StatusOr<CalibrationRegime> PlanPricer::RegimeOf(const PlanHeader& plan, double bytes,
                                                       const LinkModel& link,
                                                       absl::Span<const double> arrival_s) {
  return RegimeFromPhase(plan, arrival_s, [&](double gap_s) -> absl::StatusOr<bool> {
    if (const PlanStore::Renamed* renamed = store_->IndexedByRenaming(plan)) {
      absl::StatusOr<const RenamingBounds*> bounds =
          RenamingBoundsOf(*renamed->canonical, bytes, link);
      if (!bounds.ok()) return bounds.status();
      // Clear of the rounding by which the simulations may differ.
      if (gap_s < (*bounds)->pre_arrival_at_least_s * (1 - kBoundMargin)) return false;
      if (gap_s >= (*bounds)->pre_arrival_at_most_s * (1 + kBoundMargin)) return true;
    }
    absl::StatusOr<double> phase_s = PreArrivalSeconds(plan, bytes, link);
    if (!phase_s.ok()) return phase_s.status();
    return gap_s >= *phase_s;
  });
}

}  // namespace stragglar
