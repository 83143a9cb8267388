// Log-depth StragglAR: for large flat rank counts, where the flat schedule's n - 2 + log2 n
// post-arrival rounds cost more than they save.
//
// Before the straggler arrives the n - 1 ready ranks run a whole AllReduce among themselves
// (Halving-Doubling, 2*ceil(log2(n-1)) rounds), so each holds the ready ranks' sum y in every
// chunk. All that is left when the straggler s arrives is to get its x_s to everyone and the sum
// x_s + y back to it: a broadcast of K blocks, pipelined over a circulant pattern. In round t rank
// position p sends to position p + skip(t) (mod n), the skips being ceil(n/2), ceil(n/4), ..., 1 in
// turn (position 0 is the straggler, then the ready ranks in order).
//  - While it has blocks left, the straggler brings one in per round: it adds x_b into its
//    receiver's y_b, the block's first final value, while the rank that sends to it adds y_b into
//    its x_b. So it holds every final value once its last block is out.
//  - Everyone else, and the straggler afterwards, copies its receiver the highest final block the
//    receiver lacks.
//
// docs/scale-model.md proves that no plan whose post-arrival transfers each carry one of K equal
// blocks finishes in fewer than K - 1 + ceil(log2 n) rounds' time. This one meets that bound at
// every n = 2^q, and is at most 5 rounds over it at the other n up to 1024 checked (tests pin
// counts).
#include <bit>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

// The skips of the circulant pattern, largest first: halving n, rounding up, down to 1.
std::vector<int> CirculantSkips(int num_ranks) {
  std::vector<int> skips;
  for (int span = num_ranks; span > 1;) {
    span = (span + 1) / 2;
    skips.push_back(span);
  }
  return skips;
}

// Which final blocks each broadcast position holds, as bitsets of `blocks` bits.
class BlockHoldings {
 public:
  BlockHoldings(int positions, int blocks)
      : words_((blocks + 63) / 64), bits_(static_cast<size_t>(positions) * words_, 0) {}

  bool Has(int position, int block) const {
    return (Row(position)[block / 64] >> (block % 64) & 1) != 0;
  }
  void Add(int position, int block) {
    bits_[static_cast<size_t>(position) * words_ + block / 64] |= uint64_t{1} << (block % 64);
  }
  // The highest block `from` holds and `to` lacks; -1 when none.
  int HighestMissing(int from, int to, int blocks) const {
    const uint64_t* source = Row(from);
    const uint64_t* target = Row(to);
    for (int w = words_ - 1; w >= 0; --w) {
      uint64_t candidates = ~target[w] & source[w];
      if (w == words_ - 1 && blocks % 64 != 0) candidates &= (uint64_t{1} << (blocks % 64)) - 1;
      if (candidates != 0) return w * 64 + 63 - std::countl_zero(candidates);
    }
    return -1;
  }

 private:
  const uint64_t* Row(int position) const {
    return bits_.data() + static_cast<size_t>(position) * words_;
  }
  int words_;
  std::vector<uint64_t> bits_;
};

// Appends Halving-Doubling among `ready`, its chunk j widened to `scale` adjacent chunks.
absl::Status AppendReadyAllReduce(const std::vector<int>& ready, int scale, Plan& plan) {
  if (ready.size() < 2) return absl::OkStatus();
  absl::StatusOr<Plan> local = SynthesizeHalvingDoubling(static_cast<int>(ready.size()));
  if (!local.ok()) return local.status();
  for (const Round& round : local->rounds) {
    std::vector<Transfer>& transfers = plan.rounds.emplace_back().transfers;
    for (const Transfer& transfer : round.transfers) {
      ChunkList chunks;
      for (const ChunkList::Run& run : transfer.chunks.runs()) {
        chunks.AppendRange(run.begin * scale, run.end * scale);
      }
      transfers.push_back({ready[transfer.src], ready[transfer.dst], transfer.op, chunks});
    }
  }
  return absl::OkStatus();
}

