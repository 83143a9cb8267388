// The plans a communicator runs and prices, built once and kept for its lifetime: the chooser
// prices them, the calibration and the time-saved estimate re-price them on measured arrivals,
// and executors lower them. Keyed by (algorithm, straggler, pieces); a plan never changes once
// made and its address never changes (Materialized builds the plan with its transfers beside
// it), so the PricedPlan the cache hands out (policy/priced_plan.h: what can be priced, never
// lowered) identifies it. Also
// memoizes what depends on a plan and a message size but not on the arrivals (StragglAR's pieces
// per chunk, its pre-arrival phase's time), so each is simulated once, not once per call that needs
// it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "kernels/plan/rank_relabel.h"
#include "policy/calibration.h"
#include "policy/network_model.h"
#include "policy/priced_plan.h"
#include "policy/simulator.h"
#include "policy/stragglar_shape.h"
#include "policy/topology.h"

namespace stragglar {

class PlanCache {
 public:
  // The machine the plans run on: a flat one by default. On several nodes every simulation prices
  // transfers per link class, the callers' link inside a node and `inter_node_link` between.
  struct Machine {
    Topology topology;
    LinkModel inter_node_link = kTypicalInterNodeLink;
    // On several nodes the library's own AllReduce (Algorithm::kNative) is NCCL's, priced as its
    // faster closed form (RuntimeConfig); otherwise native is priced as Ring's plan.
    bool native_is_nccl = false;
    // On several nodes the executor runs one queue per link class (RuntimeConfig): every plan is
    // priced with SimulatePlanWithQueues, and hierarchical StragglAR's shapes include the plan
    // written for it (shards in pieces).
    bool per_class_queues = false;
  };

  // `forced_pieces` > 0 fixes StragglarPieces (a benchmark knob, STRAGGLAR_PIECES).
  explicit PlanCache(int num_ranks, int forced_pieces = 0)
      : PlanCache(num_ranks, forced_pieces, Machine{.topology = Topology::Flat(num_ranks)}) {}
  PlanCache(int num_ranks, int forced_pieces, Machine machine)
      : num_ranks_(num_ranks), forced_pieces_(forced_pieces), machine_(std::move(machine)) {}
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;
  PlanCache(PlanCache&&) = default;
  PlanCache& operator=(PlanCache&&) = default;

  int num_ranks() const { return num_ranks_; }

  // Above this many ranks no flat StragglAR plan is built: it has O(n²) transfers (33 million,
  // over a gigabyte, at 4096 ranks), and log-depth StragglAR is faster after arrival from 256
  // ranks up at every size from 4 KiB to 1 GiB (`stragglar sim --algorithms
  // stragglar,stragglar-log-depth`: 1.9x at 1024 ranks and 1 GiB, 3.0x at 2048).
  static constexpr int kMaxFlatStragglarRanks = 1024;

  const Machine& machine() const { return machine_; }

  using StragglarShape = ::stragglar::StragglarShape;

  // The plan for (algorithm, straggler) and a call of `bytes` on `link`: StragglAR's is the flat
  // schedule pipelined with StragglarPieces(bytes, link) pieces per chunk (what a forced or fixed
  // StragglAR runs; the chooser may pick another of StragglarShapes); the others ignore the size.
  // Ring on a machine of nodes is the hierarchical ring, what a library runs there. Above
  // kMaxFlatStragglarRanks ranks StragglAR's is log-depth StragglAR with the better block count.
  absl::StatusOr<PricedPlan> For(Algorithm algorithm, std::optional<int> straggler, double bytes,
                                 const LinkModel& link);
  // What For and WithShape return is for pricing only (a PricedPlan), because the cache may have
  // left its transfers out: Ring's plan on one machine, which its one ring run prices (1.35 GB
  // of transfers at 4096 ranks that a preload running NCCL's own Ring never reads), and on nodes
  // the hierarchical ring, which its index prices (285 MB at 512x8); native's, a header with
  // Machine::native_is_nccl on nodes (NCCL's closed form prices it), else Ring's plan; StragglAR's
  // plans around a straggler other than the last rank, which rename the plan around it
  // (kernels/plan/rank_relabel.h) and are priced through it (RenamesStragglars) or through its
  // index renamed (on nodes); and on nodes that plan itself, which its index prices
  // (ElideAfterIndexing). Materialized gives an executor the plan with its transfers, built at
  // its first request and kept beside the header, which never changes: every plan, once made,
  // stays as it is, and the prices and memos, keyed by the header, stay too. InvalidArgument for
  // another cache's plan without its transfers (one with them is returned as it is).
  absl::StatusOr<const Plan*> Materialized(PricedPlan plan);
  // Whether the cache keeps `plan`'s transfers (its memory), or left them out until Materialized.
  bool KeepsTransfers(PricedPlan plan) const;

