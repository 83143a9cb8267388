// What the adaptive policy costs a rank per epoch: the calls' Decide and Record, then the epoch's
// AbsorbEpoch (detector, calibration simulations, the next decision's pricing), on one core fed
// the payload every rank would exchange. The preload libraries pay this inside the call that
// closes an epoch. Run: build/bin/policy_bench (docs/policy.md records results with the machine).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "kernels/synth/synthesizers.h"
#include "policy/model/simulator.h"
#include "runtime/runtime_core.h"

namespace stragglar {
namespace {

constexpr int kEpochCalls = 16;

// A CPU host's link, as the MPI preload measures one: 5 us, 3 GB/s.
LinkModel HostLink() { return {.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9}; }

// Rank 0's runtime on `n` ranks, `per_node` to a node (0: one machine), kEpochCalls an epoch.
RuntimeCore EpochCore(int n, int per_node, const LinkModel& link) {
  RuntimeConfig config;
  config.epoch_calls = kEpochCalls;
  if (per_node > 0) config.topology = Topology{.nodes = n / per_node, .ranks_per_node = per_node};
  return *RuntimeCore::Create(config, 0, n, link);
}

// Args: ranks, bytes, the last rank's delay in us (0: nobody late), ranks per node (0: one node;
// else the policy prices a machine of nodes, hierarchical StragglAR among its shapes), and a slow
// link (0: none; else rank n / 2's link that many times slower, the link probe's verdict, so that
// StragglAR around it is priced beside the rest: a late rank and a slow link at once when both are
// set).
void BM_PolicyEpoch(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1);
  const double delay_s = static_cast<double>(state.range(2)) * 1e-6;
  LinkModel link = HostLink();
  if (state.range(4) > 0) {
    link.slow_rank = n / 2;
    link.slow_factor = static_cast<double>(state.range(4));
  }
  RuntimeCore core = EpochCore(n, static_cast<int>(state.range(3)), link);
  const double duration_s = 2.0 * static_cast<double>(bytes) / link.bandwidth_bytes_per_s;
  int64_t call = 0;
  const auto epoch = [&] {
    std::vector<double> all;
    for (int i = 0; i < kEpochCalls; ++i, ++call) {
      benchmark::DoNotOptimize(core.Decide(bytes));
      core.Record({.arrival_s = 1.0 * call, .duration_s = duration_s});
    }
    // Every rank's payload: the same calls, the last rank late by the delay.
    const std::vector<double> mine = core.EpochPayload();
    for (int rank = 0; rank < n; ++rank) {
      for (size_t i = 0; i < mine.size(); i += 2) {
        const bool late = rank == n - 1;
        all.push_back(mine[i] + (late ? delay_s : 1e-6 * rank));
        all.push_back(mine[i + 1] + (late ? 0.0 : delay_s - 1e-6 * rank));  // waits for it
      }
    }
    benchmark::DoNotOptimize(core.AbsorbEpoch(all));
  };
  // Two epochs untimed: the plans are synthesized once per communicator, not per epoch, and the
  // second epoch has a straggler to price.
  epoch();
  epoch();
  for (auto _ : state) epoch();
  state.SetLabel("one epoch of 16 calls");
}
BENCHMARK(BM_PolicyEpoch)
    ->ArgsProduct({{4, 8, 64, 256, 1024, 4096}, {1 << 20, 16 << 20}, {0, 20000}, {0}, {0}})
    ->ArgsProduct({{64, 128, 256, 512, 1024, 4096}, {16 << 20}, {0, 20000}, {8}, {0}})
    ->ArgsProduct({{8, 64, 256, 1024}, {1 << 20, 16 << 20}, {0, 20000}, {0}, {5}})
    ->Unit(benchmark::kMicrosecond);

// One epoch of 16 calls of 16 MiB where no rank stays late: the latest rank, late by 2 us per
// rank, moves each epoch among `wander` ranks spread over the job, and the chooser prices StragglAR
// around it. The plan cache prices every straggler through the plan around the last rank, on
// nodes through its index renamed (docs/policy.md), so memory (`/usr/bin/time`) does not grow
// with the ranks visited; on one machine an epoch costs about what it costs with one late rank.
// Each epoch's noise moves too, so the rank predicted last is new most epochs until every rank has
// been: `new_latest` is the fraction of timed epochs whose predicted latest rank is new.
// Args: ranks, wander, ranks per node (0: one machine), and first visits: 0 times epochs after the
// `wander` untimed ones (a mix of first visits and later ones, by the iterations run), 1 times a
// fixed n - wander epochs, nearly all first visits (the goal's worst case), 2 times epochs only
// after n untimed ones (every rank visited: steady state).
void BM_PolicyEpochWanderingLatest(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int wander = static_cast<int>(state.range(1));
  const int64_t visits = state.range(3);
  RuntimeCore core = EpochCore(n, static_cast<int>(state.range(2)), HostLink());
  const int64_t bytes = 16 << 20;
  int64_t call = 0;
  int64_t epochs = 0;
  std::vector<bool> was_latest(static_cast<size_t>(n), false);
  int64_t new_latest = 0;
  const auto epoch = [&] {
    const int latest = static_cast<int>(epochs++ % wander) * (n / wander);
    for (int i = 0; i < kEpochCalls; ++i, ++call) {
      benchmark::DoNotOptimize(core.Decide(bytes));
      core.Record({.arrival_s = 1.0 * call, .duration_s = 0.01});
    }
    const std::vector<double> mine = core.EpochPayload();
    std::vector<double> all;
    for (int rank = 0; rank < n; ++rank) {
      for (size_t i = 0; i < mine.size(); i += 2) {
        all.push_back(mine[i] + (rank == latest ? 2e-6 * n : 1e-6 * ((rank * 31 + epochs) % n)));
        all.push_back(mine[i + 1]);
      }
    }
    benchmark::DoNotOptimize(core.AbsorbEpoch(all));
  };
  // The rank the next epoch's decisions price StragglAR around; counts it if new.
  const auto count_latest = [&] {
    const std::vector<double> lag_s = core.ExportState().predicted_lag_s;
    const size_t predicted = std::max_element(lag_s.begin(), lag_s.end()) - lag_s.begin();
    if (!was_latest[predicted]) ++new_latest;
    was_latest[predicted] = true;
  };
  for (int i = 0; i < (visits == 2 ? n : wander); ++i) {  // untimed
    epoch();
    count_latest();
  }
  new_latest = 0;
  for (auto _ : state) {
    epoch();
    state.PauseTiming();
    count_latest();
    state.ResumeTiming();
  }
  state.counters["new_latest"] =
      static_cast<double>(new_latest) / static_cast<double>(state.iterations());
  state.SetLabel("one epoch of 16 calls");
}
BENCHMARK(BM_PolicyEpochWanderingLatest)
    ->Args({256, 8, 0, 0})
    ->Args({1024, 8, 0, 0})
    ->Args({1024, 64, 0, 0})
    ->Args({256, 8, 8, 0})
    ->Args({1024, 8, 8, 0})
    ->Args({4096, 8, 0, 0})
    ->Args({4096, 8, 8, 0})
    ->Args({1024, 8, 8, 2})
    ->ArgNames({"ranks", "wander", "per_node", "visits"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PolicyEpochWanderingLatest)
    ->Args({1024, 8, 8, 1})
    ->ArgNames({"ranks", "wander", "per_node", "visits"})
    ->Iterations(1024 - 8)
    ->Unit(benchmark::kMicrosecond);

// One simulation of a whole plan on arrivals with one rank 20 ms late, round by round (runs 0:
// SimulatePlan) or with its ring runs in closed form (runs 1: what the policy does), side by side.
// Args: algorithm (0 ring, 1 stragglar), ranks, runs.
void BM_SimulatePlan(benchmark::State& state) {
  const int n = static_cast<int>(state.range(1));
  const Plan plan = state.range(0) == 0 ? *SynthesizeRing(n) : *SynthesizeStragglar(n, n - 1);
  const std::vector<RingRun> runs =
      state.range(2) != 0 ? FindRingRuns(plan) : std::vector<RingRun>{};
  const std::vector<double> arrival = OneLateRank(n, n - 1, 20e-3);
  const LinkModel link = HostLink();
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        SimulateRounds(plan, runs, 0, plan.num_rounds(), 16 << 20, link, arrival));
  }
  state.SetLabel(state.range(0) == 0 ? "ring" : "stragglar");
}
BENCHMARK(BM_SimulatePlan)
    ->ArgsProduct({{0, 1}, {64, 1024}, {0, 1}})
    ->ArgNames({"stragglar", "ranks", "runs"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace stragglar

BENCHMARK_MAIN();
