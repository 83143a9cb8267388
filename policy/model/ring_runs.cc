#include "policy/model/ring_runs.h"

#include <algorithm>
#include <deque>
#include <numeric>
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
// Returns whether every position got the same time (the window is the whole cycle).
bool LatestWithin(const std::vector<int>& cycle, int rounds, const std::vector<double>& ready,
                  std::vector<double>& latest) {
  const int m = static_cast<int>(cycle.size());
  latest.resize(m);
  if (2 * rounds + 1 >= m) {
    double all = ready[cycle[0]];
    for (int i = 1; i < m; ++i) all = std::max(all, ready[cycle[i]]);
    std::fill(latest.begin(), latest.end(), all);
    return true;
  }
  // Positions j in [-rounds, m + rounds) wrap at most once, since 2 * rounds < m.
  const auto at = [&](int j) { return ready[cycle[j < 0 ? j + m : j >= m ? j - m : j]]; };
  // A monotonic queue of positions in [i - rounds, i + rounds], their times decreasing; it never
  // holds more than all of them, so a vector with a moving front serves.
  std::vector<int> window(static_cast<size_t>(m) + 2 * rounds);
  size_t front = 0, back = 0;
  for (int j = -rounds; j < m + rounds; ++j) {
    const double here = at(j);
    while (back > front && at(window[back - 1]) <= here) --back;
    window[back++] = j;
    const int i = j - rounds;  // the position whose window now ends at j
    if (i < 0) continue;
    while (window[front] < i - rounds) ++front;
    latest[i] = at(window[front]);
  }
  return false;
}

// `ready` of one cycle after `rounds` rounds whose hops all take `seconds`: the latest time within
// `rounds` places plus `rounds` transfer times, added one round at a time as the simulator does
// (so that the rounding is the same), once per distinct starting time (`after` keeps them).
void AdvanceOneCostCycle(const std::vector<int>& cycle, int rounds, double seconds,
                         absl::flat_hash_map<double, double>& after, std::vector<double>& ready,
                         std::vector<double>& latest) {
  if (LatestWithin(cycle, rounds, ready, latest)) {
    // One time for the whole cycle: no lookup per rank.
    double sum = latest.front();
    for (int k = 0; k < rounds; ++k) sum += seconds;
    for (int rank : cycle) ready[rank] = sum;
    return;
  }
  // Neighbours mostly share their latest time (all of them once the window is the whole cycle):
  // reuse the previous rank's sum before looking it up.
  double previous_latest = 0, previous_after = 0;
  for (size_t i = 0; i < cycle.size(); ++i) {
    if (i == 0 || latest[i] != previous_latest) {
      auto [it, inserted] = after.try_emplace(latest[i], latest[i]);
      if (inserted) {
        for (int k = 0; k < rounds; ++k) it->second += seconds;
      }
      previous_latest = latest[i];
      previous_after = it->second;
    }
    ready[cycle[i]] = previous_after;
  }
}

// The maximum of value(j) over a window [left, right] of integers whose ends never move back, in
// one pass over the j (a monotonic deque).
template <typename Value>
class SlidingMax {
 public:
  SlidingMax(Value value, int64_t first) : value_(std::move(value)), next_(first) {}

  std::optional<double> Max(int64_t left, int64_t right) {
    if (left > right) return std::nullopt;
    for (; next_ <= right; ++next_) {
      const double v = value_(next_);
      while (!window_.empty() && window_.back().second <= v) window_.pop_back();
      window_.emplace_back(next_, v);
    }
    while (!window_.empty() && window_.front().first < left) window_.pop_front();
    if (window_.empty()) return std::nullopt;
    return window_.front().second;
  }

 private:
  Value value_;
  int64_t next_;
  std::deque<std::pair<int64_t, double>> window_;  // values decreasing
};

