#include "kernels/plan/verifier.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

// The contribution sets of one chunk on every rank, as bitsets over ranks: value(rank) is
// `words_per_set` consecutive words. At 4096 ranks that is 2 MiB, small enough to stay in cache
// while the chunk's transfers run.
class ChunkState {
 public:
  explicit ChunkState(int num_ranks)
      : num_ranks_(num_ranks),
        words_per_set_((num_ranks + 63) / 64),
        bits_(static_cast<size_t>(num_ranks) * words_per_set_) {}

  void Reset() {
    std::fill(bits_.begin(), bits_.end(), 0);
    for (int rank = 0; rank < num_ranks_; ++rank) {
      Set(rank)[rank / 64] |= uint64_t{1} << (rank % 64);
    }
  }
  int words_per_set() const { return words_per_set_; }
  uint64_t* Set(int rank) { return bits_.data() + static_cast<size_t>(rank) * words_per_set_; }

 private:
  int num_ranks_;
  int words_per_set_;
  std::vector<uint64_t> bits_;
};

std::string Where(int round, int index, const Transfer& transfer) {
  return absl::StrCat("round ", round, " transfer ", index, " (", transfer.src, "->", transfer.dst,
                      ")");
}

absl::Status CheckShape(const Plan& plan) {
  if (plan.num_ranks < 1) return absl::InvalidArgumentError("plan has fewer than 1 rank");
  if (plan.num_chunks < 1) return absl::InvalidArgumentError("plan has fewer than 1 chunk");
  // Every chunk starts from ranks x ranks/64 words of state, whatever its transfers: a plan of
  // 65536 ranks and 2^24 chunks read from a file would run for days. 2^34 words are about 14 s
  // (the flat StragglAR schedule at 4097 ranks needs 2^30).
  constexpr int64_t kMaxStateWords = int64_t{1} << 34;
  const int64_t words = static_cast<int64_t>(plan.num_chunks) * plan.num_ranks *
                        ((static_cast<int64_t>(plan.num_ranks) + 63) / 64);
  if (words > kMaxStateWords) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan of ", plan.num_ranks, " ranks and ", plan.num_chunks,
                     " chunks is too large to verify: chunks x ranks x ranks/64 is ", words,
                     ", at most ", kMaxStateWords));
  }
  if (plan.pre_arrival_rounds < 0 || plan.pre_arrival_rounds > plan.num_rounds()) {
    return absl::InvalidArgumentError(absl::StrCat("pre_arrival_rounds ", plan.pre_arrival_rounds,
                                                   " outside [0, ", plan.num_rounds(), "]"));
  }
  const bool is_stragglar = plan.algorithm == Algorithm::kStragglar;
  if (is_stragglar != plan.straggler.has_value()) {
    return absl::InvalidArgumentError(is_stragglar ? "stragglar plan without a straggler"
                                                   : "only stragglar plans have a straggler");
  }
  if (!is_stragglar && plan.pre_arrival_rounds != 0) {
    return absl::InvalidArgumentError("only stragglar plans have pre-arrival rounds");
  }
  if (is_stragglar && (*plan.straggler < 0 || *plan.straggler >= plan.num_ranks)) {
    return absl::InvalidArgumentError(
        absl::StrCat("straggler ", *plan.straggler, " outside [0, ", plan.num_ranks, ")"));
  }
  std::vector<int> sent_in_round(plan.num_ranks, -1);
  std::vector<int> received_in_round(plan.num_ranks, -1);
  std::vector<int> chunk_seen(plan.num_chunks, -1);
  int seen_marker = 0;
  for (int r = 0; r < plan.num_rounds(); ++r) {
    const std::vector<Transfer>& transfers = plan.rounds[r].transfers;
    for (int t = 0; t < static_cast<int>(transfers.size()); ++t) {
      const Transfer& transfer = transfers[t];
      if (transfer.src < 0 || transfer.src >= plan.num_ranks || transfer.dst < 0 ||
          transfer.dst >= plan.num_ranks) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(r, t, transfer), ": rank outside [0, ", plan.num_ranks, ")"));
      }
      if (transfer.src == transfer.dst) {
        return absl::InvalidArgumentError(absl::StrCat(Where(r, t, transfer), ": sends to itself"));
      }
      if (transfer.chunks.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(Where(r, t, transfer), ": no chunks"));
      }
      ++seen_marker;
      for (int32_t chunk : transfer.chunks) {
        if (chunk < 0 || chunk >= plan.num_chunks) {
          return absl::InvalidArgumentError(absl::StrCat(Where(r, t, transfer), ": chunk ", chunk,
                                                         " outside [0, ", plan.num_chunks, ")"));
        }
        if (chunk_seen[chunk] == seen_marker) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(r, t, transfer), ": chunk ", chunk, " listed twice"));
        }
        chunk_seen[chunk] = seen_marker;
      }
      if (sent_in_round[transfer.src] == r) {
        return absl::InvalidArgumentError(absl::StrCat(Where(r, t, transfer), ": rank ",
                                                       transfer.src, " sends twice in one round"));
      }
      if (received_in_round[transfer.dst] == r) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(r, t, transfer), ": rank ", transfer.dst, " receives twice in one round"));
      }
      sent_in_round[transfer.src] = r;
      received_in_round[transfer.dst] = r;
      if (is_stragglar && (transfer.src == *plan.straggler || transfer.dst == *plan.straggler) &&
          r < plan.pre_arrival_rounds) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(r, t, transfer), ": involves straggler ", *plan.straggler,
                         " before it arrives (pre-arrival rounds: ", plan.pre_arrival_rounds, ")"));
      }
    }
  }
  if (is_stragglar && plan.pre_arrival_rounds < plan.num_rounds()) {
    bool straggler_active = false;
    for (const Transfer& transfer : plan.rounds[plan.pre_arrival_rounds].transfers) {
      straggler_active |= transfer.src == *plan.straggler || transfer.dst == *plan.straggler;
    }
    if (!straggler_active) {
      return absl::InvalidArgumentError(absl::StrCat("straggler ", *plan.straggler,
                                                     " is idle in round ", plan.pre_arrival_rounds,
                                                     ", the first post-arrival round"));
    }
  }
  return absl::OkStatus();
}

