#include "kernels/program/program.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

absl::Status ValidateTransfer(const Plan& plan, int round, const Transfer& transfer) {
  if (transfer.src < 0 || transfer.src >= plan.num_ranks || transfer.dst < 0 ||
      transfer.dst >= plan.num_ranks || transfer.src == transfer.dst) {
    return absl::InvalidArgumentError(absl::StrCat("round ", round, ": bad transfer ", transfer.src,
                                                   " -> ", transfer.dst, " for ", plan.num_ranks,
                                                   " ranks"));
  }
  for (int32_t chunk : transfer.chunks) {
    if (chunk < 0 || chunk >= plan.num_chunks) {
      return absl::InvalidArgumentError(
          absl::StrCat("round ", round, ": chunk ", chunk, " outside [0, ", plan.num_chunks, ")"));
    }
  }
  return absl::OkStatus();
}

// This rank's send and receive in `round` (nullptr: none), checked.
absl::Status TransfersOf(const Plan& plan, int round, int rank, const Transfer** send,
                         const Transfer** receive) {
  *send = *receive = nullptr;
  for (const Transfer& transfer : plan.rounds[round].transfers) {
    if (transfer.src != rank && transfer.dst != rank) continue;
    if (absl::Status status = ValidateTransfer(plan, round, transfer); !status.ok()) return status;
    const Transfer*& slot = transfer.src == rank ? *send : *receive;
    if (slot != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("round ", round, ": rank ", rank,
                                                     transfer.src == rank ? " sends" : " receives",
                                                     " more than one transfer"));
    }
    slot = &transfer;
  }
  return absl::OkStatus();
}

// What lowering knows about each chunk as it walks the rounds.
struct ChunkState {
  bool written = false;       // in the result (else still at the input, out of place)
  std::vector<int32_t> lent;  // steps that lent it out of the result since it was last written
};

// Everything a received chunk's extent must agree on.
struct ReceiveKey {
  Buffer buffer;
  bool overlaps_send;
  const std::vector<int32_t>* waits;
  bool operator==(const ReceiveKey& other) const {
    return buffer == other.buffer && overlaps_send == other.overlaps_send && *waits == *other.waits;
  }
};

// Appends `chunks` to `extents` as runs of consecutive chunk indices that agree on `key_of`
// (extents that merely agree but are not consecutive stay apart). Returns how many it appended.
template <typename KeyOf, typename Describe>
int32_t AppendExtents(const ChunkList& chunks, KeyOf key_of, Describe describe,
                      std::vector<ProgramExtent>& extents) {
  const size_t before = extents.size();
  for (const ChunkList::Run& run : chunks.runs()) {
    for (int32_t chunk = run.begin; chunk < run.end; ++chunk) {
      const bool continues_run = chunk > run.begin;
      if (continues_run && key_of(chunk - 1) == key_of(chunk)) {
        ++extents.back().num_chunks;
        continue;
      }
      ProgramExtent extent{.first_chunk = chunk, .num_chunks = 1, .starts_run = !continues_run};
      describe(chunk, extent);
      extents.push_back(extent);
    }
  }
  return static_cast<int32_t>(extents.size() - before);
}

