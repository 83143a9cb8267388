#include "policy/ring_runs.h"

#include <algorithm>
#include <deque>
#include <optional>

#include "absl/container/flat_hash_map.h"

namespace stragglar {
namespace {

// The cycle of a ring round (each participant sends to exactly one and receives from exactly
// one, all in a single cycle, every transfer with as many chunks), starting at the first
// transfer's sender; nullopt for any other round.
std::optional<std::vector<int>> RingCycle(const Round& round, int num_ranks) {
  const int m = static_cast<int>(round.transfers.size());
  if (m < 2) return std::nullopt;
  std::vector<int> next(num_ranks, -1);
  std::vector<char> receives(num_ranks, 0);
  const size_t chunks = round.transfers.front().chunks.size();
  for (const Transfer& transfer : round.transfers) {
    if (transfer.src == transfer.dst || next[transfer.src] != -1 || receives[transfer.dst] ||
        transfer.chunks.size() != chunks) {
      return std::nullopt;
    }
    next[transfer.src] = transfer.dst;
    receives[transfer.dst] = 1;
  }
  std::vector<int> cycle;
  cycle.reserve(m);
  int rank = round.transfers.front().src;
  for (int i = 0; i < m; ++i) {
    // Back at the start early: more than one cycle.
    if (rank < 0 || next[rank] < 0 || (i > 0 && rank == cycle.front())) return std::nullopt;
    cycle.push_back(rank);
    rank = next[rank];
  }
  if (rank != cycle.front()) return std::nullopt;  // more than one cycle
  return cycle;
}

// Whether `round` is the ring step of `run`: the same senders, each to the same receiver.
bool SameStep(const Round& round, const RingRun& run, const std::vector<int>& next_of) {
  if (round.transfers.size() != run.cycle.size()) return false;
  for (const Transfer& transfer : round.transfers) {
    if (next_of[transfer.src] != transfer.dst ||
        static_cast<int>(transfer.chunks.size()) != run.chunks) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<RingRun> FindRingRuns(const Plan& plan, int min_rounds) {
  std::vector<RingRun> runs;
  std::vector<int> next_of(plan.num_ranks, -1);
  int r = 0;
  while (r < plan.num_rounds()) {
    std::optional<std::vector<int>> cycle = RingCycle(plan.rounds[r], plan.num_ranks);
    if (!cycle.has_value()) {
      ++r;
      continue;
    }
    RingRun run{.first_round = r,
                .rounds = 1,
                .cycle = *std::move(cycle),
                .chunks = static_cast<int>(plan.rounds[r].transfers.front().chunks.size())};
    std::fill(next_of.begin(), next_of.end(), -1);
    for (size_t i = 0; i < run.cycle.size(); ++i) {
      next_of[run.cycle[i]] = run.cycle[(i + 1) % run.cycle.size()];
    }
    while (r + run.rounds < plan.num_rounds() &&
           SameStep(plan.rounds[r + run.rounds], run, next_of)) {
      ++run.rounds;
    }
    r += run.rounds;
    if (run.rounds >= min_rounds) runs.push_back(std::move(run));
  }
  return runs;
}

void AdvanceRingRounds(const RingRun& run, int rounds, double transfer_seconds,
                       std::vector<double>& ready) {
  if (rounds <= 0) return;
  const int m = static_cast<int>(run.cycle.size());
  const auto at = [&](int i) { return ready[run.cycle[((i % m) + m) % m]]; };
  // The latest ready time within `rounds` places on the cycle, per position.
  std::vector<double> latest(m);
  if (2 * rounds + 1 >= m) {
    double all = at(0);
    for (int i = 1; i < m; ++i) all = std::max(all, at(i));
    std::fill(latest.begin(), latest.end(), all);
  } else {
    std::deque<int> window;  // positions in [i - rounds, i + rounds], their times decreasing
    for (int j = -rounds; j < m + rounds; ++j) {
      while (!window.empty() && at(window.back()) <= at(j)) window.pop_back();
      window.push_back(j);
      const int i = j - rounds;  // the position whose window now ends at j
      if (i < 0) continue;
      while (window.front() < i - rounds) window.pop_front();
      latest[i] = at(window.front());
    }
  }
  // Then `rounds` transfer times, added one round at a time as the simulator does (so that the
  // rounding is the same), once per distinct starting time.
  absl::flat_hash_map<double, double> after;
  for (int i = 0; i < m; ++i) {
    auto [it, inserted] = after.try_emplace(latest[i], latest[i]);
    if (inserted) {
      for (int k = 0; k < rounds; ++k) it->second += transfer_seconds;
    }
    ready[run.cycle[i]] = it->second;
  }
}

}  // namespace stragglar