std::string Describe(const uint64_t* set, int num_ranks) {
  std::string out = "{";
  for (int rank = 0; rank < num_ranks; ++rank) {
    if (set[rank / 64] >> (rank % 64) & 1) absl::StrAppend(&out, out.size() > 1 ? "," : "", rank);
  }
  return out + "}";
}

// A contribution error and where it happened, so that of the errors found in separate chunks the
// one a run of the whole plan meets first is reported: double counting in execution order (round,
// transfer, position in its chunk list), then missing contributions by rank, chunk.
using ErrorOrder = std::array<int64_t, 4>;
constexpr ErrorOrder kNoError = {2, 0, 0, 0};
struct Finding {
  ErrorOrder order = kNoError;
  absl::Status status;
};

// One chunk's part of a transfer, in execution order.
struct ChunkEvent {
  int32_t round;
  int32_t transfer;
  int32_t position;  // in the transfer's chunk list
};

// Chunks never interact, so the plan is checked chunk by chunk: the transfers of a batch of chunks
// are gathered into per-chunk event lists in one pass over the plan, then each chunk runs alone.
class ChunkVerifier {
 public:
  explicit ChunkVerifier(const Plan& plan) : plan_(plan), state_(plan.num_ranks) {}

  // Runs `chunk`'s events; records its first error if it comes before `first`'s.
  void Run(int32_t chunk, const std::vector<ChunkEvent>& events, Finding& first) {
    state_.Reset();
    const int words = state_.words_per_set();
    for (size_t begin = 0; begin < events.size();) {
      // A round's transfers read values as of its start: gather this round's sources first.
      size_t end = begin;
      in_flight_.clear();
      for (; end < events.size() && events[end].round == events[begin].round; ++end) {
        const uint64_t* source = state_.Set(TransferOf(events[end]).src);
        in_flight_.insert(in_flight_.end(), source, source + words);
      }
      const uint64_t* incoming = in_flight_.data();
      for (size_t e = begin; e < end; ++e, incoming += words) {
        const ChunkEvent& event = events[e];
        const ErrorOrder order = {0, event.round, event.transfer, event.position};
        if (order >= first.order) return;
        const Transfer& transfer = TransferOf(event);
        uint64_t* target = state_.Set(transfer.dst);
        if (transfer.op == TransferOp::kCopy) {
          std::copy(incoming, incoming + words, target);
          continue;
        }
        for (int w = 0; w < words; ++w) {
          if ((target[w] & incoming[w]) != 0) {
            first = {order, absl::InvalidArgumentError(absl::StrCat(
                                Where(event.round, event.transfer, transfer), ": chunk ", chunk,
                                " double counts contributions: rank ", transfer.dst, " holds ",
                                Describe(target, plan_.num_ranks), ", receives ",
                                Describe(incoming, plan_.num_ranks)))};
            return;
          }
          target[w] |= incoming[w];
        }
      }
      begin = end;
    }
    for (int rank = 0; rank < plan_.num_ranks; ++rank) {
      const uint64_t* set = state_.Set(rank);
      const int missing = FirstMissing(set, words);
      if (missing < 0) continue;
      const ErrorOrder order = {1, rank, chunk, 0};
      if (order < first.order) {
        first = {order, absl::InvalidArgumentError(absl::StrCat(
                            "incomplete: at the end rank ", rank, " chunk ", chunk, " holds ",
                            Describe(set, plan_.num_ranks), ", missing rank ", missing))};
      }
      return;
    }
  }

