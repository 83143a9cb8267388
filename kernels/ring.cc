#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/synthesizers.h"

namespace stragglar {

void AppendRingReduceScatter(const std::vector<int>& ring, Plan& plan, int pieces) {
  const int size = static_cast<int>(ring.size());
  // In step s ring[i] forwards block i-s-1, so block c starts at ring[c+1], collects every other
  // contribution on its way around and completes at ring[c] after size-1 steps.
  for (int step = 0; step + 1 < size; ++step) {
    Round& round = plan.rounds.emplace_back();
    round.transfers.reserve(size);
    for (int i = 0; i < size; ++i) {
      const int block = ((i - step - 1) % size + size) % size;
      ChunkList chunks(pieces);
      std::iota(chunks.begin(), chunks.end(), block * pieces);
      round.transfers.push_back(
          {ring[i], ring[(i + 1) % size], TransferOp::kReduce, std::move(chunks)});
    }
  }
}

absl::StatusOr<Plan> SynthesizeRing(int num_ranks) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(absl::StrCat("ring needs at least 2 ranks, got ", num_ranks));
  }
  Plan plan;
  plan.algorithm = Algorithm::kRing;
  plan.num_ranks = num_ranks;
  plan.num_chunks = num_ranks;
  std::vector<int> ring(num_ranks);
  std::iota(ring.begin(), ring.end(), 0);
  AppendRingReduceScatter(ring, plan);
  // AllGather: rank i starts with complete chunk i and passes along what it received last.
  for (int step = 0; step + 1 < num_ranks; ++step) {
    Round& round = plan.rounds.emplace_back();
    round.transfers.reserve(num_ranks);
    for (int i = 0; i < num_ranks; ++i) {
      const int chunk = ((i - step) % num_ranks + num_ranks) % num_ranks;
      round.transfers.push_back({i, (i + 1) % num_ranks, TransferOp::kCopy, ChunkList{chunk}});
    }
  }
  return plan;
}

}  // namespace stragglar