  // The plan with exactly `pieces` pieces per chunk (StragglAR; 1 for the others).
  absl::StatusOr<PricedPlan> WithPieces(Algorithm algorithm, std::optional<int> straggler,
                                        int pieces);
  absl::StatusOr<PricedPlan> WithShape(Algorithm algorithm, std::optional<int> straggler,
                                       const StragglarShape& shape);

  // The shapes of StragglAR's plan worth pricing for `bytes` on `link`, the flat schedule with
  // StragglarPieces first; then log-depth StragglAR with the better (after the straggler's
  // arrival) of LogDepthBlockChoices; then, on a machine of nodes, hierarchical StragglAR with the
  // best of its rails (HierarchicalRailBlockChoices: the flat schedule up to kMaxFlatRailNodes
  // nodes, or log-depth in LogDepthBlockChoices of a shard; with per-class queues, each also with
  // its shards in HierarchicalQueuePieces). With
  // forced pieces: the flat schedule only. Above kMaxFlatStragglarRanks ranks the flat schedule
  // is left out, forced pieces or not. A function of its inputs alone, so every rank gets the same.
  absl::StatusOr<std::vector<StragglarShape>> StragglarShapes(double bytes, const LinkModel& link);
  // The shape of `family` among StragglarShapes (log-depth's best block count also with forced
  // pieces): what a forced family runs. FailedPrecondition for the hierarchical family on one
  // machine, and for the flat schedule above kMaxFlatStragglarRanks ranks.
  absl::StatusOr<StragglarShape> ShapeOfFamily(PlanVariant family, double bytes,
                                               const LinkModel& link);

  // Pieces per chunk of StragglAR's plans for `bytes` on `link`: of 1, 2, 4, 8 and 16 (at most
  // kMaxPipelinedPieces pieces in all), the one whose post-arrival rounds the model prices fastest
  // (more pieces keep the straggler's link busier but cost alpha per round); ties keep fewer
  // pieces. A function of its inputs alone, so every rank picks the same. With forced pieces:
  // those, lowered to fit kMaxPipelinedPieces.
  absl::StatusOr<int> StragglarPieces(double bytes, const LinkModel& link);

  // The model's time for `plan`'s pre-arrival rounds on a call of `bytes`, ranks arriving
  // together; 0 for plans without that phase. `plan` must come from this cache.
  absl::StatusOr<double> PreArrivalSeconds(PricedPlan plan, double bytes, const LinkModel& link);

  // SimulatePlan of `plan` (from this cache), or of its rounds [begin_round, end_round), with its
  // ring runs (policy/ring_runs.h), found at its first simulation, priced in closed form, and its
  // other rounds read from their compact form (CompactRounds): the same results, Ring's in one
  // pass over the ranks.
  //
  // Simulate also prices StragglAR's post-arrival rounds in closed form when the ready ranks
  // leave the pre-arrival rounds in the pattern they leave in when they arrive together, shifted
  // by one time R (within kPatternTolerance of R, relative): the flat plan's ring ReduceScatter
  // ends alike on every ready rank whoever arrived last, and log-depth's Halving-Doubling ends in
  // a fixed pattern when the last ready rank to arrive lies on every longest chain. The rounds
  // are a max-plus map, so each rank then finishes at the later of R plus the ready ranks'
  // longest paths to it and the straggler's arrival plus its own (PostArrivalProfile), both found
  // once per plan, size and link. Equal to the full simulation up to that tolerance (the argument
  // is in docs/policy.md); otherwise it simulates every round as before.
  //
  // With Machine::native_is_nccl on several nodes, native's plan is bulk-synchronous NCCL: every
  // rank finishes the faster of NCCL's ring and tree closed forms after the last arrival. With
  // Machine::per_class_queues on several nodes, every plan is SimulatePlanWithQueues (no closed
  // form: they are the round model's).
  static constexpr double kPatternTolerance = 1e-12;
  absl::StatusOr<SimulationResult> Simulate(PricedPlan plan, double bytes, const LinkModel& link,
                                            absl::Span<const double> arrival_s);
  absl::StatusOr<SimulationResult> SimulatePart(PricedPlan plan, int begin_round, int end_round,
                                                double bytes, const LinkModel& link,
                                                absl::Span<const double> arrival_s);