 private:
  // The lowest rank whose contribution `set` lacks, or -1: a word at a time, since at 4096 ranks
  // this runs for every rank of every chunk.
  int FirstMissing(const uint64_t* set, int words) const {
    for (int w = 0; w < words; ++w) {
      const int bits = std::min(64, plan_.num_ranks - 64 * w);
      const uint64_t all = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      if (set[w] != all) return 64 * w + std::countr_one(set[w]);
    }
    return -1;
  }

  const Transfer& TransferOf(const ChunkEvent& event) const {
    return plan_.rounds[event.round].transfers[event.transfer];
  }

  const Plan& plan_;
  ChunkState state_;
  std::vector<uint64_t> in_flight_;
};

// Consecutive chunk ranges whose event lists together fit `max_events` (at least one chunk each).
std::vector<std::pair<int, int>> ChunkBatches(const Plan& plan, int64_t max_events) {
  std::vector<int64_t> events_per_chunk(plan.num_chunks, 0);
  for (const Round& round : plan.rounds) {
    for (const Transfer& transfer : round.transfers) {
      for (const ChunkList::Run& run : transfer.chunks.runs()) {
        for (int chunk = run.begin; chunk < run.end; ++chunk) ++events_per_chunk[chunk];
      }
    }
  }
  std::vector<std::pair<int, int>> batches;
  int64_t in_batch = 0;
  for (int chunk = 0; chunk < plan.num_chunks; ++chunk) {
    if (batches.empty() || in_batch + events_per_chunk[chunk] > max_events) {
      batches.emplace_back(chunk, chunk);
      in_batch = 0;
    }
    ++batches.back().second;
    in_batch += events_per_chunk[chunk];
  }
  return batches;
}

}  // namespace

absl::Status VerifyPlan(const Plan& plan, const VerifyOptions& options) {
  if (absl::Status shape = CheckShape(plan); !shape.ok()) return shape;
  const int64_t max_events =
      std::max<int64_t>(1, options.max_index_bytes / static_cast<int64_t>(sizeof(ChunkEvent)));
  ChunkVerifier verifier(plan);
  Finding first;
  std::vector<std::vector<ChunkEvent>> events;
  for (const auto& [begin, end] : ChunkBatches(plan, max_events)) {
    events.assign(end - begin, {});
    for (int r = 0; r < plan.num_rounds(); ++r) {
      const std::vector<Transfer>& transfers = plan.rounds[r].transfers;
      for (int t = 0; t < static_cast<int>(transfers.size()); ++t) {
        // Event i is the transfer's i-th chunk; only the runs' overlap with the batch is read.
        int first_of_run = 0;
        for (const ChunkList::Run& run : transfers[t].chunks.runs()) {
          for (int chunk = std::max(run.begin, begin); chunk < std::min(run.end, end); ++chunk) {
            events[chunk - begin].push_back({r, t, first_of_run + chunk - run.begin});
          }
          first_of_run += run.size();
        }
      }
    }
    for (int chunk = begin; chunk < end; ++chunk) verifier.Run(chunk, events[chunk - begin], first);
  }
  return first.order == kNoError ? absl::OkStatus() : first.status;
}

}  // namespace stragglar
