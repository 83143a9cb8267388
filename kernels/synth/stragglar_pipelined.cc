// Pipelined StragglAR post-arrival schedules (declared in kernels/synth/stragglar_schedule.h).
//
// After the pre-arrival ReduceScatter, rank r < n-1 holds the punctual ranks' sum of pieces
// [r*k, (r+1)*k); the straggler σ = n-1 holds its raw data. σ hands out its raw pieces one per
// round, round-robin over the owners, so in steady state σ sends and receives one piece every
// round: its link, which must carry s bytes each way, never idles. Every other free port spreads
// final pieces, oldest first (a piece that has waited longest is the one that would finish late).
//
// Two ways to hand a piece out, and three receiver preferences, are each run greedily; the
// schedule with the fewest rounds wins (ties: the first below). With `exchange`, σ and the owner
// swap and both add (the paper's exchange): σ holds the final piece at once. Without, σ only
// sends, which frees the owner's outgoing port in that round and σ's incoming port for a final
// piece from anyone; at n = 4 this is what makes every port busy in every round.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/synth/stragglar_schedule.h"

namespace stragglar {
namespace {

enum class ReceiverOrder {
  kStragglerFirst,  // σ must collect every piece: serve it before the punctual ranks
  kRingNext,        // each sender prefers the next rank after it (σ first)
  kRingFromOwner,   // receivers in ring order from the piece's owner
};

struct Variant {
  bool exchange;
  ReceiverOrder order;
};

constexpr Variant kVariants[] = {
    {true, ReceiverOrder::kStragglerFirst}, {true, ReceiverOrder::kRingNext},
    {true, ReceiverOrder::kRingFromOwner},  {false, ReceiverOrder::kStragglerFirst},
    {false, ReceiverOrder::kRingNext},      {false, ReceiverOrder::kRingFromOwner},
};

// One greedy run; nullopt if it stalls (never seen; the caller then tries the next variant).
std::optional<PostArrivalSchedule> BuildPipelined(int n, int k, Variant variant) {
  const int m = n - 1, sigma = n - 1, num_pieces = m * k;
  std::vector<std::vector<char>> holds(n, std::vector<char>(num_pieces, 0));
  int missing = n * num_pieces;
  std::vector<int> spreading;  // final pieces some rank still lacks, oldest first
  std::vector<int> holders, receivers;
  PostArrivalSchedule rounds;
  const int round_limit = 4 * num_pieces + 4 * n;
  auto ring_distance = [n](int from, int to) { return ((to - from) % n + n) % n; };
  for (int t = 0; missing > 0; ++t) {
    if (t >= round_limit) return std::nullopt;
    std::vector<ScheduleMove>& moves = rounds.emplace_back();
    std::vector<char> send_busy(n, 0), receive_busy(n, 0);
    if (t < num_pieces) {
      const int owner = t % m, piece = owner * k + t / m;
      moves.push_back({sigma, owner, piece, /*reduce=*/true});
      send_busy[sigma] = receive_busy[owner] = 1;
      if (variant.exchange) {
        moves.push_back({owner, sigma, piece, /*reduce=*/true});
        send_busy[owner] = receive_busy[sigma] = 1;
      }
    }
    for (int piece : spreading) {
      const int owner = piece / k;
      holders.clear();
      receivers.clear();
      for (int r = 0; r < n; ++r) {
        if (holds[r][piece] && !send_busy[r]) holders.push_back(r);
        if (!holds[r][piece] && !receive_busy[r]) receivers.push_back(r);
      }
      if (holders.empty() || receivers.empty()) continue;
      if (variant.order == ReceiverOrder::kStragglerFirst) {
        // σ's outgoing port is the scarce one: let punctual holders send first.
        std::stable_sort(holders.begin(), holders.end(), [&](int a, int b) {
          return std::pair(a == sigma, ring_distance(a, owner)) <
                 std::pair(b == sigma, ring_distance(b, owner));
        });
      }
      std::stable_sort(receivers.begin(), receivers.end(), [&](int a, int b) {
        if (variant.order == ReceiverOrder::kStragglerFirst && (a == sigma) != (b == sigma)) {
          return a == sigma;
        }
        return ring_distance(owner, a) < ring_distance(owner, b);
      });
      for (int holder : holders) {
        int best = -1;
        for (int receiver : receivers) {
          if (receive_busy[receiver]) continue;
          if (variant.order != ReceiverOrder::kRingNext) {
            best = receiver;
            break;
          }
          auto rank_of = [&](int r) { return r == sigma ? -1 : ring_distance(holder, r); };
          if (best < 0 || rank_of(receiver) < rank_of(best)) best = receiver;
        }
        if (best < 0) break;
        moves.push_back({holder, best, piece});
        send_busy[holder] = receive_busy[best] = 1;
      }
    }
    // Apply the round: every move read its sender's state as of the round's start, and every move
    // leaves a final piece at its receiver (a copy, or the raw piece meeting the partial sum).
    for (const ScheduleMove& move : moves) {
      holds[move.dst][move.chunk] = 1;
      --missing;
    }
    if (t < num_pieces) spreading.push_back(moves.front().chunk);
    std::erase_if(spreading, [&](int piece) {
      for (int r = 0; r < n; ++r) {
        if (!holds[r][piece]) return false;
      }
      return true;
    });
  }
  return rounds;
}

}  // namespace

int PipelinedRoundLowerBound(int num_ranks, int pieces) {
  return (num_ranks - 1) * pieces - 1 + CeilLog2(num_ranks);
}

absl::StatusOr<PostArrivalSchedule> SynthesizePipelinedPostArrival(int num_ranks, int pieces) {
  if (num_ranks < 2 || pieces < 1 ||
      (pieces > 1 && static_cast<int64_t>(num_ranks - 1) * pieces > kMaxPipelinedPieces)) {
    return absl::InvalidArgumentError(
        absl::StrCat("StragglAR needs at least 2 ranks and, pipelined, 1 to ", kMaxPipelinedPieces,
                     " pieces in all, got ", num_ranks, " ranks x ", pieces, " pieces"));
  }
  if (pieces == 1) return SynthesizeStragglarPostArrival(num_ranks);
  std::optional<PostArrivalSchedule> best;
  for (const Variant& variant : kVariants) {
    std::optional<PostArrivalSchedule> rounds = BuildPipelined(num_ranks, pieces, variant);
    if (rounds.has_value() && (!best.has_value() || rounds->size() < best->size())) {
      best = std::move(rounds);
    }
  }
  if (!best.has_value()) {
    return absl::InternalError(absl::StrCat("no pipelined StragglAR schedule found for ", num_ranks,
                                            " ranks x ", pieces, " pieces"));
  }
  return *std::move(best);
}

}  // namespace stragglar
