#include "kernels/synth/queue_order.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/synth/queue_times.h"

namespace stragglar {
namespace {

// Whether every transfer of `group` may run on its own: none reads a chunk another one writes
// (such a group relies on the round's reads seeing the values from before it).
bool Separable(const std::vector<Transfer>& group) {
  if (group.size() < 2) return false;
  for (const Transfer& reader : group) {
    for (const Transfer& writer : group) {
      if (&reader == &writer || reader.src != writer.dst) continue;
      for (int32_t chunk : reader.chunks) {
        if (std::find(writer.chunks.begin(), writer.chunks.end(), chunk) != writer.chunks.end()) {
          return false;
        }
      }
    }
  }
  return true;
}

// Each group's dependencies in list order: the earlier groups that wrote a chunk it reads or
// writes, or read one it writes. As `dependents` (edges forward) and a count per group.
struct Dependencies {
  std::vector<std::vector<int>> dependents;
  std::vector<int> pending;
};

Dependencies DependenciesOf(const std::vector<std::vector<Transfer>>& groups, int num_ranks,
                            int num_chunks) {
  const size_t cells = static_cast<size_t>(num_ranks) * num_chunks;
  std::vector<int32_t> last_writer(cells, -1);
  // The groups that read each cell since its last write, as linked lists in one pool.
  std::vector<int32_t> first_reader(cells, -1);
  std::vector<std::pair<int32_t, int32_t>> readers;  // (group, next)
  const int count = static_cast<int>(groups.size());
  Dependencies dependencies{.dependents = std::vector<std::vector<int>>(count),
                            .pending = std::vector<int>(count, 0)};
  std::vector<int> found;
  for (int g = 0; g < count; ++g) {
    found.clear();
    const auto read = [&](size_t cell) {
      if (last_writer[cell] >= 0) found.push_back(last_writer[cell]);
      readers.push_back({g, first_reader[cell]});
      first_reader[cell] = static_cast<int32_t>(readers.size() - 1);
    };
    const auto cell_of = [&](int rank, int32_t chunk) {
      return static_cast<size_t>(rank) * num_chunks + chunk;
    };
    for (const Transfer& transfer : groups[g]) {
      for (int32_t chunk : transfer.chunks) {
        read(cell_of(transfer.src, chunk));
        if (transfer.op == TransferOp::kReduce) read(cell_of(transfer.dst, chunk));
      }
    }
    for (const Transfer& transfer : groups[g]) {
      for (int32_t chunk : transfer.chunks) {
        const size_t cell = cell_of(transfer.dst, chunk);
        if (last_writer[cell] >= 0) found.push_back(last_writer[cell]);
        for (int32_t at = first_reader[cell]; at >= 0; at = readers[at].second) {
          found.push_back(readers[at].first);
        }
        last_writer[cell] = g;
        first_reader[cell] = -1;
      }
    }
    std::sort(found.begin(), found.end());
    found.erase(std::unique(found.begin(), found.end()), found.end());
    for (int earlier : found) {
      if (earlier == g) continue;
      dependencies.dependents[earlier].push_back(g);
      ++dependencies.pending[g];
    }
  }
  return dependencies;
}

// A run of the list on per-class queues, timed by `timing`, every rank there from 0.
class QueueClock {
 public:
  QueueClock(int num_ranks, int num_chunks, const QueueTiming& timing)
      : num_chunks_(num_chunks),
        timing_(timing),
        times_(num_chunks, std::vector<double>(static_cast<size_t>(num_ranks), 0.0)) {}

