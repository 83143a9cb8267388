// Discrete-event simulation of a plan under the alpha-beta model: each rank runs its rounds in
// order from its own arrival time; a transfer starts when both of its ends have finished their
// previous rounds and costs alpha + bytes / bandwidth of the link class joining them (one class on
// a flat machine). The same plan that executors run is what gets priced.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "policy/model/network_model.h"
#include "policy/model/ring_runs.h"

namespace stragglar {

struct SimulationResult {
  std::vector<double> finish_s;     // per rank, on the arrival clock
  double completion_s = 0;          // last finish - first arrival
  double after_last_arrival_s = 0;  // last finish - last arrival
};

// Prices `plan` for a buffer of `bytes` (a transfer of k chunks moves bytes*k/num_chunks) with
// `arrival_s[r]` the time rank r reaches the collective. InvalidArgument for a wrong arrival count,
// negative or non-finite inputs, or a non-positive bandwidth.
absl::StatusOr<SimulationResult> SimulatePlan(const Plan& plan, double bytes, const LinkModel& link,
                                              absl::Span<const double> arrival_s);
// The same over rounds [begin_round, end_round) only (a phase: `arrival_s` are then the ranks'
// times at begin_round), with `runs` (FindRingRuns(plan), in round order; empty: none) priced in
// closed form: the same result bit for bit, in one pass per run instead of one per round.
// InvalidArgument also for rounds outside the plan.
absl::StatusOr<SimulationResult> SimulateRounds(const Plan& plan, absl::Span<const RingRun> runs,
                                                int begin_round, int end_round, double bytes,
                                                const LinkModel& link,
                                                absl::Span<const double> arrival_s);
// The same on a machine of nodes: each transfer priced by its link class. Every ring run is priced
// in closed form: bit for bit where each of its cycles is of one class, up to rounding where a
// cycle crosses nodes (policy/ring_runs.h). InvalidArgument also when the topology's rank count is
// not the plan's.
absl::StatusOr<SimulationResult> SimulatePlan(const Plan& plan, double bytes,
                                              const NetworkModel& network,
                                              absl::Span<const double> arrival_s);
absl::StatusOr<SimulationResult> SimulateRounds(const Plan& plan, absl::Span<const RingRun> runs,
                                                int begin_round, int end_round, double bytes,
                                                const NetworkModel& network,
                                                absl::Span<const double> arrival_s);

// A plan known by its header alone: Ring's (SynthesizeRingHeader) is priced by its ring run
// (RingRunsOfRing), bit for bit what the whole plan costs on one node, up to rounding on nodes, in
// O(n) per round instead of 33 million transfers at 4096 ranks. Any other is FailedPrecondition:
// its rounds need their transfers.
absl::StatusOr<SimulationResult> SimulatePlan(const PlanHeader& header, double bytes,
                                              const LinkModel& link,
                                              absl::Span<const double> arrival_s);
absl::StatusOr<SimulationResult> SimulatePlan(const PlanHeader& header, double bytes,
                                              const NetworkModel& network,
                                              absl::Span<const double> arrival_s);

// What every simulation checks first: as many arrival times as ranks, all finite; bytes finite and
// >= 0; a valid network whose topology has the plan's rank count. InvalidArgument naming the fault.
absl::Status ValidateSimulation(const Plan& plan, double bytes, const NetworkModel& network,
                                absl::Span<const double> arrival_s);
absl::Status ValidateSimulation(const PlanHeader& plan, double bytes, const NetworkModel& network,
                                absl::Span<const double> arrival_s);

// A plan's transfers as the simulation reads them: rank pairs and chunk counts in 6 bytes instead
// of a Transfer's 40. At 1024 ranks StragglAR's post-arrival rounds are a million transfers that
// every simulation streams through, so memory, not arithmetic, bounds it. Built once per plan
// (PlanPricer does).
struct CompactRounds {
  struct Move {
    uint16_t src = 0;
    uint16_t dst = 0;
    uint16_t chunks = 0;
  };
  std::vector<Move> moves;
  std::vector<int64_t> round_begin;  // round r's moves: [round_begin[r], round_begin[r + 1])
};
// nullopt when a rank, or a transfer's chunk count, does not fit in 16 bits.
std::optional<CompactRounds> CompactRoundsOf(const Plan& plan);

// What a simulation reads of a plan: its header; its ring runs (FindRingRuns, in round order;
// empty: none), each priced in closed form; and the rounds no run covers, from their compact form
// (CompactRoundsOf) or, without it, from the plan's transfers. A simulation that needs a round
// none of them gives is FailedPrecondition: a header alone prices only what its runs cover, so a
// plan whose transfers were dropped after indexing is priced by its compact rounds.
struct PlanRounds {
  PlanHeader header;
  absl::Span<const RingRun> runs;
  const CompactRounds* compact = nullptr;
  const Plan* transfers = nullptr;  // whose HeaderOf is `header` (else InvalidArgument)
};
// `plan` with its transfers, `runs` and `compact`, which must outlive the result.
PlanRounds RoundsOf(const Plan& plan, absl::Span<const RingRun> runs = {},
                    const CompactRounds* compact = nullptr);

// SimulateRounds of `rounds`: the same result, bit for bit, from the compact form as from the
// transfers.
absl::StatusOr<SimulationResult> SimulateRounds(const PlanRounds& rounds, int begin_round,
                                                int end_round, double bytes,
                                                const NetworkModel& network,
                                                absl::Span<const double> arrival_s);
// SimulateRounds(RoundsOf(plan, runs, compact), ...).
absl::StatusOr<SimulationResult> SimulateRounds(const Plan& plan, absl::Span<const RingRun> runs,
                                                const CompactRounds* compact, int begin_round,
                                                int end_round, double bytes,
                                                const NetworkModel& network,
                                                absl::Span<const double> arrival_s);

// SimulateRounds of `rounds` with the plan's rank c renamed to renamed[c] (a permutation): the
// plan's transfers, runs and compact rounds as they are, each rank starting at its new name's
// arrival and taking its new name's links. arrival_s and finish_s are by the new names. Bit for
// bit what renaming the transfers, runs and compact rounds and simulating those gives (the same
// transfers in the same order, on the same link classes), without building them.
absl::StatusOr<SimulationResult> SimulateRenamedRounds(const PlanRounds& rounds,
                                                       absl::Span<const int> renamed,
                                                       int begin_round, int end_round, double bytes,
                                                       const NetworkModel& network,
                                                       absl::Span<const double> arrival_s);
absl::StatusOr<SimulationResult> SimulateRenamedRounds(
    const Plan& plan, absl::Span<const RingRun> runs, const CompactRounds* compact,
    absl::Span<const int> renamed, int begin_round, int end_round, double bytes,
    const NetworkModel& network, absl::Span<const double> arrival_s);

// Two simulations of rounds [begin_round, end_round) from two starts, in one pass over the rounds
// (at 1024 ranks a stream of a million moves, bound by memory) with each transfer's cost computed
// once: finish[k] is SimulateRenamedRounds's finish_s from start_s[k] (`renamed` empty: no
// renaming, SimulateRounds's), bit for bit. A start may also be -infinity, no path from that rank:
// the rule is max-plus, so each rank then finishes at its latest path from the lane's finite starts
// (-infinity where none reaches it). So the paths from two sets of ranks are found apart without a
// start so early that the other set's never count. InvalidArgument as SimulateRenamedRounds, and
// for a start that is NaN or +infinity.
absl::StatusOr<std::array<std::vector<double>, 2>> SimulateFromTwoStarts(
    const PlanRounds& rounds, absl::Span<const int> renamed, int begin_round, int end_round,
    double bytes, const NetworkModel& network,
    const std::array<absl::Span<const double>, 2>& start_s);
absl::StatusOr<std::array<std::vector<double>, 2>> SimulateFromTwoStarts(
    const Plan& plan, absl::Span<const RingRun> runs, const CompactRounds* compact,
    absl::Span<const int> renamed, int begin_round, int end_round, double bytes,
    const NetworkModel& network, const std::array<absl::Span<const double>, 2>& start_s);

// Arrival vector with every rank at 0 except `late_rank` at `delay_s`.
std::vector<double> OneLateRank(int num_ranks, int late_rank, double delay_s);

// Closed forms from docs/plans.md, for ranks arriving together (StragglAR: after the straggler).
double RingSeconds(int num_ranks, double bytes, const LinkModel& link);
double HalvingDoublingSeconds(int num_ranks, double bytes, const LinkModel& link);
double StragglarReduceScatterSeconds(int num_ranks, double bytes, const LinkModel& link);
double StragglarPostArrivalSeconds(int num_ranks, int post_arrival_rounds, double bytes,
                                   const LinkModel& link);

// The block counts worth pricing for log-depth StragglAR (kernels/synth/stragglar_log_depth.cc) on
// a call of `bytes`: the powers of two on either side of the optimum of its round model, (K +
// L)(alpha + S beta / K) with L = ceil(log2(n + 1)) - 1, which is K* = sqrt(L S beta / alpha)
// (docs/scale-model.md); one or two counts in [1, kMaxLogDepthBlocks].
std::vector<int> LogDepthBlockChoices(int num_ranks, double bytes, const LinkModel& link);

// The rails worth pricing for hierarchical StragglAR (kernels/synth/stragglar_hierarchical.cc) on
// `topology` for a call of `bytes`, as SynthesizeHierarchicalStragglar's rail_blocks: 0, the flat
// schedule over the nodes, on up to kMaxFlatRailNodes nodes; then, on several nodes, log-depth
// StragglAR in the LogDepthBlockChoices of a shard on `inter_node`. Above that many nodes flat
// rails are slower after arrival than the best log-depth rails at every size from 4 KiB to 16 GiB,
// round by round or on per-class queues (docs/scale-model.md), and their plan is the largest the
// policy would build: 4.2 million transfers at 512x8, 340 MB at its peak.
inline constexpr int kMaxFlatRailNodes = 128;
std::vector<int> HierarchicalRailBlockChoices(const Topology& topology, double bytes,
                                              const LinkModel& inter_node);

inline constexpr double kNever = std::numeric_limits<double>::infinity();

// The smallest delay of `stragglar_plan`'s straggler above which the StragglAR plan completes
// strictly before `baseline` (run with the same rank delayed by the same amount); 0 when it always
// wins, kNever when it never does. Found by bisection on simulations to 1 ns.
absl::StatusOr<double> BreakEvenDelay(const Plan& stragglar_plan, const Plan& baseline,
                                      double bytes, const LinkModel& link);
// The same on a machine of nodes.
absl::StatusOr<double> BreakEvenDelay(const Plan& stragglar_plan, const Plan& baseline,
                                      double bytes, const NetworkModel& network);
// The same against a baseline known by its header alone (SimulatePlan prices it).
absl::StatusOr<double> BreakEvenDelay(const Plan& stragglar_plan, const PlanHeader& baseline,
                                      double bytes, const NetworkModel& network);
// The same against a bulk-synchronous baseline priced in closed form (policy/nccl_models.h): it
// starts when the straggler arrives and takes `baseline_seconds`.
absl::StatusOr<double> BreakEvenDelay(const Plan& stragglar_plan, double baseline_seconds,
                                      double bytes, const NetworkModel& network);

}  // namespace stragglar
