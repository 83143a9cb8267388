// What the model says the plans of one store (policy/plan_store.h) cost, and what it keeps to say
// it fast: each plan's simulation index (its ring runs and compact rounds, found at its first
// simulation), and per plan and message size on a link what does not depend on the arrivals
// (the pre-arrival phase's time, StragglAR's post-arrival profile, the bounds on renamed plans),
// each simulated once, not once per call that needs it. Plans that the store keeps as renamed
// headers are priced through the plan they rename.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "policy/calibration.h"
#include "policy/model/network_model.h"
#include "policy/model/ring_runs.h"
#include "policy/model/simulator.h"
#include "policy/plan_store.h"

namespace stragglar {

class PlanPricer {
 public:
  // Prices the plans of `store`, which must outlive the pricer.
  explicit PlanPricer(const PlanStore& store) : store_(&store) {}
  PlanPricer(const PlanPricer&) = delete;
  PlanPricer& operator=(const PlanPricer&) = delete;

  // SimulatePlan of `plan`, or of its rounds [begin_round, end_round), with its ring runs
  // (policy/ring_runs.h), found at its first simulation, priced in closed form, and its other
  // rounds read from their compact form (CompactRounds): the same results, Ring's in one pass
  // over the ranks.
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
  // With PlanMachine::native_is_nccl on several nodes, native's plan is bulk-synchronous NCCL:
  // every rank finishes the faster of NCCL's ring and tree closed forms after the last arrival.
  // With PlanMachine::per_class_queues on several nodes, every plan is SimulatePlanWithQueues (no
  // closed form: they are the round model's).
  static constexpr double kPatternTolerance = 1e-12;
  absl::StatusOr<SimulationResult> Simulate(const PlanHeader& plan, double bytes,
                                            const LinkModel& link,
                                            absl::Span<const double> arrival_s);
  absl::StatusOr<SimulationResult> SimulatePart(const PlanHeader& plan, int begin_round,
                                                int end_round, double bytes, const LinkModel& link,
                                                absl::Span<const double> arrival_s);

  // A lower bound of Simulate(plan, ...)->after_last_arrival_s that simulates nothing once the
  // plan's post-arrival profile is known: the straggler's own chains after its arrival (every
  // rank waits for its data). 0 for plans without a straggler and a pre-arrival phase, and with
  // per-class queues (the round model bounds nothing there). On nodes, a plan the store prices by
  // renaming its canonical plan's index (PlanStore::IndexedByRenaming), whose profile is not known
  // yet, takes the looser bound of RenamingBoundsOf instead, which needs neither its index nor its
  // profile. The chooser skips pricing a shape exactly when this bound already rules it out.
  absl::StatusOr<double> AfterLastArrivalAtLeast(const PlanHeader& plan, double bytes,
                                                 const LinkModel& link,
                                                 absl::Span<const double> arrival_s);

  // The model's time for `plan`'s pre-arrival rounds on a call of `bytes`, ranks arriving
  // together; 0 for plans without that phase.
  absl::StatusOr<double> PreArrivalSeconds(const PlanHeader& plan, double bytes,
                                           const LinkModel& link);
  // The model's time for `plan`'s post-arrival rounds, every rank starting together; with
  // per-class queues, the time after the arrival of a straggler later than its pre-arrival
  // rounds (the queues let rounds of both phases overlap).
  absl::StatusOr<double> PostArrivalSeconds(const PlanHeader& plan, double bytes,
                                            const LinkModel& link);

  // Chooser::RegimeOf with the phase's time taken from PreArrivalSeconds; for the plans that
  // RenamingBoundsOf bounds, only when the straggler's lead falls between the bounds.
  absl::StatusOr<CalibrationRegime> RegimeOf(const PlanHeader& plan, double bytes,
                                             const LinkModel& link,
                                             absl::Span<const double> arrival_s);

  // Builds the index of the plan known by `header` from its transfers (`plan`;
  // PlanStore::IndexBeforeDropping): whether it holds the plan's rounds in compact form, so that
  // the transfers can go.
  absl::StatusOr<bool> IndexAlone(const PlanHeader& header, const Plan& plan);

  // Calls of Simulate, those priced with the post-arrival closed form, and simulations of plans
  // priced through their canonical plan's index renamed, for tests and benchmarks.
  int64_t simulate_calls() const { return simulate_calls_; }
  int64_t closed_form_calls() const { return closed_form_calls_; }
  int64_t renamed_simulations() const { return renamed_simulations_; }

 private:
  int num_ranks() const { return store_->num_ranks(); }
  const PlanMachine& machine() const { return store_->machine(); }
  NetworkModel NetworkOf(const LinkModel& link) const;
  // PlanMachine::native_is_nccl's price of native on `arrival_s`.
  absl::StatusOr<SimulationResult> NcclRing(double bytes, const LinkModel& link,
                                            absl::Span<const double> arrival_s) const;