// Whether the pre-arrival rounds of `plan` (n - 1 blocks of `pieces` chunks) are a ReduceScatter
// among the ready ranks that leaves block b complete at owner[b], and whether the post-arrival
// rounds need nothing else of it: what running NCCL's ReduceScatter instead of those rounds
// requires. Before arrival every transfer adds whole blocks between ready ranks, and a rank adds
// each block into its own at most once, never after sending it: then the sum a block holds came
// along a chain of distinct ranks (a rank's input is in no sum it receives), so an owner whose
// block sums n - 1 inputs holds every ready rank's once. After arrival no rank reads, or adds
// into, a chunk that an earlier round had added into and that it does not own (a partial sum,
// which NCCL's ReduceScatter leaves as the input) until a copy has overwritten it. Log-depth
// StragglAR's Halving-Doubling ends in copies, for one, and fails the first rule.
bool PreArrivalIsReduceScatter(const Plan& plan, int pieces, absl::Span<const int> owner) {
  const int n = plan.num_ranks;
  const int blocks = n - 1;
  const int straggler = *plan.straggler;
  const auto at = [blocks](int rank, int block) {
    return static_cast<size_t>(rank) * blocks + block;
  };
  std::vector<int32_t> inputs(static_cast<size_t>(n) * blocks, 1);  // inputs summed in each block
  std::vector<bool> sent(inputs.size(), false), received(inputs.size(), false);
  std::vector<std::pair<size_t, int32_t>> updates;  // applied at the end of the round
  for (int round = 0; round < plan.pre_arrival_rounds; ++round) {
    updates.clear();
    for (const Transfer& transfer : plan.rounds[round].transfers) {
      if (transfer.op != TransferOp::kReduce || transfer.src == straggler ||
          transfer.dst == straggler) {
        return false;
      }
      for (const ChunkList::Run& run : transfer.chunks.runs()) {
        if (run.begin % pieces != 0 || run.size() % pieces != 0) return false;
        for (int block = run.begin / pieces; block < run.end / pieces; ++block) {
          const size_t from = at(transfer.src, block), to = at(transfer.dst, block);
          if (received[to] || sent[to]) return false;
          sent[from] = received[to] = true;
          updates.emplace_back(to, inputs[to] + inputs[from]);
        }
      }
    }
    for (const auto& [index, sum] : updates) inputs[index] = sum;
  }
  for (int block = 0; block < blocks; ++block) {
    if (inputs[at(owner[block], block)] != blocks) return false;
  }
  // After arrival: chunks holding partial sums, until a copy overwrites them.
  const int chunks = plan.num_chunks;
  std::vector<bool> partial(static_cast<size_t>(n) * chunks, false);
  for (int rank = 0; rank < n; ++rank) {
    for (int block = 0; block < blocks; ++block) {
      if (!received[at(rank, block)] || owner[block] == rank) continue;
      for (int chunk = block * pieces; chunk < (block + 1) * pieces; ++chunk) {
        partial[static_cast<size_t>(rank) * chunks + chunk] = true;
      }
    }
  }
  std::vector<size_t> overwritten;
  for (int round = plan.pre_arrival_rounds; round < plan.num_rounds(); ++round) {
    overwritten.clear();
    for (const Transfer& transfer : plan.rounds[round].transfers) {
      for (int32_t chunk : transfer.chunks) {
        const size_t to = static_cast<size_t>(transfer.dst) * chunks + chunk;
        if (partial[static_cast<size_t>(transfer.src) * chunks + chunk]) return false;
        if (partial[to] && transfer.op == TransferOp::kReduce) return false;
        if (partial[to]) overwritten.push_back(to);
      }
    }
    for (size_t index : overwritten) partial[index] = false;
  }
  return true;
}

}  // namespace

PreArrivalBlocks FindPreArrivalBlocks(const Plan& plan, int rank) {
  const int blocks = plan.num_ranks - 1;
  if (plan.algorithm != Algorithm::kStragglar || !plan.straggler.has_value() ||
      plan.pre_arrival_rounds < 1 || plan.pre_arrival_rounds > plan.num_rounds() || blocks < 2 ||
      plan.num_chunks % blocks != 0) {
    return {};
  }
  // A ReduceScatter's last round completes what it delivers: each receiver's block.
  const int pieces = plan.num_chunks / blocks;
  std::vector<int> owner(blocks, -1);
  std::vector<int> block_of(plan.num_ranks, -1);
  for (const Transfer& transfer : plan.rounds[plan.pre_arrival_rounds - 1].transfers) {
    // One run of `pieces` chunks, starting on a block boundary.
    const absl::Span<const ChunkList::Run> runs = transfer.chunks.runs();
    if (runs.size() != 1 || runs[0].size() != pieces || runs[0].begin < 0 ||
        runs[0].begin % pieces != 0 || runs[0].begin >= plan.num_chunks || transfer.dst < 0 ||
        transfer.dst >= plan.num_ranks || transfer.dst == *plan.straggler) {
      return {};
    }
    const int block = runs[0].begin / pieces;
    if (owner[block] != -1 || block_of[transfer.dst] != -1) return {};
    owner[block] = transfer.dst;
    block_of[transfer.dst] = block;
  }
  if (std::find(owner.begin(), owner.end(), -1) != owner.end()) return {};
  if (!PreArrivalIsReduceScatter(plan, pieces, owner)) return {};
  return {.blocks = blocks, .block = rank >= 0 && rank < plan.num_ranks ? block_of[rank] : -1};
}

