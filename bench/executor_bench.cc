// Executed StragglAR vs Ring on the host executor (ranks = threads), with one rank injected late,
// next to the simulator's prediction for the same case with the link measured on this machine.
// Counters: predicted_s (model), measured/predicted, and after_arrival_s (mean time minus the
// delay). Also hierarchical StragglAR on an emulated machine of 2 nodes of 4 (HostTransport's
// emulated NICs), run round by round and on one queue per link class, side by side. Run:
//   build/bin/executor_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <barrier>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "kernels/exec/host/host_executor.h"
#include "kernels/program/program.h"
#include "kernels/synth/synthesizers.h"
#include "policy/model/simulator.h"
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

// How RunOnce's ranks run: a flat machine in round order by default; with `nodes`, an emulated
// machine of nodes, its ranks on one queue per link class when `queues` says so.
struct Machine {
  std::optional<HostTransport::NodeEmulation> nodes;
  bool queues = false;
};

// One AllReduce of `bytes` fp32 bytes on kRanks threads, each rank running its program (lowered
// once, as the runtime does); rank `late` starts `delay_s` late. Returns last completion - first
// start.
double RunOnce(const std::vector<RankProgram>& programs, int64_t bytes, double delay_s,
               std::vector<std::vector<float>>& buffers, const Machine& machine = {},
               int late = kLate) {
  HostTransport transport(kRanks);
  if (machine.nodes.has_value()) (void)transport.EmulateNodes(*machine.nodes);
  std::barrier start_line(kRanks);
  std::vector<double> end_s(kRanks);
  std::chrono::steady_clock::time_point origin;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      start_line.arrive_and_wait();
      if (rank == 0) origin = std::chrono::steady_clock::now();
      start_line.arrive_and_wait();
      if (rank == late) std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
      const AllReduceArgs args{.send = buffers[rank].data(),
                               .recv = buffers[rank].data(),
                               .count = bytes / static_cast<int64_t>(sizeof(float)),
                               .type = DataType::kFloat32,
                               .op = ReduceOp::kSum};
      const HostExecutorOptions options{
          .ranks_per_node =
              machine.nodes.has_value() && machine.queues ? machine.nodes->ranks_per_node : 0};
      (void)host::Run(programs[rank], args, options, transport);
      end_s[rank] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return *std::max_element(end_s.begin(), end_s.end());
}

// Lowers `plan` for every rank and times one call of it per iteration (manual time), rank `late`
// starting `delay_s` late. Returns the total, or nullopt after skipping the benchmark when there is
// no plan.
std::optional<double> TimeCalls(benchmark::State& state, const absl::StatusOr<Plan>& plan,
                                int64_t bytes, double delay_s, const Machine& machine = {},
                                int late = kLate) {
  if (!plan.ok()) {
    state.SkipWithError(std::string(plan.status().message()).c_str());
    return std::nullopt;
  }
  std::vector<RankProgram> programs;
  for (int rank = 0; rank < kRanks; ++rank) {
    programs.push_back(*LowerPlan(*plan, rank, {.in_place = true}));
  }
  std::vector<std::vector<float>> buffers(kRanks, std::vector<float>(bytes / sizeof(float), 1.0f));
  double total_s = 0;
  for (auto _ : state) {
    const double seconds = RunOnce(programs, bytes, delay_s, buffers, machine, late);
    total_s += seconds;
    state.SetIterationTime(seconds);
  }
  return total_s;
}

void BM_ExecutedAllReduce(benchmark::State& state, Algorithm algorithm) {
  const int64_t bytes = state.range(0);
  const double delay_s = state.range(1) * 1e-3;
  absl::StatusOr<Plan> plan =
      SynthesizePlan(algorithm, kRanks,
                     algorithm == Algorithm::kStragglar ? std::optional<int>(kLate) : std::nullopt);
  const std::optional<double> timed = TimeCalls(state, plan, bytes, delay_s);
  if (!timed.has_value()) return;
  const double total_s = *timed;
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

// Hierarchical StragglAR (log-depth rails of 2 blocks; whole, or its shards in 2 pieces) on 2
// emulated nodes of 4, between them 200 us and 1 GB/s, the last rank 20 ms late; counter
// after_arrival_s. Args: MiB, pieces, queues (0: round by round, 1: one queue per link class).
void BM_EmulatedNodes(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  const int pieces = static_cast<int>(state.range(1));
  const Machine machine{
      .nodes =
          HostTransport::NodeEmulation{.ranks_per_node = 4, .alpha_s = 200e-6, .bytes_per_s = 1e9},
      .queues = state.range(2) != 0};
  const int late = kRanks - 1;
  const double delay_s = 20e-3;
  const std::optional<double> total_s = TimeCalls(
      state, SynthesizeHierarchicalStragglar(2, 4, late, 2, pieces), bytes, delay_s, machine, late);
  if (!total_s.has_value()) return;
  state.counters["after_arrival_s"] = benchmark::Counter(*total_s / state.iterations() - delay_s);
}
BENCHMARK(BM_EmulatedNodes)
    ->ArgsProduct({{4, 16}, {1, 2}, {0, 1}})
    ->ArgNames({"MiB", "pieces", "queues"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(12);

}  // namespace
}  // namespace stragglar

BENCHMARK_MAIN();