  // What the simulator reads of a plan, found at its first simulation.
  struct SimulationIndex {
    std::vector<RingRun> ring_runs;
    std::optional<CompactRounds> compact;
  };
  // The index of the plan known by `header`, read from its transfers at its first simulation (not
  // for a plan the store prices by renaming, which has none; Ring's header on one machine is its
  // one ring run). InvalidArgument for another store's header; FailedPrecondition for a header
  // alone that was not indexed before its transfers went.
  absl::StatusOr<const SimulationIndex*> IndexOf(const PlanHeader& header);
  // The index of `header`'s plan, built from `plan` unless it is known.
  const SimulationIndex& IndexFrom(const PlanHeader& header, const Plan& plan);
  // FailedPrecondition: `header`'s plan is kept as its header alone, and `what` needs more.
  static absl::Status HeaderAloneError(const PlanHeader& header, absl::string_view what);
  // The transfers the store keeps for `header`'s plan, for the queue simulator, which reads
  // every transfer; HeaderAloneError without them.
  absl::StatusOr<const Plan*> TransfersFor(const PlanHeader& header) const;
  // What simulating a plan reads: the header of the plan whose index it is (its own, or for a plan
  // the store prices by renaming its canonical plan's) and the new name of each of that plan's
  // ranks (empty: none).
  struct Indexed {
    const PlanHeader* header = nullptr;
    const SimulationIndex* index = nullptr;
    std::vector<int> names;
    const CompactRounds* compact() const {
      return index->compact.has_value() ? &*index->compact : nullptr;
    }
  };
  absl::StatusOr<Indexed> IndexedFor(const PlanHeader& plan);
  // What the simulator reads for `indexed`: its header, runs and compact rounds, and the
  // transfers the store keeps for it (none for a header alone).
  PlanRounds RoundsFor(const Indexed& indexed) const;
  // SimulatePart on `network` instead of this machine's network for a link.
  absl::StatusOr<SimulationResult> SimulatePartOn(const PlanHeader& plan, int begin_round,
                                                  int end_round, double bytes,
                                                  const NetworkModel& network,
                                                  absl::Span<const double> arrival_s);

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
  absl::StatusOr<const PostArrivalProfile*> ProfileOf(const PlanHeader& plan, double bytes,
                                                      const LinkModel& link);
  // The longest paths through `plan`'s post-arrival rounds to each rank's finish, [0] from the
  // ready ranks starting at `ready_start_s` (the straggler's entry ignored), [1] from the straggler
  // starting at 0: the two sides of the max-plus map, found apart in one pass
  // (SimulateFromTwoStarts).
  absl::StatusOr<std::array<std::vector<double>, 2>> PathsFromReadyAndStraggler(
      const PlanHeader& plan, double bytes, const NetworkModel& network,
      absl::Span<const double> ready_start_s);
  // How far, relative, a bound keeps from the rounding by which two simulations of the same paths
  // (summed in another order) may differ.
  static constexpr double kBoundMargin = 1e-9;

  // What holds of every plan the store prices by renaming `canonical`'s index, whoever its
  // straggler: `canonical` simulated with every transfer on the fastest link of the machine's
  // classes (least alpha, most bandwidth, fewest sharers) and on the slowest. On one link a
  // renamed plan costs what its canonical plan costs, renamed, and the model's times never fall
  // when a transfer costs more (they are sums and maxima of costs), so these bound every renamed
  // plan's times on the real classes. They let the chooser rule a renamed plan out, and find its
  // regime, without simulating it or finding its post-arrival profile: at 128x8 those were 2
  // million moves for each rank predicted last, three quarters of a policy epoch when that rank
  // wanders.
  struct RenamingBounds {
    // The straggler's longest path to a finish after its arrival (from_straggler_s's maximum).
    double straggler_path_at_least_s = 0;
    // The pre-arrival rounds' time, ranks arriving together (PreArrivalSeconds).
    double pre_arrival_at_least_s = 0;
    double pre_arrival_at_most_s = 0;
  };
  absl::StatusOr<const RenamingBounds*> RenamingBoundsOf(const PlanHeader& canonical, double bytes,
                                                         const LinkModel& link);

  const PlanStore* store_;
  std::map<const PlanHeader*, SimulationIndex> indexes_;
  std::map<std::pair<const PlanHeader*, LinkKey>, double> pre_arrival_s_;
  std::map<std::pair<const PlanHeader*, LinkKey>, PostArrivalProfile> post_arrival_;
  std::map<std::pair<const PlanHeader*, LinkKey>, RenamingBounds> renaming_bounds_;
  int64_t simulate_calls_ = 0;
  int64_t closed_form_calls_ = 0;
  int64_t renamed_simulations_ = 0;
};

// The calibration regime of `plan` on a call with these arrivals: kPhaseHidden when its straggler
// arrives later than every other rank by at least the model's time for its pre-arrival rounds,
// else kPhaseExposed. `gap_hides_phase(gap_s)` says whether a lead of gap_s > 0 is that long; it
// is asked only when it matters.
absl::StatusOr<CalibrationRegime> RegimeFromPhase(
    const PlanHeader& plan, absl::Span<const double> arrival_s,
    absl::FunctionRef<absl::StatusOr<bool>(double gap_s)> gap_hides_phase);

}  // namespace stragglar
