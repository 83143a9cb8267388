// What the adaptive policy costs a rank per epoch: the calls' Decide and Record, then the epoch's
// AbsorbEpoch (detector, calibration simulations, the next decision's pricing), on one core fed
// the payload every rank would exchange. The preload libraries pay this inside the call that
// closes an epoch. Run: build/bin/policy_bench (docs/policy.md records results with the machine).
#include <benchmark/benchmark.h>

#include <vector>

#include "kernels/synthesizers.h"
#include "policy/simulator.h"
#include "runtime/runtime_core.h"

namespace stragglar {
namespace {

// Args: ranks, bytes, the last rank's delay in microseconds (0: nobody late).
// Args: ranks, bytes, delay in us, and ranks per node (0: one node; else the policy prices a
// machine of nodes, hierarchical StragglAR among its shapes).
void BM_PolicyEpoch(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1);
  const double delay_s = static_cast<double>(state.range(2)) * 1e-6;
  RuntimeConfig config;
  config.epoch_calls = 16;
  if (const int per_node = static_cast<int>(state.range(3)); per_node > 0) {
    config.topology = Topology{.nodes = n / per_node, .ranks_per_node = per_node};
  }
  // A CPU host's link, as the MPI preload measures one: 5 us, 3 GB/s.
  const LinkModel link{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9};
  RuntimeCore core = *RuntimeCore::Create(config, 0, n, link);
  const double duration_s = 2.0 * static_cast<double>(bytes) / link.bandwidth_bytes_per_s;
  int64_t call = 0;
  const auto epoch = [&] {
    std::vector<double> all;
    for (int i = 0; i < config.epoch_calls; ++i, ++call) {
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
    ->ArgsProduct({{4, 8, 64, 256, 1024, 4096}, {1 << 20, 16 << 20}, {0, 20000}, {0}})
    ->ArgsProduct({{64, 128, 256, 512, 1024, 4096}, {16 << 20}, {0, 20000}, {8}})
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
  const LinkModel link{.alpha_s = 5e-6, .bandwidth_bytes_per_s = 3e9};
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
