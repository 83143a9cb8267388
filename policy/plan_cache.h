// The plans a communicator runs and prices, and what StragglAR's shapes are worth on each size:
// the one object the chooser, the calibration and the executors ask. It joins
// - the plans, each built once and never changed once handed out (policy/plan_store.h);
// - their pricer, with every memo it keeps (policy/plan_pricer.h);
// - the choice of StragglAR's shapes per size on a link, priced once each (StragglarPieces,
//   StragglarShapes);
// and hands out PricedPlans (policy/priced_plan.h): what can be priced, never lowered. Only
// Materialized gives a Plan, with its transfers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "policy/calibration.h"
#include "policy/model/network_model.h"
#include "policy/model/simulator.h"
#include "policy/model/topology.h"
#include "policy/plan_pricer.h"
#include "policy/plan_store.h"
#include "policy/priced_plan.h"
#include "policy/stragglar_shape.h"

namespace stragglar {

class PlanCache {
 public:
  using Machine = PlanMachine;

  // `forced_pieces` > 0 fixes StragglarPieces (a benchmark knob, STRAGGLAR_PIECES).
  explicit PlanCache(int num_ranks, int forced_pieces = 0)
      : PlanCache(num_ranks, forced_pieces, Machine{.topology = Topology::Flat(num_ranks)}) {}
  PlanCache(int num_ranks, int forced_pieces, Machine machine)
      : num_ranks_(num_ranks),
        forced_pieces_(forced_pieces),
        parts_(std::make_unique<Parts>(num_ranks, std::move(machine))) {}
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;
  // Not moved either: its plans' addresses are what it hands out (Policy holds it by pointer).
  PlanCache(PlanCache&&) = delete;
  PlanCache& operator=(PlanCache&&) = delete;

  int num_ranks() const { return num_ranks_; }

  // Above this many ranks no flat StragglAR plan is built: it has O(n²) transfers (33 million,
  // over a gigabyte, at 4096 ranks), and log-depth StragglAR is faster after arrival from 256
  // ranks up at every size from 4 KiB to 1 GiB (`stragglar sim --algorithms
  // stragglar,stragglar-log-depth`: 1.9x at 1024 ranks and 1 GiB, 3.0x at 2048).
  static constexpr int kMaxFlatStragglarRanks = 1024;

  const Machine& machine() const { return parts_->store.machine(); }
  // The link between nodes measured again (Policy::SetLink). The plans stay; their prices on it
  // are memoized by the link passed with each question, which changes with it.
  void SetInterNodeLink(const LinkModel& link) { parts_->store.SetInterNodeLink(link); }

  using StragglarShape = ::stragglar::StragglarShape;

  // The plan for (algorithm, straggler) and a call of `bytes` on `link`: StragglAR's is the flat
  // schedule pipelined with StragglarPieces(bytes, link) pieces per chunk (what a forced or fixed
  // StragglAR runs; the chooser may pick another of StragglarShapes); the others ignore the size.
  // Ring on a machine of nodes is the hierarchical ring, what a library runs there. Above
  // kMaxFlatStragglarRanks ranks StragglAR's is log-depth StragglAR with the better block count.
  absl::StatusOr<PricedPlan> For(Algorithm algorithm, std::optional<int> straggler, double bytes,
                                 const LinkModel& link);
  // What For and WithShape return is for pricing only (a PricedPlan), because the store may have
  // left its transfers out (which plans, and why: policy/plan_store.h). Materialized gives an
  // executor the plan with its transfers, built at its first request and kept beside the header,
  // which never changes: every plan, once handed out, stays as it is, and the prices and memos,
  // keyed by the header, stay too. InvalidArgument for another cache's plan, which this cache
  // neither materializes nor prices.
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
  // better of its rails (BestHierarchical). With
  // forced pieces: the flat schedule only. Above kMaxFlatStragglarRanks ranks the flat schedule
  // is left out, forced pieces or not. A function of its inputs alone, so every rank gets the same.
  absl::StatusOr<std::vector<StragglarShape>> StragglarShapes(double bytes, const LinkModel& link);
  // The shape of `family` among StragglarShapes (log-depth's best block count also with forced
  // pieces; with forced pieces the hierarchical family's flat rails in them): what a forced family
  // runs. FailedPrecondition for the hierarchical family on one machine, and for the flat schedule
  // above kMaxFlatStragglarRanks ranks.
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