// A cycle whose hops take two times, `fast_s` and `slow_s` > fast_s (a ring through several
// nodes: NVLink inside them, a NIC between). A round is a max-plus map: rank p is ready again at
// the latest of its neighbours' ready times plus the hop between them, and of its own plus its
// slower hop. So after k rounds p is ready at the latest, over the ranks j and the walks of k
// steps from j to p (move to a neighbour, or stay), of j's ready time plus the walk's steps. A
// step is slow when it crosses a slow hop or stays at a rank touching one (a "hot" rank), fast
// otherwise, so the best walk from j is the one with the fewest fast steps: it goes to a hot rank
// along the fewest fast hops and waits there. Cutting the cycle into blocks of ranks joined by fast
// hops (every block starts and ends at a hot rank), those walks are: an arc from a rank outside
// p's block entering it from either end, a detour through one end of p's own block, or a walk that
// meets no hot rank, all fast. Each is a sliding or prefix maximum, so one pass per kind.
void AdvanceTwoCostCycle(const std::vector<int>& cycle, const std::vector<double>& hop_s,
                         int rounds, std::vector<double>& ready) {
  const int m = static_cast<int>(cycle.size());
  const auto [fast_it, slow_it] = std::minmax_element(hop_s.begin(), hop_s.end());
  const double fast_s = *fast_it, slow_s = *slow_it, extra_s = slow_s - fast_s;
  // Positions start after a slow hop, so that no block wraps: position p is cycle[(first + p) % m].
  int first = 0;
  while (hop_s[(first + m - 1) % m] != slow_s) ++first;
  // The positions asked for lie within a lap or two of [0, m): wrapping by steps is cheaper than
  // a division, which these passes would pay for every rank.
  const auto wrap = [m](int64_t x, int64_t& lap) {
    for (; x < 0; x += m) --lap;
    for (; x >= m; x -= m) ++lap;
    return x;
  };
  const auto index_of = [&](int64_t x) {
    int64_t lap = 0;
    return wrap(x, lap);
  };
  const auto rank_at = [&](int64_t p) { return cycle[index_of(first + p)]; };
  const auto slow_after = [&](int p) { return hop_s[index_of(first + p)] == slow_s; };
  // fast_before[p]: fast hops among positions [0, p); past the cycle each lap adds all of them.
  std::vector<int64_t> fast_before(m + 1, 0);
  for (int p = 0; p < m; ++p) fast_before[p + 1] = fast_before[p] + (slow_after(p) ? 0 : 1);
  const int64_t fast_per_lap = fast_before[m];
  const auto fast_until = [&](int64_t x) {
    int64_t lap = 0;
    const int64_t within = wrap(x, lap);
    return fast_before[within] + lap * fast_per_lap;
  };
  std::vector<int> block_start(m), block_end(m);
  for (int p = 0; p < m; ++p) block_start[p] = p == 0 || slow_after(p - 1) ? p : block_start[p - 1];
  for (int p = m - 1; p >= 0; --p) block_end[p] = slow_after(p) ? p : block_end[p + 1];
  const std::vector<double> start = [&] {
    std::vector<double> times(m);
    for (int p = 0; p < m; ++p) times[p] = ready[rank_at(p)];
    return times;
  }();
  const int64_t k = rounds;
  // Walks that meet no hot rank: every step fast.
  std::vector<int> positions(m);
  for (int p = 0; p < m; ++p) positions[p] = rank_at(p);
  std::vector<double> best;
  LatestWithin(positions, rounds, ready, best);
  // Arcs from outside the block entering at its start: from j < s, k - (U(p) - U(j)) slow steps.
  SlidingMax from_left([&](int64_t j) { return start[index_of(j)] + extra_s * fast_until(j); }, -m);
  // Arcs entering at its end: from j > e, k - (U(j) - U(p)) slow steps.
  SlidingMax from_right([&](int64_t j) { return start[index_of(j)] - extra_s * fast_until(j); }, 0);
  for (int p = 0; p < m; ++p) {
    const int s = block_start[p], e = block_end[p];
    if (std::optional<double> v = from_left.Max(std::max<int64_t>(p - k, s - m), s - 1)) {
      best[p] = std::max(best[p], *v + extra_s * static_cast<double>(k - fast_until(p)));
    }
    if (std::optional<double> v = from_right.Max(e + 1, std::min<int64_t>(p + k, e + m))) {
      best[p] = std::max(best[p], *v + extra_s * static_cast<double>(k + fast_until(p)));
    }
  }
  // Detours through an end of p's own block: j -> s -> p takes (j - s) + (p - s) fast steps.
  std::vector<double> through_start(m), through_end(m);
  for (int p = 0; p < m; ++p) {
    const int s = block_start[p];
    const double here = start[p] - extra_s * (p - s);
    through_start[p] = p == s ? here : std::max(through_start[p - 1], here);
  }
  for (int p = m - 1; p >= 0; --p) {
    const int e = block_end[p];
    const double here = start[p] - extra_s * (e - p);
    through_end[p] = p == e ? here : std::max(through_end[p + 1], here);
  }
  for (int p = 0; p < m; ++p) {
    const int s = block_start[p], e = block_end[p];
    if (const int64_t spare = k - (p - s); spare >= 0) {
      best[p] = std::max(best[p], through_start[std::min<int64_t>(e, s + spare)] +
                                      extra_s * static_cast<double>(spare));
    }
    if (const int64_t spare = k - (e - p); spare >= 0) {
      best[p] = std::max(best[p], through_end[std::max<int64_t>(s, e - spare)] +
                                      extra_s * static_cast<double>(spare));
    }
  }
  const double fast_total_s = fast_s * static_cast<double>(k);
  for (int p = 0; p < m; ++p) ready[rank_at(p)] = best[p] + fast_total_s;
}

}  // namespace