absl::StatusOr<RankProgram> LowerPlan(const Plan& plan, int rank, Placement placement) {
  if (rank < 0 || rank >= plan.num_ranks || plan.num_chunks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("plan for ", plan.num_ranks, " ranks and ",
                                                   plan.num_chunks, " chunks; rank ", rank));
  }
  RankProgram program{.rank = rank, .num_ranks = plan.num_ranks, .num_chunks = plan.num_chunks};
  std::vector<ChunkState> chunks(plan.num_chunks, {.written = placement.in_place});
  int first_round = 0;
  if (placement.native_pre_arrival) {
    const PreArrivalBlocks blocks = FindPreArrivalBlocks(plan, rank);
    placement.native_pre_arrival = blocks.blocks > 0;
    if (placement.native_pre_arrival) {
      program.pre_arrival_blocks = blocks.blocks;
      program.pre_arrival_block = blocks.block;
      first_round = plan.pre_arrival_rounds;
      const int per_block = plan.num_chunks / blocks.blocks;
      for (int i = 0; blocks.block >= 0 && i < per_block; ++i) {
        chunks[blocks.block * per_block + i].written = true;
      }
    }
  }
  program.placement = placement;
  auto buffer_of = [&](int32_t chunk) {
    return chunks[chunk].written ? Buffer::kResult : Buffer::kInput;
  };
  for (int round = 0; round < plan.num_rounds(); ++round) {
    const Transfer* send = nullptr;
    const Transfer* receive = nullptr;
    if (absl::Status status = TransfersOf(plan, round, rank, &send, &receive); !status.ok()) {
      return status;
    }
    if (round < first_round || (send == nullptr && receive == nullptr)) continue;
    const int32_t index = static_cast<int32_t>(program.steps.size());
    ProgramStep step{.round = round};
    if (send != nullptr) {
      step.send_peer = send->dst;
      step.send_op = send->op;
      step.send_chunks = static_cast<int32_t>(send->chunks.size());
      step.first_send = static_cast<int32_t>(program.extents.size());
      step.num_sends = AppendExtents(
          send->chunks, buffer_of,
          [&](int32_t chunk, ProgramExtent& extent) { extent.buffer = buffer_of(chunk); },
          program.extents);
      // Lent before this step's receive lands, which must therefore wait for it too.
      for (int32_t chunk : send->chunks) {
        if (chunks[chunk].written) chunks[chunk].lent.push_back(index);
      }
    }
    if (receive != nullptr) {
      step.receive_peer = receive->src;
      step.receive_op = receive->op;
      step.receive_chunks = static_cast<int32_t>(receive->chunks.size());
      auto sent_now = [&](int32_t chunk) {
        return send != nullptr &&
               std::find(send->chunks.begin(), send->chunks.end(), chunk) != send->chunks.end();
      };
      auto key_of = [&](int32_t chunk) {
        return ReceiveKey{buffer_of(chunk), sent_now(chunk), &chunks[chunk].lent};
      };
      step.first_receive = static_cast<int32_t>(program.extents.size());
      step.num_receives = AppendExtents(
          receive->chunks, key_of,
          [&](int32_t chunk, ProgramExtent& extent) {
            extent.buffer = buffer_of(chunk);
            extent.overlaps_send = sent_now(chunk);
            extent.first_wait = static_cast<int32_t>(program.waits.size());
            extent.num_waits = static_cast<int32_t>(chunks[chunk].lent.size());
            program.waits.insert(program.waits.end(), chunks[chunk].lent.begin(),
                                 chunks[chunk].lent.end());
          },
          program.extents);
      for (int32_t chunk : receive->chunks) {
        chunks[chunk].written = true;
        chunks[chunk].lent.clear();
      }
    }
    step.same_chunks_both_ways =
        send != nullptr && receive != nullptr && send->chunks == receive->chunks;
    program.steps.push_back(step);
  }
  for (int32_t chunk = 0; chunk < plan.num_chunks; ++chunk) {
    if (chunks[chunk].written) continue;
    if (!program.finish.empty() &&
        program.finish.back().first_chunk + program.finish.back().num_chunks == chunk) {
      ++program.finish.back().num_chunks;
    } else {
      program.finish.push_back(
          {.first_chunk = chunk, .num_chunks = 1, .buffer = Buffer::kInput, .starts_run = true});
    }
  }
  return program;
}

void FinishOnHost(const RankProgram& program, const std::vector<int64_t>& offsets,
                  const std::byte* input, std::byte* result, int64_t count, DataType type,
                  ReduceOp op) {
  for (const ProgramExtent& extent : program.finish) {
    const int64_t begin = offsets[extent.first_chunk];
    const int64_t end = offsets[extent.first_chunk + extent.num_chunks];
    if (end > begin) std::memcpy(result + begin, input + begin, end - begin);
  }
  if (op == ReduceOp::kAvg && count > 0) {
    FinalizeReduction(type, op, result, count, program.num_ranks);
  }
}

std::vector<int64_t> ChunkByteOffsets(int64_t count, int64_t element_size, int num_chunks) {
  std::vector<int64_t> offsets(num_chunks + 1);
  for (int chunk = 0; chunk < num_chunks; ++chunk) {
    offsets[chunk] = ChunkElements(count, num_chunks, chunk).begin * element_size;
  }
  offsets[num_chunks] = count * element_size;
  return offsets;
}

}  // namespace stragglar