  // A lower bound of Simulate(plan, ...)->after_last_arrival_s that simulates nothing once the
  // plan's post-arrival profile is known: the straggler's own chains after its arrival (every
  // rank waits for its data). 0 for plans without a straggler and a pre-arrival phase, and with
  // per-class queues (the round model bounds nothing there). On nodes, a flat or log-depth plan
  // around a rank other than the last whose profile is not known yet takes the looser bound of
  // RenamingBoundsOf instead, which needs neither its index nor its profile. The chooser skips
  // pricing a shape exactly when this bound already rules it out.
  absl::StatusOr<double> AfterLastArrivalAtLeast(PricedPlan plan, double bytes,
                                                 const LinkModel& link,
                                                 absl::Span<const double> arrival_s);

  // The transfers of the plans kept (a header has none): what the cache's memory grows with.
  int64_t kept_transfers() const;
  // Simulations of the plans priced through their canonical plan renamed on nodes
  // (indexed_by_renaming_), for tests.
  int64_t renamed_simulations() const { return renamed_simulations_; }

  // Calls of Simulate, and those priced with the post-arrival closed form, for tests and
  // benchmarks.
  int64_t simulate_calls() const { return simulate_calls_; }
  int64_t closed_form_calls() const { return closed_form_calls_; }

  // Chooser::RegimeOf with the phase's time taken from PreArrivalSeconds; for the plans that
  // RenamingBoundsOf bounds, only when the straggler's lead falls between the bounds.
  absl::StatusOr<CalibrationRegime> RegimeOf(PricedPlan plan, double bytes, const LinkModel& link,
                                             absl::Span<const double> arrival_s);

 private:
  // The public functions above on the cache's own plans (their headers), one each.
  static absl::StatusOr<PricedPlan> Priced(absl::StatusOr<const Plan*> plan) {
    if (!plan.ok()) return plan.status();
    return PricedPlan(**plan);
  }
  absl::StatusOr<const Plan*> ForPlan(Algorithm algorithm, std::optional<int> straggler,
                                      double bytes, const LinkModel& link);
  absl::StatusOr<const Plan*> WithPiecesPlan(Algorithm algorithm, std::optional<int> straggler,
                                             int pieces);
  absl::StatusOr<const Plan*> WithShapePlan(Algorithm algorithm, std::optional<int> straggler,
                                            const StragglarShape& shape);
  absl::StatusOr<const Plan*> MaterializedPlan(const Plan& plan);
  absl::StatusOr<double> PreArrivalSecondsOf(const Plan& plan, double bytes, const LinkModel& link);
  absl::StatusOr<SimulationResult> SimulatePlanOf(const Plan& plan, double bytes,
                                                  const LinkModel& link,
                                                  absl::Span<const double> arrival_s);
  absl::StatusOr<SimulationResult> SimulatePartOf(const Plan& plan, int begin_round, int end_round,
                                                  double bytes, const LinkModel& link,
                                                  absl::Span<const double> arrival_s);
  absl::StatusOr<double> AfterLastArrivalAtLeastOf(const Plan& plan, double bytes,
                                                   const LinkModel& link,
                                                   absl::Span<const double> arrival_s);
  absl::StatusOr<CalibrationRegime> RegimeOfPlan(const Plan& plan, double bytes,
                                                 const LinkModel& link,
                                                 absl::Span<const double> arrival_s);

