#include <algorithm>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

ChunkList Block(int first_chunk, int pieces, int block) {
  const int first = first_chunk + block * pieces;
  return ChunkRange(first, first + pieces);
}

int Mod(int value, int size) { return (value % size + size) % size; }

}  // namespace

void AppendRingReduceScatterStep(absl::Span<const int> ring, int step, int first_chunk, int pieces,
                                 std::vector<Transfer>& transfers) {
  const int size = static_cast<int>(ring.size());
  // In step s ring[i] forwards block i-s-1, so block c starts at ring[c+1], collects every other
  // contribution on its way around and completes at ring[c] after size-1 steps.
  for (int i = 0; i < size; ++i) {
    transfers.push_back({ring[i], ring[(i + 1) % size], TransferOp::kReduce,
                         Block(first_chunk, pieces, Mod(i - step - 1, size))});
  }
}

void AppendRingAllGatherStep(absl::Span<const int> ring, int step, int first_chunk, int pieces,
                             std::vector<Transfer>& transfers) {
  const int size = static_cast<int>(ring.size());
  // ring[i] starts with complete block i and passes along what it received last.
  for (int i = 0; i < size; ++i) {
    transfers.push_back({ring[i], ring[(i + 1) % size], TransferOp::kCopy,
                         Block(first_chunk, pieces, Mod(i - step, size))});
  }
}

void AppendRingReduceScatter(const std::vector<int>& ring, Plan& plan, int pieces) {
  for (int step = 0; step + 1 < static_cast<int>(ring.size()); ++step) {
    Round& round = plan.rounds.emplace_back();
    round.transfers.reserve(ring.size());
    AppendRingReduceScatterStep(ring, step, 0, pieces, round.transfers);
  }
}

absl::StatusOr<PlanHeader> SynthesizeRingHeader(int num_ranks) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(absl::StrCat("ring needs at least 2 ranks, got ", num_ranks));
  }
  return PlanHeader{.algorithm = Algorithm::kRing,
                    .num_ranks = num_ranks,
                    .num_chunks = num_ranks,
                    .round_count = 2 * (num_ranks - 1)};
}

int64_t RingTransfers(int num_ranks) {
  const int64_t n = num_ranks;
  return 2 * n * (n - 1);
}

int64_t FlatStragglarTransfersBound(int num_ranks, int pieces) {
  const int64_t ready = num_ranks - 1;
  return 2 * ready * ready * std::max(pieces, 1);
}

int64_t HierarchicalTransfersBound(int nodes, int ranks_per_node, int rail_pieces) {
  const int64_t n = nodes, g = ranks_per_node, k = std::max(rail_pieces, 1);
  return 2 * n * (n - 1) * g * k + 2 * g * (g - 1) * n;
}

absl::StatusOr<Plan> SynthesizeRing(int num_ranks) {
  absl::StatusOr<PlanHeader> header = SynthesizeRingHeader(num_ranks);
  if (!header.ok()) return header.status();
  Plan plan{.algorithm = header->algorithm,
            .num_ranks = header->num_ranks,
            .num_chunks = header->num_chunks};
  plan.rounds.reserve(header->round_count);
  std::vector<int> ring(num_ranks);
  std::iota(ring.begin(), ring.end(), 0);
  AppendRingReduceScatter(ring, plan);
  for (int step = 0; step + 1 < num_ranks; ++step) {
    Round& round = plan.rounds.emplace_back();
    round.transfers.reserve(num_ranks);
    AppendRingAllGatherStep(ring, step, 0, 1, round.transfers);
  }
  return plan;
}

}  // namespace stragglar
