#include "policy/ring_runs.h"

#include <algorithm>
#include <deque>
#include <optional>

#include "absl/container/flat_hash_map.h"

namespace stragglar {
namespace {

// The cycles of a ring round (each participant sends to exactly one and receives from exactly
// one, every transfer with as many chunks), each starting at its first sender in the round;
// nullopt for any other round.
std::optional<std::vector<std::vector<int>>> RingCycles(const Round& round, int num_ranks) {
  if (round.transfers.empty()) return std::nullopt;
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
  std::vector<std::vector<int>> cycles;
  std::vector<char> placed(num_ranks, 0);
  for (const Transfer& transfer : round.transfers) {
    if (placed[transfer.src]) continue;
    std::vector<int>& cycle = cycles.emplace_back();
    int rank = transfer.src;
    // A rank that receives nothing ends a path, not a cycle.
    while (!placed[rank]) {
      if (next[rank] < 0 || !receives[rank]) return std::nullopt;
      placed[rank] = 1;
      cycle.push_back(rank);
      rank = next[rank];
    }
    if (rank != cycle.front()) return std::nullopt;
  }
  return cycles;
}

// Whether `round` is the ring step of `run`: the same senders, each to the same receiver.
bool SameStep(const Round& round, const RingRun& run, const std::vector<int>& next_of) {
  if (static_cast<int>(round.transfers.size()) != run.transfers()) return false;
  for (const Transfer& transfer : round.transfers) {
    if (next_of[transfer.src] != transfer.dst ||
        static_cast<int>(transfer.chunks.size()) != run.chunks) {
      return false;
    }
  }
  return true;
}

// The latest ready time within `rounds` places of each position of `cycle`, into `latest`.
void LatestWithin(const std::vector<int>& cycle, int rounds, const std::vector<double>& ready,
                  std::vector<double>& latest) {
  const int m = static_cast<int>(cycle.size());
  const auto at = [&](int i) { return ready[cycle[((i % m) + m) % m]]; };
  latest.resize(m);
  if (2 * rounds + 1 >= m) {
    double all = at(0);
    for (int i = 1; i < m; ++i) all = std::max(all, at(i));
    std::fill(latest.begin(), latest.end(), all);
    return;
  }
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

}  // namespace

int RingRun::transfers() const {
  int total = 0;
  for (const std::vector<int>& cycle : cycles) total += static_cast<int>(cycle.size());
  return total;
}

std::vector<RingRun> FindRingRuns(const Plan& plan, int min_rounds) {
  std::vector<RingRun> runs;
  std::vector<int> next_of(plan.num_ranks, -1);
  int r = 0;
  while (r < plan.num_rounds()) {
    std::optional<std::vector<std::vector<int>>> cycles =
        RingCycles(plan.rounds[r], plan.num_ranks);
    if (!cycles.has_value()) {
      ++r;
      continue;
    }
    RingRun run{.first_round = r,
                .rounds = 1,
                .cycles = *std::move(cycles),
                .chunks = static_cast<int>(plan.rounds[r].transfers.front().chunks.size())};
    std::fill(next_of.begin(), next_of.end(), -1);
    for (const std::vector<int>& cycle : run.cycles) {
      for (size_t i = 0; i < cycle.size(); ++i) next_of[cycle[i]] = cycle[(i + 1) % cycle.size()];
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
  // Then `rounds` transfer times, added one round at a time as the simulator does (so that the
  // rounding is the same), once per distinct starting time.
  absl::flat_hash_map<double, double> after;
  std::vector<double> latest;
  for (const std::vector<int>& cycle : run.cycles) {
    LatestWithin(cycle, rounds, ready, latest);
    for (size_t i = 0; i < cycle.size(); ++i) {
      auto [it, inserted] = after.try_emplace(latest[i], latest[i]);
      if (inserted) {
        for (int k = 0; k < rounds; ++k) it->second += transfer_seconds;
      }
      ready[cycle[i]] = it->second;
    }
  }
}

}  // namespace stragglar