  using LinkKey = std::tuple<int64_t, double, double, double>;  // (bytes, alpha, bw, lanes)
  static LinkKey KeyOf(double bytes, const LinkModel& link) {
    return {static_cast<int64_t>(bytes), link.alpha_s, link.bandwidth_bytes_per_s,
            link.shared_lanes};
  }

  int num_ranks_;
  int forced_pieces_;
  Machine machine_;
  // Of StragglAR's plans in `shapes` (around the last rank), the one whose post-arrival rounds the
  // model prices fastest; ties keep the earlier.
  absl::StatusOr<StragglarShape> FastestAfterArrival(absl::Span<const StragglarShape> shapes,
                                                     double bytes, const LinkModel& link);
  bool FlatStragglarTooLarge() const { return num_ranks_ > kMaxFlatStragglarRanks; }
  bool PricedWithQueues() const {
    return machine_.per_class_queues && machine_.topology.multi_node();
  }
  NetworkModel NetworkOf(const LinkModel& link) const;
  // Ring's plan on this machine: the flat ring, or the hierarchical ring on nodes.
  absl::StatusOr<Plan> SynthesizeRingPlan(bool with_transfers) const;
  // The plan for (algorithm, straggler, shape) with its transfers, as the synthesizers build it.
  absl::StatusOr<Plan> Synthesize(Algorithm algorithm, std::optional<int> straggler,
                                  const StragglarShape& shape) const;
  // Whether StragglAR's plans of `shape` around stragglers other than the last rank are that
  // plan renamed (Renamed): on one machine the flat and log-depth plans, on nodes hierarchical
  // StragglAR only, whose renaming keeps its cost whoever the straggler is; the synthesizer's
  // flat and log-depth plans around some stragglers are faster there than the renamed ones (up to
  // 5% and 24% at 32x8 in the model, docs/policy.md).
  bool RenamesStragglars(const StragglarShape& shape) const;
  // The header of the plan around `straggler` that renames `canonical`: its rounds, no transfers.
  static Plan HeaderOf(const Plan& canonical, int straggler);
  // Drops `plan`'s transfers once its index is built, when the index prices it alone (compact
  // rounds, 6 bytes a transfer against 40): StragglAR's flat and log-depth plans around the last
  // rank on nodes, whose index the plans around the other ranks rename. Materialized rebuilds
  // them for an executor.
  absl::Status ElideAfterIndexing(Plan& plan);
  // Machine::native_is_nccl's price of native on `arrival_s`.
  absl::StatusOr<SimulationResult> NcclRing(double bytes, const LinkModel& link,
                                            absl::Span<const double> arrival_s) const;
  // Log-depth StragglAR with the better of LogDepthBlockChoices after arrival.
  absl::StatusOr<StragglarShape> BestLogDepth(double bytes, const LinkModel& link);
  // The model's time for `plan`'s post-arrival rounds, every rank starting together; with
  // per-class queues, the time after the arrival of a straggler later than its pre-arrival
  // rounds (the queues let rounds of both phases overlap).
  absl::StatusOr<double> PostArrivalSeconds(const Plan& plan, double bytes, const LinkModel& link);