int RingRun::transfers() const {
  int total = 0;
  for (const std::vector<int>& cycle : cycles) total += static_cast<int>(cycle.size());
  return total;
}

std::vector<RingRun> RingRunsOfRing(int num_ranks) {
  RingRun run{.first_round = 0, .rounds = 2 * (num_ranks - 1), .cycles = {{}}, .chunks = 1};
  run.cycles.front().resize(static_cast<size_t>(num_ranks));
  std::iota(run.cycles.front().begin(), run.cycles.front().end(), 0);
  return {std::move(run)};
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
  absl::flat_hash_map<double, double> after;
  std::vector<double> latest;
  for (const std::vector<int>& cycle : run.cycles) {
    AdvanceOneCostCycle(cycle, rounds, transfer_seconds, after, ready, latest);
  }
}

void AdvanceRingRounds(const RingRun& run, int rounds, absl::Span<const int> node_of,
                       double intra_node_seconds, double inter_node_seconds,
                       std::vector<double>& ready) {
  if (rounds <= 0) return;
  absl::flat_hash_map<double, double> one_cost_after[2];
  std::vector<double> hop_s, latest;
  for (const std::vector<int>& cycle : run.cycles) {
    const int m = static_cast<int>(cycle.size());
    hop_s.resize(m);
    bool crosses = false, stays = false;
    // Each rank's node once, compared with the next one's.
    const int first_node = node_of[cycle[0]];
    int node = first_node;
    for (int i = 0; i < m; ++i) {
      const int next_node = i + 1 < m ? node_of[cycle[i + 1]] : first_node;
      const bool inter = node != next_node;
      (inter ? crosses : stays) = true;
      hop_s[i] = inter ? inter_node_seconds : intra_node_seconds;
      node = next_node;
    }
    if (crosses && stays && intra_node_seconds != inter_node_seconds) {
      AdvanceTwoCostCycle(cycle, hop_s, rounds, ready);
    } else {
      AdvanceOneCostCycle(cycle, rounds, hop_s.front(), one_cost_after[crosses ? 1 : 0], ready,
                          latest);
    }
  }
}

}  // namespace stragglar
