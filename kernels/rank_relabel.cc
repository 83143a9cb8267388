#include "kernels/rank_relabel.h"

namespace stragglar {

RankRelabel RankRelabel::For(PlanVariant variant, int num_ranks, int straggler) {
  return RankRelabel(variant == PlanVariant::kLogDepth, num_ranks, straggler);
}

int RankRelabel::Renamed(int canonical_rank) const {
  const int last = num_ranks_ - 1;
  if (canonical_rank == last) return straggler_;
  if (rotate_) return canonical_rank < straggler_ ? canonical_rank : canonical_rank + 1;
  return canonical_rank == straggler_ ? last : canonical_rank;
}

int RankRelabel::Canonical(int rank) const {
  const int last = num_ranks_ - 1;
  if (rank == straggler_) return last;
  if (rotate_) return rank < straggler_ ? rank : rank - 1;
  return rank == last ? straggler_ : rank;
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