  // What the model says `plan` (from this cache) costs: PlanPricer::Simulate and SimulatePart
  // (policy/plan_pricer.h), with the memos and closed forms they use.
  static constexpr double kPatternTolerance = PlanPricer::kPatternTolerance;
  absl::StatusOr<SimulationResult> Simulate(PricedPlan plan, double bytes, const LinkModel& link,
                                            absl::Span<const double> arrival_s);
  absl::StatusOr<SimulationResult> SimulatePart(PricedPlan plan, int begin_round, int end_round,
                                                double bytes, const LinkModel& link,
                                                absl::Span<const double> arrival_s);

  // A lower bound of Simulate(plan, ...)->after_last_arrival_s that simulates nothing once the
  // plan's post-arrival profile is known (PlanPricer::AfterLastArrivalAtLeast). The chooser skips
  // pricing a shape exactly when it already rules it out.
  absl::StatusOr<double> AfterLastArrivalAtLeast(PricedPlan plan, double bytes,
                                                 const LinkModel& link,
                                                 absl::Span<const double> arrival_s);

  // The transfers of the plans kept (a header alone has none): what the cache's memory grows with.
  int64_t kept_transfers() const { return parts_->store.kept_transfers(); }
  // The pricer's counts (PlanPricer), for tests and benchmarks.
  int64_t renamed_simulations() const { return parts_->pricer.renamed_simulations(); }
  int64_t simulate_calls() const { return parts_->pricer.simulate_calls(); }
  int64_t closed_form_calls() const { return parts_->pricer.closed_form_calls(); }

  // PlanPricer::RegimeOf.
  absl::StatusOr<CalibrationRegime> RegimeOf(PricedPlan plan, double bytes, const LinkModel& link,
                                             absl::Span<const double> arrival_s);

 private:
  // The store and its pricer, together at one address: the store asks the pricer to index a plan
  // before dropping its transfers, and the pricer reads the store's renamings.
  struct Parts {
    Parts(int num_ranks, PlanMachine machine)
        : store(num_ranks, std::move(machine),
                [this](const PlanHeader& header, const Plan& plan) {
                  return pricer.IndexAlone(header, plan);
                }),
          pricer(store) {}
    PlanStore store;
    PlanPricer pricer;
  };
  static absl::StatusOr<PricedPlan> Priced(absl::StatusOr<const PlanHeader*> plan) {
    if (!plan.ok()) return plan.status();
    return PricedPlan(**plan);
  }
  absl::StatusOr<const PlanHeader*> ForPlan(Algorithm algorithm, std::optional<int> straggler,
                                            double bytes, const LinkModel& link);
  // A shape and the model's time for its plan's post-arrival rounds.
  struct ShapeAfterArrival {
    StragglarShape shape;
    double seconds = 0;
  };
  // Of StragglAR's plans in `shapes` (around the last rank), the one whose post-arrival rounds the
  // model prices fastest; ties keep the earlier.
  absl::StatusOr<ShapeAfterArrival> FastestAfterArrival(absl::Span<const StragglarShape> shapes,
                                                        double bytes, const LinkModel& link);
  // Log-depth StragglAR with the better of LogDepthBlockChoices after arrival.
  absl::StatusOr<StragglarShape> BestLogDepth(double bytes, const LinkModel& link);
  // Hierarchical StragglAR with the better rails (policy/hierarchical_rails.h): of each kind, the
  // shape of RailShapesToPrice fastest after arrival (with per-class queues each also with its
  // shards in pieces, AddQueuePieces); then the flat rails, unless the log-depth rails win
  // (LogDepthRailsWin).
  absl::StatusOr<StragglarShape> BestHierarchical(double bytes, const LinkModel& link);
  // The model's time after the last arrival of StragglAR's plan of `shape` when its straggler
  // arrives `delay_s` after the others.
  absl::StatusOr<double> AfterArrivalAt(const StragglarShape& shape, double delay_s, double bytes,
                                        const LinkModel& link);
  // The rank whose StragglAR plans shapes are priced around: the last rank, or the rank behind a
  // slow link, whose plan differs from the others' there (StragglAR around it moves the least
  // over that link).
  int PricedStraggler(const LinkModel& link) const {
    return link.has_slow_rank() ? link.slow_rank : num_ranks_ - 1;
  }
  bool FlatStragglarTooLarge() const { return num_ranks_ > kMaxFlatStragglarRanks; }

