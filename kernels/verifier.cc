#include "kernels/verifier.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

// Contribution sets as bitsets over ranks for chunks [first_chunk, first_chunk + num_chunks),
// stored densely: value(rank, chunk) is `words_per_set` consecutive words.
class ContributionState {
 public:
  ContributionState(int num_ranks, int first_chunk, int num_chunks)
      : first_chunk_(first_chunk),
        num_chunks_(num_chunks),
        words_per_set_((num_ranks + 63) / 64),
        bits_(static_cast<size_t>(num_ranks) * num_chunks * words_per_set_, 0) {
    for (int rank = 0; rank < num_ranks; ++rank) {
      for (int chunk = first_chunk; chunk < first_chunk + num_chunks; ++chunk) {
        Set(rank, chunk)[rank / 64] |= uint64_t{1} << (rank % 64);
      }
    }
  }

  int words_per_set() const { return words_per_set_; }
  bool Holds(int32_t chunk) const {
    return chunk >= first_chunk_ && chunk < first_chunk_ + num_chunks_;
  }
  uint64_t* Set(int rank, int chunk) {
    return bits_.data() +
           (static_cast<size_t>(rank) * num_chunks_ + chunk - first_chunk_) * words_per_set_;
  }

 private:
  int first_chunk_;
  int num_chunks_;
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

// A contribution error and where it happened, so that of the errors found in separate chunk
// batches the one an unbatched run would meet first is reported: double counting in execution
// order (round, transfer, position in its chunk list), then missing contributions by rank, chunk.
struct Finding {
  std::array<int64_t, 4> order;
  absl::Status status;
};

// Executes the plan on chunks [first_chunk, first_chunk + num_chunks) only. Returns the first
// error; stops early at `stop_before` (the order of an error another batch already found).
std::optional<Finding> VerifyChunks(const Plan& plan, int first_chunk, int num_chunks,
                                    const std::array<int64_t, 4>& stop_before) {
  ContributionState state(plan.num_ranks, first_chunk, num_chunks);
  const int words = state.words_per_set();
  // Values sent in a round are read before any of that round's transfers lands.
  std::vector<uint64_t> in_flight;
  for (int r = 0; r < plan.num_rounds(); ++r) {
    const std::vector<Transfer>& transfers = plan.rounds[r].transfers;
    in_flight.clear();
    for (const Transfer& transfer : transfers) {
      for (int32_t chunk : transfer.chunks) {
        if (!state.Holds(chunk)) continue;
        const uint64_t* source = state.Set(transfer.src, chunk);
        in_flight.insert(in_flight.end(), source, source + words);
      }
    }
    const uint64_t* incoming = in_flight.data();
    for (int t = 0; t < static_cast<int>(transfers.size()); ++t) {
      const Transfer& transfer = transfers[t];
      for (int i = 0; i < static_cast<int>(transfer.chunks.size()); ++i) {
        const int32_t chunk = transfer.chunks[i];
        if (!state.Holds(chunk)) continue;
        const std::array<int64_t, 4> order = {0, r, t, i};
        if (order >= stop_before) return std::nullopt;
        uint64_t* target = state.Set(transfer.dst, chunk);
        if (transfer.op == TransferOp::kReduce) {
          for (int w = 0; w < words; ++w) {
            if ((target[w] & incoming[w]) != 0) {
              return Finding{order, absl::InvalidArgumentError(absl::StrCat(
                                        Where(r, t, transfer), ": chunk ", chunk,
                                        " double counts contributions: rank ", transfer.dst,
                                        " holds ", Describe(target, plan.num_ranks), ", receives ",
                                        Describe(incoming, plan.num_ranks)))};
            }
            target[w] |= incoming[w];
          }
        } else {
          std::copy(incoming, incoming + words, target);
        }
        incoming += words;
      }
    }
  }
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    for (int chunk = first_chunk; chunk < first_chunk + num_chunks; ++chunk) {
      const uint64_t* set = state.Set(rank, chunk);
      for (int other = 0; other < plan.num_ranks; ++other) {
        if ((set[other / 64] >> (other % 64) & 1) == 0) {
          const std::array<int64_t, 4> order = {1, rank, chunk, 0};
          if (order >= stop_before) return std::nullopt;
          return Finding{order,
                         absl::InvalidArgumentError(absl::StrCat(
                             "incomplete: at the end rank ", rank, " chunk ", chunk, " holds ",
                             Describe(set, plan.num_ranks), ", missing rank ", other))};
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status VerifyPlan(const Plan& plan, const VerifyOptions& options) {
  if (absl::Status shape = CheckShape(plan); !shape.ok()) return shape;
  // Chunks never interact, so they are checked in batches that fit the memory budget: one batch
  // (a single pass) for every plan up to ~1000 ranks, a few passes over the plan beyond.
  const int64_t bytes_per_chunk =
      int64_t{plan.num_ranks} * ((plan.num_ranks + 63) / 64) * int64_t{sizeof(uint64_t)};
  const int batch = static_cast<int>(
      std::clamp<int64_t>(options.max_state_bytes / bytes_per_chunk, 1, plan.num_chunks));
  std::optional<Finding> first;
  const std::array<int64_t, 4> no_error = {2, 0, 0, 0};
  for (int begin = 0; begin < plan.num_chunks; begin += batch) {
    std::optional<Finding> found =
        VerifyChunks(plan, begin, std::min(batch, plan.num_chunks - begin),
                     first.has_value() ? first->order : no_error);
    if (found.has_value()) first = std::move(found);
  }
  return first.has_value() ? first->status : absl::OkStatus();
}

}  // namespace stragglar
