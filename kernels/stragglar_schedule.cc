// Baseline (temporary): exchanges in round r, then per round a greedy pairing of free senders and
// free receivers, newest chunk first. Always correct; not always L(n) rounds.
#include "kernels/stragglar_schedule.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {

int StragglarRoundLowerBound(int num_ranks) {
  int log2_ceil = 0;
  while ((1 << log2_ceil) < num_ranks) ++log2_ceil;
  return num_ranks - 2 + log2_ceil;
}

absl::StatusOr<PostArrivalSchedule> SynthesizeStragglarPostArrival(int num_ranks) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("StragglAR needs at least 2 ranks, got ", num_ranks));
  }
  const int n = num_ranks, sigma = n - 1, m = n - 1;
  std::vector<std::vector<char>> holds(n, std::vector<char>(m, 0));
  int missing = m * (m - 1);
  PostArrivalSchedule rounds;
  for (int t = 0; t < m || missing > 0; ++t) {
    std::vector<ScheduleMove>& moves = rounds.emplace_back();
    std::vector<char> send_busy(n, 0), recv_busy(n, 0);
    if (t < m) {
      moves.push_back({t, sigma, t});
      moves.push_back({sigma, t, t});
      send_busy[t] = recv_busy[t] = send_busy[sigma] = recv_busy[sigma] = 1;
    }
    recv_busy[sigma] = 1;
    std::vector<ScheduleMove> copies;
    for (int c = 0; c < std::min(t, m); ++c) {
      std::vector<int> senders, receivers;
      for (int r = 0; r < n; ++r) {
        if (!send_busy[r] && holds[r][c]) senders.push_back(r);
        if (!recv_busy[r] && r != sigma && !holds[r][c]) receivers.push_back(r);
      }
      for (size_t i = 0; i < senders.size() && i < receivers.size(); ++i) {
        send_busy[senders[i]] = recv_busy[receivers[i]] = 1;
        copies.push_back({senders[i], receivers[i], c});
      }
    }
    for (const ScheduleMove& move : copies) {
      holds[move.dst][move.chunk] = 1;
      --missing;
      moves.push_back(move);
    }
    if (t < m) holds[t][t] = holds[sigma][t] = 1;
  }
  return rounds;
}

}  // namespace stragglar