  int LinkOf(const Transfer& transfer) const {
    return transfer.src / timing_.ranks_per_node == transfer.dst / timing_.ranks_per_node ? 0 : 1;
  }
  // When the whole group can start: its latest transfer's earliest start.
  double Start(const std::vector<Transfer>& group) const {
    double start = 0;
    for (const Transfer& transfer : group) {
      start = std::max(start, times_.Start(transfer, LinkOf(transfer)));
    }
    return start;
  }
  // Runs `group`, each transfer from its own earliest start (all started before any finishes:
  // a group's reads see the values from before it).
  void Run(const std::vector<Transfer>& group) {
    std::vector<double> end_s;
    for (const Transfer& transfer : group) {
      const MessageCost& cost = LinkOf(transfer) == 0 ? timing_.intra_node : timing_.inter_node;
      const double bytes =
          timing_.bytes * static_cast<double>(transfer.chunks.size()) / num_chunks_;
      end_s.push_back(times_.Start(transfer, LinkOf(transfer)) + cost.alpha_s +
                      bytes * cost.seconds_per_byte);
    }
    for (size_t t = 0; t < group.size(); ++t) times_.Finish(group[t], LinkOf(group[t]), end_s[t]);
  }

 private:
  int num_chunks_;
  QueueTiming timing_;
  QueueTimes times_;
};

}  // namespace

absl::Status ValidateQueueTiming(const QueueTiming& timing) {
  const auto valid = [](double value) { return std::isfinite(value) && value >= 0; };
  if (!(valid(timing.bytes) && timing.bytes > 0) || timing.ranks_per_node < 1 ||
      !valid(timing.intra_node.alpha_s) || !valid(timing.intra_node.seconds_per_byte) ||
      !valid(timing.inter_node.alpha_s) || !valid(timing.inter_node.seconds_per_byte)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "queue timing: want bytes > 0, ranks per node >= 1 and finite costs >= 0; got ",
        timing.bytes, " bytes, ", timing.ranks_per_node, " ranks per node"));
  }
  return absl::OkStatus();
}

void QueueOrderPlacer::PlaceInto(RoundPacker& packer, int not_before, const QueueTiming& timing) {
  // A group whose transfers are independent is timed transfer by transfer: a rail's round holds
  // one transfer per node, each ready at its own time.
  std::vector<std::vector<Transfer>> groups;
  for (std::vector<Transfer>& group : groups_) {
    if (!Separable(group)) {
      groups.push_back(std::move(group));
      continue;
    }
    for (Transfer& transfer : group) groups.push_back({std::move(transfer)});
  }
  groups_.clear();
  Dependencies dependencies = DependenciesOf(groups, num_ranks_, num_chunks_);

  // List scheduling: of the groups whose dependencies have run, the one that can start first
  // (ties in list order). A key can only grow as queues fill, so a stale one is retimed and put
  // back; the keys taken never decrease, and a queue serves its transfers in the order taken.
  QueueClock clock(num_ranks_, num_chunks_, timing);
  using Ready = std::tuple<double, int>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready;
  const int count = static_cast<int>(groups.size());
  for (int g = 0; g < count; ++g) {
    if (dependencies.pending[g] == 0) ready.push({clock.Start(groups[g]), g});
  }
  // Per rank and class, the last round its send queue (even index) or receive queue (odd) holds.
  std::vector<int> last_round(4 * static_cast<size_t>(num_ranks_), not_before - 1);
  const auto queue_of = [&](const Transfer& transfer, bool sending) {
    const int link = clock.LinkOf(transfer);
    return 4 * (sending ? transfer.src : transfer.dst) + 2 * link + (sending ? 0 : 1);
  };
  while (!ready.empty()) {
    const auto [key, g] = ready.top();
    ready.pop();
    if (const double start = clock.Start(groups[g]); start > key) {
      ready.push({start, g});
      continue;
    }
    clock.Run(groups[g]);
    int round = not_before;
    for (const Transfer& transfer : groups[g]) {
      round = std::max({round, last_round[queue_of(transfer, true)] + 1,
                        last_round[queue_of(transfer, false)] + 1});
    }
    const std::vector<Transfer>& group = groups[g];
    round = packer.Place(group, round);
    for (const Transfer& transfer : group) {
      last_round[queue_of(transfer, true)] = round;
      last_round[queue_of(transfer, false)] = round;
    }
    for (int dependent : dependencies.dependents[g]) {
      if (--dependencies.pending[dependent] == 0) {
        ready.push({clock.Start(groups[dependent]), dependent});
      }
    }
  }
}

}  // namespace stragglar
