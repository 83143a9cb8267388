#include "kernels/plan/rank_relabel.h"

namespace stragglar {

RankRelabel RankRelabel::For(PlanVariant variant, int num_ranks, int straggler) {
  return RankRelabel(variant == PlanVariant::kLogDepth ? Kind::kRotate : Kind::kSwap, num_ranks,
                     straggler);
}

RankRelabel RankRelabel::KeepingNodes(int nodes, int ranks_per_node, int straggler) {
  return RankRelabel(Kind::kSwapKeepNodes, nodes * ranks_per_node, straggler, ranks_per_node);
}

int RankRelabel::Renamed(int canonical_rank) const {
  const int last = num_ranks_ - 1;
  switch (kind_) {
    case Kind::kSwap:
      return canonical_rank == last         ? straggler_
             : canonical_rank == straggler_ ? last
                                            : canonical_rank;
    case Kind::kRotate:
      return canonical_rank == last        ? straggler_
             : canonical_rank < straggler_ ? canonical_rank
                                           : canonical_rank + 1;
    case Kind::kSwapKeepNodes: {
      // Two swaps that commute: of nodes, and of GPUs within a node.
      const int per_node = ranks_per_node_;
      const int last_node = last / per_node, last_local = per_node - 1;
      const int straggler_node = straggler_ / per_node, straggler_local = straggler_ % per_node;
      auto swap = [](int x, int a, int b) { return x == a ? b : x == b ? a : x; };
      return swap(canonical_rank / per_node, last_node, straggler_node) * per_node +
             swap(canonical_rank % per_node, last_local, straggler_local);
    }
  }
  return canonical_rank;
}

int RankRelabel::Canonical(int rank) const {
  if (kind_ != Kind::kRotate) return Renamed(rank);  // swaps undo themselves
  const int last = num_ranks_ - 1;
  if (rank == straggler_) return last;
  return rank < straggler_ ? rank : rank - 1;
}

Plan RankRelabel::Apply(Plan canonical) const {
  return RenameRanks(std::move(canonical), [this](int rank) { return Renamed(rank); });
}

std::vector<double> RankRelabel::ToCanonical(absl::Span<const double> by_rank) const {
  std::vector<double> by_canonical(by_rank.begin(), by_rank.end());
  if (by_rank.size() != static_cast<size_t>(num_ranks_)) return by_canonical;
  for (int rank = 0; rank < num_ranks_; ++rank) by_canonical[Canonical(rank)] = by_rank[rank];
  return by_canonical;
}

std::vector<double> RankRelabel::FromCanonical(absl::Span<const double> by_canonical_rank) const {
  std::vector<double> by_rank(by_canonical_rank.begin(), by_canonical_rank.end());
  if (by_canonical_rank.size() != static_cast<size_t>(num_ranks_)) return by_rank;
  for (int rank = 0; rank < num_ranks_; ++rank) by_rank[rank] = by_canonical_rank[Canonical(rank)];
  return by_rank;
}

}  // namespace stragglar
