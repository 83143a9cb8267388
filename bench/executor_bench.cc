// Executed StragglAR vs Ring on the host executor (ranks = threads), with one rank injected late,
// next to the simulator's prediction for the same case with the link measured on this machine.
// Counters: predicted_s (model), measured/predicted, and after_arrival_s (mean time minus the
// delay). Run:
//   build/bin/executor_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <barrier>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/host_executor.h"
#include "kernels/program.h"
#include "kernels/synthesizers.h"
#include "policy/simulator.h"
#include "runtime/host_runtime.h"

namespace stragglar {
namespace {

constexpr int kRanks = 8;
constexpr int kLate = 5;

const LinkModel& MeasuredLink() {
  static const LinkModel link = [] {
    absl::StatusOr<LinkModel> measured = MeasureHostLink(kRanks);
    return measured.ok() ? *measured : LinkModel{};
  }();
  return link;
}

// One AllReduce of `bytes` fp32 bytes on kRanks threads, each rank running its program (lowered
// once, as the runtime does); rank kLate starts `delay_s` late. Returns last completion - first
// start.
double RunOnce(const std::vector<RankProgram>& programs, int64_t bytes, double delay_s,
               std::vector<std::vector<float>>& buffers) {
  HostTransport transport(kRanks);
  std::barrier start_line(kRanks);
  std::vector<double> end_s(kRanks);
  std::chrono::steady_clock::time_point origin;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      start_line.arrive_and_wait();
      if (rank == 0) origin = std::chrono::steady_clock::now();
      start_line.arrive_and_wait();
      if (rank == kLate) std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
      HostAllReduceArgs args{.send = buffers[rank].data(),
                             .recv = buffers[rank].data(),
                             .count = bytes / static_cast<int64_t>(sizeof(float)),
                             .type = DataType::kFloat32,
                             .op = ReduceOp::kSum};
      (void)ExecuteProgramOnHost(programs[rank], args, transport);
      end_s[rank] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return *std::max_element(end_s.begin(), end_s.end());
}

void BM_ExecutedAllReduce(benchmark::State& state, Algorithm algorithm) {
  const int64_t bytes = state.range(0);
  const double delay_s = state.range(1) * 1e-3;
  absl::StatusOr<Plan> plan =
      SynthesizePlan(algorithm, kRanks,
                     algorithm == Algorithm::kStragglar ? std::optional<int>(kLate) : std::nullopt);
  if (!plan.ok()) {
    state.SkipWithError(std::string(plan.status().message()).c_str());
    return;
  }
  std::vector<RankProgram> programs;
  for (int rank = 0; rank < kRanks; ++rank) {
    programs.push_back(*LowerPlan(*plan, rank, {.in_place = true}));
  }
  std::vector<std::vector<float>> buffers(kRanks, std::vector<float>(bytes / sizeof(float), 1.0f));
  double total_s = 0;
  for (auto _ : state) {
    const double seconds = RunOnce(programs, bytes, delay_s, buffers);
    total_s += seconds;
    state.SetIterationTime(seconds);
  }
  absl::StatusOr<SimulationResult> predicted = SimulatePlan(
      *plan, static_cast<double>(bytes), MeasuredLink(), OneLateRank(kRanks, kLate, delay_s));
  if (predicted.ok()) {
    state.counters["predicted_s"] = predicted->completion_s;
    // Mean measured time divided by the prediction.
    state.counters["measured/predicted"] =
        benchmark::Counter(total_s / predicted->completion_s, benchmark::Counter::kAvgIterations);
  }
  // The part an algorithm controls: from the late rank's start to the last completion (the
  // paper's measure, and what `stragglar run` reports as latency).
  state.counters["after_arrival_s"] = benchmark::Counter(total_s / state.iterations() - delay_s);
  state.SetBytesProcessed(state.iterations() * bytes);
}

void Cases(benchmark::internal::Benchmark* benchmark) {
  for (int64_t mib : {1, 16}) {
    for (int64_t delay_ms : {0, 5, 20}) benchmark->Args({mib << 20, delay_ms});
  }
  benchmark->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(12);
}

BENCHMARK_CAPTURE(BM_ExecutedAllReduce, ring, Algorithm::kRing)->Apply(Cases);
BENCHMARK_CAPTURE(BM_ExecutedAllReduce, stragglar, Algorithm::kStragglar)->Apply(Cases);

}  // namespace
}  // namespace stragglar

BENCHMARK_MAIN();
