// Synthesis, verification and simulation cost. Run: build/bin/synthesis_bench
// (docs/plans.md records the results with the machine).
#include <benchmark/benchmark.h>

#include "kernels/plan/verifier.h"
#include "kernels/synth/stragglar_schedule.h"
#include "kernels/synth/synthesizers.h"
#include "policy/model/simulator.h"

namespace stragglar {
namespace {

// The post-arrival schedule alone: what the synthesizer itself costs (uncached).
void BM_StragglarPostArrivalSynthesis(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<PostArrivalSchedule> schedule = SynthesizeStragglarPostArrival(n);
    benchmark::DoNotOptimize(schedule);
  }
}
BENCHMARK(BM_StragglarPostArrivalSynthesis)
    ->Arg(8)
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond);

// A new straggler for a cached n: relabelling the canonical plan.
void BM_StragglarRelabel(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  (void)SynthesizeStragglar(n, n - 1);  // warm the cache
  int straggler = 0;
  for (auto _ : state) {
    absl::StatusOr<Plan> plan = SynthesizeStragglar(n, straggler);
    benchmark::DoNotOptimize(plan);
    straggler = (straggler + 1) % (n - 1);
  }
}
BENCHMARK(BM_StragglarRelabel)->Arg(8)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_VerifyStragglar(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Plan plan = *SynthesizeStragglar(n, 0);
  for (auto _ : state) benchmark::DoNotOptimize(VerifyPlan(plan));
}
BENCHMARK(BM_VerifyStragglar)->Arg(8)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_SimulateStragglar(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Plan plan = *SynthesizeStragglar(n, 0);
  const std::vector<double> arrival = OneLateRank(n, 0, 0.02);
  for (auto _ : state) {
    benchmark::DoNotOptimize(SimulatePlan(plan, 1 << 30, LinkModel{}, arrival));
  }
}
BENCHMARK(BM_SimulateStragglar)->Arg(8)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);

// Log-depth StragglAR at the scale it is for (issue: verified at n up to 4096 in seconds). Args:
// ranks, blocks (the sizes `stragglar sim` picks at 64 MiB and 1 GiB).
void BM_LogDepthSynthesis(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(SynthesizeLogDepthStragglar(n, n / 2, state.range(1)));
  }
}
BENCHMARK(BM_LogDepthSynthesis)
    ->Args({1024, 16})
    ->Args({4096, 32})
    ->Args({4096, 128})
    ->Unit(benchmark::kMillisecond);

void BM_VerifyLogDepth(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Plan plan = *SynthesizeLogDepthStragglar(n, n / 2, state.range(1));
  for (auto _ : state) benchmark::DoNotOptimize(VerifyPlan(plan));
}
BENCHMARK(BM_VerifyLogDepth)
    ->Args({1024, 16})
    ->Args({4096, 32})
    ->Args({4096, 128})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stragglar

BENCHMARK_MAIN();