  int num_ranks_;
  int forced_pieces_;
  std::unique_ptr<Parts> parts_;
  std::map<LinkKey, int> pieces_;
  std::map<LinkKey, std::vector<StragglarShape>> shapes_;
};

// The public face over the cache's own plans: what is priced is a PricedPlan, what is executed a
// Plan with its transfers.
inline absl::StatusOr<PricedPlan> PlanCache::For(Algorithm algorithm, std::optional<int> straggler,
                                                 double bytes, const LinkModel& link) {
  return Priced(ForPlan(algorithm, straggler, bytes, link));
}
inline absl::StatusOr<PricedPlan> PlanCache::WithPieces(Algorithm algorithm,
                                                        std::optional<int> straggler, int pieces) {
  return Priced(parts_->store.Get(algorithm, straggler, {.pieces = pieces}));
}
inline absl::StatusOr<PricedPlan> PlanCache::WithShape(Algorithm algorithm,
                                                       std::optional<int> straggler,
                                                       const StragglarShape& shape) {
  return Priced(parts_->store.Get(algorithm, straggler, shape));
}
inline absl::StatusOr<const Plan*> PlanCache::Materialized(PricedPlan plan) {
  return parts_->store.Materialized(plan.header());
}
inline bool PlanCache::KeepsTransfers(PricedPlan plan) const {
  return parts_->store.KeepsTransfers(plan.header());
}
inline absl::StatusOr<double> PlanCache::PreArrivalSeconds(PricedPlan plan, double bytes,
                                                           const LinkModel& link) {
  return parts_->pricer.PreArrivalSeconds(plan.header(), bytes, link);
}
inline absl::StatusOr<SimulationResult> PlanCache::Simulate(PricedPlan plan, double bytes,
                                                            const LinkModel& link,
                                                            absl::Span<const double> arrival_s) {
  return parts_->pricer.Simulate(plan.header(), bytes, link, arrival_s);
}
inline absl::StatusOr<SimulationResult> PlanCache::SimulatePart(
    PricedPlan plan, int begin_round, int end_round, double bytes, const LinkModel& link,
    absl::Span<const double> arrival_s) {
  return parts_->pricer.SimulatePart(plan.header(), begin_round, end_round, bytes, link, arrival_s);
}
inline absl::StatusOr<double> PlanCache::AfterLastArrivalAtLeast(
    PricedPlan plan, double bytes, const LinkModel& link, absl::Span<const double> arrival_s) {
  return parts_->pricer.AfterLastArrivalAtLeast(plan.header(), bytes, link, arrival_s);
}
inline absl::StatusOr<CalibrationRegime> PlanCache::RegimeOf(PricedPlan plan, double bytes,
                                                             const LinkModel& link,
                                                             absl::Span<const double> arrival_s) {
  return parts_->pricer.RegimeOf(plan.header(), bytes, link, arrival_s);
}

}  // namespace stragglar