  // (algorithm, straggler or -1, pieces, log-depth blocks, hierarchical) -> plan; node-based, so
  // addresses stay valid.
  using PlanKey = std::tuple<Algorithm, int, int, int, bool>;
  std::map<PlanKey, Plan> plans_;
  // By header: the plan with its transfers an executor asked for (Materialized).
  std::map<const Plan*, Plan> materialized_;
  // The plan with its transfers for `header` (kept under `key`), as Materialized builds it.
  absl::StatusOr<Plan> WholePlan(const PlanKey& key, const Plan& header);
  // StragglAR's plans around a straggler other than the last rank where RenamesStragglars: kept
  // as headers, priced as the plan around the last rank on renamed arrivals
  // (kernels/plan/rank_relabel.h).
  struct Renamed {
    const Plan* canonical;
    RankRelabel relabel;
    // `result` of the canonical plan, per rank of the renamed one.
    absl::StatusOr<SimulationResult> FromCanonical(absl::StatusOr<SimulationResult> result) const;
  };
  const Renamed* RenamedOf(const Plan& plan) const;
  std::map<const Plan*, Renamed> renamed_;
  // On nodes, StragglAR's flat and log-depth plans around ranks other than the last: headers
  // priced by their canonical plan's index with its ranks renamed as it runs
  // (SimulateRenamedRounds), the exact price of the plan the synthesizer builds around them,
  // without a renamed copy of that index (2 million moves for the flat plan at 1024 ranks).
  std::map<const Plan*, Renamed> indexed_by_renaming_;
  int64_t renamed_simulations_ = 0;
  std::map<LinkKey, int> pieces_;
  std::map<LinkKey, std::vector<StragglarShape>> shapes_;
  std::map<std::pair<const Plan*, LinkKey>, double> pre_arrival_s_;
  // What the simulator reads of a plan, found at its first simulation.
  struct SimulationIndex {
    std::vector<RingRun> ring_runs;
    std::optional<CompactRounds> compact;
  };
  std::map<const Plan*, SimulationIndex> indexes_;
  // SimulatePart on `network` instead of this machine's network for a link.
  absl::StatusOr<SimulationResult> SimulatePartOn(const Plan& plan, int begin_round, int end_round,
                                                  double bytes, const NetworkModel& network,
                                                  absl::Span<const double> arrival_s);
  // The index of `plan`, read from its transfers at its first simulation (not for a plan in
  // indexed_by_renaming_, which has none).
  absl::StatusOr<const SimulationIndex*> IndexOf(const Plan& plan);
  // What simulating a plan reads: the plan whose index it is (its own, or for a plan in
  // indexed_by_renaming_ its canonical plan's) and the new name of each of that plan's ranks
  // (empty: none).
  struct Indexed {
    const Plan* plan = nullptr;
    const SimulationIndex* index = nullptr;
    std::vector<int> names;
    const CompactRounds* compact() const {
      return index->compact.has_value() ? &*index->compact : nullptr;
    }
  };
  absl::StatusOr<Indexed> IndexedFor(const Plan& plan);

  // StragglAR's post-arrival rounds as a max-plus map: for each rank, the longest path to its
  // finish from the ready ranks leaving the pre-arrival rounds in their pattern, and from the
  // straggler starting at 0 (PathsFromReadyAndStraggler; -infinity where a side has no path).
  struct PostArrivalProfile {
    // When each ready rank leaves the pre-arrival rounds if all arrive together, from the first.
    std::vector<double> ready_leave_s;
    // From the ready ranks leaving in that pattern, the first at 0.
    std::vector<double> from_ready_s;
    std::vector<double> from_straggler_s;
  };
  absl::StatusOr<const PostArrivalProfile*> ProfileOf(const Plan& plan, double bytes,
                                                      const LinkModel& link);
  // The longest paths through `plan`'s post-arrival rounds to each rank's finish, [0] from the
  // ready ranks starting at `ready_start_s` (the straggler's entry ignored), [1] from the straggler
  // starting at 0: the two sides of the max-plus map, found apart in one pass
  // (SimulateFromTwoStarts).
  absl::StatusOr<std::array<std::vector<double>, 2>> PathsFromReadyAndStraggler(
      const Plan& plan, double bytes, const NetworkModel& network,
      absl::Span<const double> ready_start_s);
  std::map<std::pair<const Plan*, LinkKey>, PostArrivalProfile> post_arrival_;
  // How far, relative, a bound keeps from the rounding by which two simulations of the same paths
  // (summed in another order) may differ.
  static constexpr double kBoundMargin = 1e-9;

