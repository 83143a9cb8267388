// The host cost of profiling a point-to-point transfer, the part the preload pays per
// ncclSend/ncclRecv once it interposes them (docs/pipeline.md): recording it in the link monitor
// and in the link metrics, and each epoch's summary amortized over the epoch's transfers. Goal:
// under 1 us per transfer. Side by side with an empty loop of the same shape.
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "pipeline/link_monitor.h"
#include "pipeline/links/link_profiler.h"
#include "pipeline/links/link_reports.h"
#include "pipeline/links/pipeline_metrics.h"
#include "pipeline/links/transfer_log.h"
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

// The preload's whole host path per send/recv, for one rank of an S-stage pipeline: the
// interposer indexes and logs each call (TransferLog), and at each exchange the exchange thread
// takes the timed calls, encodes its report, decodes every rank's, matches both ends of every
// transfer and records the job's link times (each rank absorbs every rank's reports, so its cost
// grows with the stages). Reported per send/recv of this rank. The GPU timer's Begin/End (two
// event records) come on top; gpu_timer_test prints their cost on a GPU.
void BM_PreloadPath(benchmark::State& state) {
  const int stages = static_cast<int>(state.range(0));
  constexpr int kPerLink = 32;  // transfers per link per exchange
  std::unique_ptr<LinkProfiler> profiler = *LinkProfiler::Create({.stages = stages});
  TransferLog log;
  const auto poll = [](uint64_t) -> absl::StatusOr<std::optional<double>> { return 1e-3; };
  const auto release = [](uint64_t) {};
  // Rank 1's calls per exchange: a send and a receive each way on each of its 2 links.
  const std::vector<Link> mine = {{1, 0}, {0, 1}, {1, 2}, {2, 1}};
  const int slots = 4 * kPerLink;
  uint64_t exchange = 0;
  int64_t calls = 0;
  std::vector<std::vector<double>> blocks(stages);
  for (auto _ : state) {
    for (int k = 0; k < kPerLink; ++k) {
      for (const Link& link : mine) {
        const bool send = link.src == 1;
        const int peer = send ? link.dst : link.src;
        log.AddTimed(
            calls,
            {{.peer = peer, .send = send, .index = log.NextIndex(peer, send), .bytes = 16 << 20}});
        ++calls;
      }
    }
    // The exchange: every rank's report (the others' synthesized, untimed), decoded and matched.
    EncodeReport(log.TakeTimed(slots, poll, release), slots, blocks[1]);
    state.PauseTiming();
    std::vector<std::vector<TransferSide>> others(stages);
    for (const Link& link : PipelineLinks(stages)) {
      const bool peer_of_mine = link.src == 1 || link.dst == 1;
      for (int k = 0; k < kPerLink; ++k) {
        const uint64_t index = exchange * kPerLink + k;
        if (link.src != 1) {
          others[link.src].push_back(
              {.peer = link.dst, .send = true, .index = index, .bytes = 16 << 20, .seconds = 1e-3});
        }
        if (link.dst != 1) {
          others[link.dst].push_back({.peer = link.src,
                                      .send = false,
                                      .index = index,
                                      .bytes = 16 << 20,
                                      .seconds = peer_of_mine ? 2e-3 : 1e-3});
        }
      }
    }
    for (int rank = 0; rank < stages; ++rank) {
      if (rank != 1) EncodeReport(others[rank], slots, blocks[rank]);
    }
    state.ResumeTiming();
    std::vector<std::vector<TransferSide>> by_rank;
    for (const std::vector<double>& block : blocks) by_rank.push_back(*DecodeReport(block, slots));
    benchmark::DoNotOptimize(profiler->Absorb(by_rank));
    ++exchange;
  }
  state.SetItemsProcessed(calls);
  state.counters["ns_per_call"] = benchmark::Counter(
      static_cast<double>(calls), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PreloadPath)->Arg(4)->Arg(8)->Arg(32)->ArgName("stages");

// What the calling thread itself pays per send/recv (the rest is the exchange thread's): the
// index, and the unit logged for the exchange thread, which takes them 128 at a time.
void BM_InterposerPath(benchmark::State& state) {
  TransferLog log;
  const auto poll = [](uint64_t) -> absl::StatusOr<std::optional<double>> { return 1e-3; };
  const auto release = [](uint64_t) {};
  int64_t calls = 0;
  for (auto _ : state) {
    const bool send = (calls & 1) != 0;
    log.AddTimed(calls, {{.peer = 1, .send = send, .index = log.NextIndex(1, send)}});
    if (++calls % 128 == 0) {
      state.PauseTiming();
      benchmark::DoNotOptimize(log.TakeTimed(128, poll, release));
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(calls);
  state.counters["ns_per_call"] = benchmark::Counter(
      static_cast<double>(calls), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_InterposerPath);

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
