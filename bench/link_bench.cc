// The host cost of profiling a point-to-point transfer, the part the preload pays per
// ncclSend/ncclRecv once it interposes them (docs/pipeline.md): recording it in the link monitor
// and in the link metrics, and each epoch's summary amortized over the epoch's transfers. Goal:
// under 1 us per transfer. Side by side with an empty loop of the same shape.
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "exporters/pipeline_metrics.h"
#include "policy/link_monitor.h"
#include "prometheus/registry.h"

namespace stragglar {
namespace {

// Transfers of an S-stage pipeline with 32 per link per epoch; reports ns per transfer.
void BM_RecordTransfer(benchmark::State& state) {
  const int stages = static_cast<int>(state.range(0));
  const bool with_metrics = state.range(1) != 0;
  LinkMonitor monitor(PipelineLinks(stages));
  prometheus::Registry registry;
  PipelineMetrics metrics(registry, "bench", monitor.links());
  const int links = static_cast<int>(monitor.links().size());
  std::mt19937 random(1);
  std::lognormal_distribution<double> noise(0, 0.05);
  std::vector<double> seconds(4096);
  for (double& s : seconds) s = 1e-3 * noise(random);
  int64_t transfers = 0;
  size_t next = 0;
  for (auto _ : state) {
    const int link = static_cast<int>(transfers % links);
    const double s = seconds[next++ & 4095];
    monitor.Record(link, 16 << 20, s);
    if (with_metrics) metrics.OnTransfer(link, s);
    if (++transfers % (32 * links) == 0) {
      LinkEpochReport report = monitor.EndEpoch();
      if (with_metrics) metrics.OnEpoch(report);
      benchmark::DoNotOptimize(report);
    }
  }
  state.SetItemsProcessed(transfers);
  state.counters["ns_per_transfer"] = benchmark::Counter(
      static_cast<double>(transfers), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RecordTransfer)->ArgsProduct({{4, 8, 32}, {0, 1}})->ArgNames({"stages", "metrics"});

// The empty loop of the same shape, for the side-by-side baseline.
void BM_EmptyLoop(benchmark::State& state) {
  int64_t transfers = 0;
  for (auto _ : state) benchmark::DoNotOptimize(++transfers);
  state.SetItemsProcessed(transfers);
}
BENCHMARK(BM_EmptyLoop);

}  // namespace
}  // namespace stragglar

BENCHMARK_MAIN();