// Appends the pipelined broadcast of the straggler's `blocks` blocks (see the top of the file).
absl::Status AppendBroadcast(const std::vector<int>& position_rank, int blocks, Plan& plan) {
  const int n = static_cast<int>(position_rank.size());
  const std::vector<int> skips = CirculantSkips(n);
  const int chunks_per_block = plan.num_chunks / blocks;
  BlockHoldings finals(n, blocks);
  int64_t missing = int64_t{n} * blocks;
  int next_new_block = 0;
  // No schedule needs more than this; reaching it would be a bug in the rule above.
  const int round_limit = blocks + 4 * static_cast<int>(skips.size()) + 8;
  for (int t = 0; missing > 0; ++t) {
    if (t == round_limit) {
      return absl::InternalError(absl::StrCat("log-depth broadcast of ", blocks, " blocks over ", n,
                                              " ranks did not finish in ", t, " rounds"));
    }
    const int skip = skips[t % skips.size()];
    std::vector<std::pair<int, int>> deliveries;  // (position, block)
    std::vector<Transfer>& transfers = plan.rounds.emplace_back().transfers;
    // The block the straggler brings in this round, if any (nobody has its final value yet).
    const int new_block = next_new_block < blocks ? next_new_block++ : -1;
    for (int from = 0; from < n; ++from) {
      const int to = (from + skip) % n;
      int block = -1;
      TransferOp op = TransferOp::kCopy;
      if (from == 0 && new_block >= 0) {
        // x_b into the receiver's y_b: the block's first final value.
        block = new_block;
        op = TransferOp::kReduce;
      } else if (to == 0 && new_block >= 0) {
        // Meanwhile the rank that sends to the straggler adds y_b into its x_b, so the straggler
        // is done when its last block is out and the bound is met at n = 2^q. (No ready rank
        // holds b's final value before the end of this round.)
        block = new_block;
        op = TransferOp::kReduce;
      } else {
        // The straggler, done bringing blocks in, holds every final value by then.
        block = finals.HighestMissing(from, to, blocks);
      }
      if (block < 0) continue;
      transfers.push_back({position_rank[from], position_rank[to], op,
                           ChunkRange(block * chunks_per_block, (block + 1) * chunks_per_block)});
      deliveries.emplace_back(to, block);
    }
    for (const auto& [position, block] : deliveries) finals.Add(position, block);
    missing -= static_cast<int64_t>(deliveries.size());
  }
  return absl::OkStatus();
}

}  // namespace

int LogDepthRoundLowerBound(int num_ranks, int blocks) {
  return blocks - 1 + std::bit_width(static_cast<unsigned>(num_ranks - 1));  // ceil(log2 n)
}

absl::StatusOr<Plan> SynthesizeLogDepthStragglar(int num_ranks, int straggler, int blocks) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("log-depth stragglar needs at least 2 ranks, got ", num_ranks));
  }
  if (straggler < 0 || straggler >= num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("straggler ", straggler, " outside [0, ", num_ranks, ")"));
  }
  if (blocks < 1 || blocks > kMaxLogDepthBlocks || !std::has_single_bit(unsigned(blocks))) {
    return absl::InvalidArgumentError(
        absl::StrCat("log-depth stragglar's blocks must be a power of "
                     "two in [1, ",
                     kMaxLogDepthBlocks, "], got ", blocks));
  }
  std::vector<int> ready;
  for (int rank = 0; rank < num_ranks; ++rank) {
    if (rank != straggler) ready.push_back(rank);
  }
  // Halving-Doubling over the ready ranks splits the buffer in bit_floor(n - 1) chunks; the
  // broadcast in `blocks`. Both are powers of two, so the larger count serves both.
  const int ready_chunks = static_cast<int>(std::bit_floor(ready.size()));
  Plan plan{.algorithm = Algorithm::kStragglar,
            .num_ranks = num_ranks,
            .num_chunks = std::max(ready_chunks, blocks),
            .straggler = straggler,
            .variant = PlanVariant::kLogDepth};
  if (absl::Status status = AppendReadyAllReduce(ready, plan.num_chunks / ready_chunks, plan);
      !status.ok()) {
    return status;
  }
  plan.pre_arrival_rounds = plan.num_rounds();
  std::vector<int> position_rank = {straggler};
  position_rank.insert(position_rank.end(), ready.begin(), ready.end());
  if (absl::Status status = AppendBroadcast(position_rank, blocks, plan); !status.ok()) {
    return status;
  }
  return plan;
}

}  // namespace stragglar
