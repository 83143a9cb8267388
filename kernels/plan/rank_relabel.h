// A StragglAR plan around any straggler is its plan around the last rank with the ranks renamed:
// the flat schedule's by swapping the straggler and the last rank (SynthesizeStragglar), log-depth
// StragglAR's by putting the straggler first and the ready ranks after it in order
// (SynthesizeLogDepthStragglar). Where a rank's name does not change its links (one machine), the
// two plans cost the same on arrivals renamed alike, so one plan prices every straggler: the
// plan cache prices the plan around the last rank and builds a renamed one only for an executor.
// Without that a job whose latest rank wanders would keep a plan per rank (84 MB each for the
// flat schedule at 1024 ranks).
//
// On a machine of nodes a renaming keeps the costs only if it keeps every pair of ranks on one
// node or apart: KeepingNodes swaps the straggler's node with the last node and, in every node,
// its GPU with the last GPU. The renamed plan is then not the synthesizer's around that straggler
// but another valid plan around it (renaming the ranks of a plan keeps it an AllReduce), which
// costs what the plan around the last rank costs. The plan cache renames only hierarchical
// StragglAR that way: the synthesizer's flat and log-depth plans around some stragglers are
// faster on nodes than the renamed ones (docs/policy.md).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kernels/plan/plan.h"

namespace stragglar {

class RankRelabel {
 public:
  // How the plan of `variant` (kFlat or kLogDepth) around `straggler` of `num_ranks` renames the
  // ranks of the same plan around rank num_ranks - 1.
  static RankRelabel For(PlanVariant variant, int num_ranks, int straggler);
  // On `nodes` nodes of `ranks_per_node` ranks (numbered node by node), for every variant.
  static RankRelabel KeepingNodes(int nodes, int ranks_per_node, int straggler);

  // The renamed plan's name of the canonical plan's rank `canonical_rank`, and back.
  int Renamed(int canonical_rank) const;
  int Canonical(int rank) const;

  // `canonical` (the plan around the last rank) renamed: the plan around this straggler.
  Plan Apply(Plan canonical) const;

  // Values per rank of the renamed plan, reordered per rank of the canonical one, and back.
  // Spans of another length than the rank count are returned as they are, for the callee to
  // refuse with its own message.
  std::vector<double> ToCanonical(absl::Span<const double> by_rank) const;
  std::vector<double> FromCanonical(absl::Span<const double> by_canonical_rank) const;

 private:
  enum class Kind : uint8_t {
    kSwap,          // the straggler and the last rank
    kRotate,        // log-depth's order
    kSwapKeepNodes  // the straggler's node and the last; its GPU and the last, in every node
  };
  RankRelabel(Kind kind, int num_ranks, int straggler, int ranks_per_node = 1)
      : kind_(kind),
        num_ranks_(num_ranks),
        straggler_(straggler),
        ranks_per_node_(ranks_per_node) {}
  Kind kind_;
  int num_ranks_;
  int straggler_;
  int ranks_per_node_;
};

}  // namespace stragglar