  // What holds of every plan in indexed_by_renaming_ with `canonical` as its canonical plan,
  // whoever its straggler: `canonical` simulated with every transfer on the fastest link of the
  // machine's classes (least alpha, most bandwidth, fewest sharers) and on the slowest. On one
  // link a renamed plan costs what its canonical plan costs, renamed, and the model's times never
  // fall when a transfer costs more (they are sums and maxima of costs), so these bound every
  // renamed plan's times on the real classes. They let the chooser rule a renamed plan out, and
  // find its regime, without simulating it or finding its post-arrival profile: at 128x8
  // those were 2 million moves for each rank predicted last, three quarters of a policy epoch
  // when that rank wanders.
  struct RenamingBounds {
    // The straggler's longest path to a finish after its arrival (from_straggler_s's maximum).
    double straggler_path_at_least_s = 0;
    // The pre-arrival rounds' time, ranks arriving together (PreArrivalSeconds).
    double pre_arrival_at_least_s = 0;
    double pre_arrival_at_most_s = 0;
  };
  absl::StatusOr<const RenamingBounds*> RenamingBoundsOf(const Plan& canonical, double bytes,
                                                         const LinkModel& link);
  std::map<std::pair<const Plan*, LinkKey>, RenamingBounds> renaming_bounds_;
  int64_t simulate_calls_ = 0;
  int64_t closed_form_calls_ = 0;
};

// The calibration regime of `plan` on a call with these arrivals: kPhaseHidden when its straggler
// arrives later than every other rank by at least the model's time for its pre-arrival rounds,
// else kPhaseExposed. `gap_hides_phase(gap_s)` says whether a lead of gap_s > 0 is that long; it
// is asked only when it matters.
absl::StatusOr<CalibrationRegime> RegimeFromPhase(
    const Plan& plan, absl::Span<const double> arrival_s,
    absl::FunctionRef<absl::StatusOr<bool>(double gap_s)> gap_hides_phase);

// The public face over the cache's own plans: what is priced is a PricedPlan, what is executed a
// Plan with its transfers.
inline absl::StatusOr<PricedPlan> PlanCache::For(Algorithm algorithm, std::optional<int> straggler,
                                                 double bytes, const LinkModel& link) {
  return Priced(ForPlan(algorithm, straggler, bytes, link));
}
inline absl::StatusOr<PricedPlan> PlanCache::WithPieces(Algorithm algorithm,
                                                        std::optional<int> straggler, int pieces) {
  return Priced(WithPiecesPlan(algorithm, straggler, pieces));
}
inline absl::StatusOr<PricedPlan> PlanCache::WithShape(Algorithm algorithm,
                                                       std::optional<int> straggler,
                                                       const StragglarShape& shape) {
  return Priced(WithShapePlan(algorithm, straggler, shape));
}
inline absl::StatusOr<const Plan*> PlanCache::Materialized(PricedPlan plan) {
  return MaterializedPlan(plan.header());
}
inline bool PlanCache::KeepsTransfers(PricedPlan plan) const {
  return !plan.header().transfers_elided || materialized_.contains(&plan.header());
}
inline absl::StatusOr<double> PlanCache::PreArrivalSeconds(PricedPlan plan, double bytes,
                                                           const LinkModel& link) {
  return PreArrivalSecondsOf(plan.header(), bytes, link);
}
inline absl::StatusOr<SimulationResult> PlanCache::Simulate(PricedPlan plan, double bytes,
                                                            const LinkModel& link,
                                                            absl::Span<const double> arrival_s) {
  return SimulatePlanOf(plan.header(), bytes, link, arrival_s);
}
inline absl::StatusOr<SimulationResult> PlanCache::SimulatePart(
    PricedPlan plan, int begin_round, int end_round, double bytes, const LinkModel& link,
    absl::Span<const double> arrival_s) {
  return SimulatePartOf(plan.header(), begin_round, end_round, bytes, link, arrival_s);
}
inline absl::StatusOr<double> PlanCache::AfterLastArrivalAtLeast(
    PricedPlan plan, double bytes, const LinkModel& link, absl::Span<const double> arrival_s) {
  return AfterLastArrivalAtLeastOf(plan.header(), bytes, link, arrival_s);
}
inline absl::StatusOr<CalibrationRegime> PlanCache::RegimeOf(PricedPlan plan, double bytes,
                                                             const LinkModel& link,
                                                             absl::Span<const double> arrival_s) {
  return RegimeOfPlan(plan.header(), bytes, link, arrival_s);
}

}  // namespace stragglar
