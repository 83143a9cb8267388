// Halving-Doubling for any rank count.
//
// With P = 2^floor(log2 n) and n - P extra ranks, extra rank P+i pairs with rank i. The pair forms
// one "virtual rank" of a power-of-two recursive halving/doubling over P chunks, but instead of
// folding the whole buffer into rank i (which costs a full-buffer transfer each way), the pair
// first swaps halves: i keeps the upper half summed over both, P+i the lower half. The first
// halving step sends exactly one half per virtual rank, so each half goes out from the member that
// holds it and the kept half lands at the member that keeps it; from then on that member represents
// the pair. The last doubling step delivers the partner's half to the other member, and one final
// swap inside the pair completes both. Rounds: 2*ceil(log2 n); bytes per rank: 2*s*(1.5 - 1/P), the
// bound of Rabenseifner and Traff's 3-2 elimination, which is what the cost model in docs/plans.md
// assumes.
#include <bit>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

struct ChunkSpan {
  int begin;
  int end;
};

}  // namespace

absl::StatusOr<Plan> SynthesizeHalvingDoubling(int num_ranks) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("halving-doubling needs at least 2 ranks, got ", num_ranks));
  }
  const int virtual_ranks = std::bit_floor(static_cast<unsigned>(num_ranks));
  const int half = virtual_ranks / 2;
  Plan plan{.algorithm = Algorithm::kHalvingDoubling,
            .num_ranks = num_ranks,
            .num_chunks = virtual_ranks};
  auto extra_of = [&](int v) { return v + virtual_ranks < num_ranks ? v + virtual_ranks : -1; };
  auto new_round = [&plan]() -> std::vector<Transfer>& {
    return plan.rounds.emplace_back().transfers;
  };

  // Pairs swap halves: the lower half is summed at the extra rank, the upper half at rank v.
  if (num_ranks != virtual_ranks) {
    std::vector<Transfer>& fold = new_round();
    for (int v = 0; extra_of(v) >= 0; ++v) {
      fold.push_back({v, extra_of(v), TransferOp::kReduce, ChunkRange(0, half)});
      fold.push_back({extra_of(v), v, TransferOp::kReduce, ChunkRange(half, virtual_ranks)});
    }
  }
  // Which member of virtual rank v holds its summed lower (or upper) half after the fold.
  auto holder = [&](int v, bool upper) { return extra_of(v) >= 0 && !upper ? extra_of(v) : v; };

  // First halving step (distance P/2): virtual v keeps the lower half iff v < P/2.
  std::vector<int> representative(virtual_ranks);
  std::vector<ChunkSpan> span(virtual_ranks);
  {
    std::vector<Transfer>& step = new_round();
    for (int v = 0; v < virtual_ranks; ++v) {
      const bool keeps_upper = v >= half;
      const int partner = v ^ half;
      step.push_back({holder(v, !keeps_upper), holder(partner, !keeps_upper), TransferOp::kReduce,
                      keeps_upper ? ChunkRange(0, half) : ChunkRange(half, virtual_ranks)});
      representative[v] = holder(v, keeps_upper);
      span[v] = keeps_upper ? ChunkSpan{half, virtual_ranks} : ChunkSpan{0, half};
    }
  }
  // Remaining halving steps among representatives; afterwards virtual v holds chunk v complete.
  for (int bit = half / 2; bit >= 1; bit /= 2) {
    std::vector<Transfer>& step = new_round();
    for (int v = 0; v < virtual_ranks; ++v) {
      const int middle = (span[v].begin + span[v].end) / 2;
      const bool keeps_upper = (v & bit) != 0;
      step.push_back(
          {representative[v], representative[v ^ bit], TransferOp::kReduce,
           keeps_upper ? ChunkRange(span[v].begin, middle) : ChunkRange(middle, span[v].end)});
    }
    for (int v = 0; v < virtual_ranks; ++v) {
      const int middle = (span[v].begin + span[v].end) / 2;
      span[v] = (v & bit) != 0 ? ChunkSpan{middle, span[v].end} : ChunkSpan{span[v].begin, middle};
    }
  }
  // Doubling steps among representatives, all but the widest.
  for (int bit = 1; bit < half; bit *= 2) {
    std::vector<Transfer>& step = new_round();
    for (int v = 0; v < virtual_ranks; ++v) {
      step.push_back({representative[v], representative[v ^ bit], TransferOp::kCopy,
                      ChunkRange(span[v].begin, span[v].end)});
    }
    for (int v = 0; v < virtual_ranks; ++v) {
      const ChunkSpan partner = span[v ^ bit];
      span[v] = {std::min(span[v].begin, partner.begin), std::max(span[v].end, partner.end)};
    }
  }
  // Widest doubling step: a pair's half goes to the member that does not hold the pair's own half.
  auto other_member = [&](int v) {
    return representative[v] == v ? extra_of(v) : v;  // -1 for a rank without an extra
  };
  {
    std::vector<Transfer>& step = new_round();
    for (int v = 0; v < virtual_ranks; ++v) {
      const int partner = v ^ half;
      const int target = other_member(partner) >= 0 ? other_member(partner) : partner;
      step.push_back(
          {representative[v], target, TransferOp::kCopy, ChunkRange(span[v].begin, span[v].end)});
    }
  }
  // Pairs swap halves once more; now both members hold everything.
  if (num_ranks != virtual_ranks) {
    std::vector<Transfer>& swap = new_round();
    for (int v = 0; extra_of(v) >= 0; ++v) {
      const ChunkSpan own = span[v];
      const ChunkSpan other = own.begin == 0 ? ChunkSpan{half, virtual_ranks} : ChunkSpan{0, half};
      swap.push_back(
          {representative[v], other_member(v), TransferOp::kCopy, ChunkRange(own.begin, own.end)});
      swap.push_back({other_member(v), representative[v], TransferOp::kCopy,
                      ChunkRange(other.begin, other.end)});
    }
  }
  return plan;
}

}  // namespace stragglar
