// Consecutive rounds of a plan that are the same ring step, priced in closed form by the
// simulator. In a ring round every rank of a cycle sends to the next one in it, so its ready time
// becomes the latest of its own and its two neighbours' plus one transfer time; after k such
// rounds it is the latest ready time within k places of it on the cycle plus k transfer times.
// A round may hold several disjoint cycles (the hierarchical ring's node rings and rails, or
// Halving-Doubling's pairs): each is priced on its own. That turns Ring's 2(n - 1) rounds of n
// transfers, and StragglAR's pre-arrival ReduceScatter, into one pass over the ranks. The result
// is the simulator's own, bit for bit: adding the transfer time commutes with taking the latest,
// because rounding is monotonic.
//
// A ring that crosses nodes (flat StragglAR's ReduceScatter on a machine of nodes) has hops of
// two classes. Its rounds are priced in closed form too, by the slowest walk to each rank
// (AdvanceRingRounds with a topology, docs/policy.md): one pass per kind of walk instead of n
// passes over n ranks, equal to the simulator's result up to rounding (sums taken in another
// order), not bit for bit.
#pragma once

#include <vector>

#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "policy/model/topology.h"

namespace stragglar {

struct RingRun {
  int first_round = 0;
  int rounds = 0;
  // Disjoint cycles, each the ranks in ring order: each sends to the next, the last to the first.
  std::vector<std::vector<int>> cycles;
  int chunks = 0;  // per transfer

  // The transfers of each of its rounds.
  int transfers() const;

  friend bool operator==(const RingRun&, const RingRun&) = default;
};

// The runs of at least `min_rounds` consecutive ring rounds of `plan`, in round order. One pass
// over the plan's transfers: find them once per plan, not per simulation.
std::vector<RingRun> FindRingRuns(const Plan& plan, int min_rounds = 2);

// FindRingRuns(SynthesizeRing(num_ranks)) without the plan: Ring's 2(n - 1) rounds are one run
// around 0, 1, ..., n - 1, one chunk per transfer. What prices Ring's plan known by its header
// alone (PlanHeader, SynthesizeRingHeader). num_ranks >= 2.
std::vector<RingRun> RingRunsOfRing(int num_ranks);

// `ready` after `rounds` rounds of `run` (at most run.rounds), each transfer taking
// `transfer_seconds`. Ranks outside its cycles keep their time.
void AdvanceRingRounds(const RingRun& run, int rounds, double transfer_seconds,
                       std::vector<double>& ready);
// The same with each hop taking the time of its class: `intra_node_seconds` between ranks of one
// node (node_of[rank]), `inter_node_seconds` between nodes. A cycle of one class is priced as
// above, bit for bit; one of both classes by its slowest walks, up to rounding.
void AdvanceRingRounds(const RingRun& run, int rounds, absl::Span<const int> node_of,
                       double intra_node_seconds, double inter_node_seconds,
                       std::vector<double>& ready);

}  // namespace stragglar
