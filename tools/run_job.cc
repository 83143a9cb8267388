#include "tools/run_job.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "exporters/prometheus_exporter.h"
#include "exporters/run_summary.h"
#include "exporters/trace.h"
#include "kernels/exact_data.h"
#include "kernels/host_executor.h"
#include "runtime/host_runtime.h"
#include "runtime/replay.h"
#include "runtime/units.h"

namespace stragglar {
namespace {

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index =
      std::min(values.size() - 1, static_cast<size_t>(fraction * (values.size() - 1) + 0.5));
  return values[index];
}

double Mean(const std::vector<double>& values, size_t end) {
  end = std::min(end, values.size());
  if (end == 0) return 0;
  return std::accumulate(values.begin(), values.begin() + end, 0.0) / end;
}

struct Phase {
  std::string name;
  RuntimeMode mode;
  // Filled by the run, indexed [iteration][rank] or [iteration].
  std::vector<std::vector<double>> arrival_s;
  std::vector<std::vector<double>> duration_s;
  std::vector<std::vector<Algorithm>> algorithm;
  // last completion - last arrival: what the collective adds once every rank is there, the time
  // an algorithm can change (the paper's measure)
  std::vector<double> latency_s;
  std::vector<double> span_s;  // last completion - first arrival: includes waiting for the last
  std::optional<int> detected;
  std::vector<DetectionEvent> detections;
  nlohmann::json calibration;
  int64_t first_stragglar_call = -1;
  double persistence = 0;
  bool correct = true;
};

std::map<std::string, int> AlgorithmCounts(const Phase& phase) {
  std::map<std::string, int> counts;
  for (Algorithm algorithm : kAllAlgorithms) counts[std::string(AlgorithmName(algorithm))] = 0;
  for (const std::vector<Algorithm>& per_rank : phase.algorithm) {
    ++counts[std::string(AlgorithmName(per_rank[0]))];
  }
  return counts;
}

std::string DescribeMix(const Phase& phase, int end) {
  std::map<Algorithm, int> counts;
  for (int it = 0; it < end; ++it) ++counts[phase.algorithm[it][0]];
  std::string mix;
  for (const auto& [algorithm, count] : counts) {
    absl::StrAppend(&mix, mix.empty() ? "" : " ", AlgorithmName(algorithm), " ", count);
  }
  return mix;
}

absl::Status ValidateOptions(const RunOptions& options) {
  if (options.ranks < 2 || options.ranks > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ranks must be in [2, 64] for the host runtime, got ", options.ranks));
  }
  if (options.straggler.has_value() &&
      (*options.straggler < 0 || *options.straggler >= options.ranks)) {
    return absl::InvalidArgumentError(absl::StrCat("--straggler ", *options.straggler,
                                                   " is outside [0, ", options.ranks - 1, "] for ",
                                                   options.ranks, " ranks"));
  }
  if (options.delay_s < 0 || options.delay_spread_s < 0 || options.compute_s < 0) {
    return absl::InvalidArgumentError("--delay must not be negative");
  }
  if (options.candidates.empty() || options.candidates.front() != Algorithm::kRing) {
    return absl::InvalidArgumentError(
        "--algorithms must start with ring (the baseline, and the policy's default)");
  }
  if (options.iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--iterations must be at least 1, got ", options.iterations));
  }
  if (options.epoch_calls < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--epoch-calls must be at least 1, got ", options.epoch_calls));
  }
  const int64_t element = DataTypeSize(options.type);
  if (options.bytes < 0 || options.bytes % element != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--bytes must be a multiple of ", element,
                                                   " (the size of ", DataTypeName(options.type),
                                                   "), got ", options.bytes));
  }
  if (options.bytes > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("--bytes must be at most 1 GiB for the host runtime");
  }
  return absl::OkStatus();
}

// Compute time of every rank in every step, drawn once so both phases see the same delays.
std::vector<std::vector<double>> DrawComputeTimes(const RunOptions& options) {
  std::mt19937_64 random(options.seed);
  std::normal_distribution<double> noise(0.0, options.compute_noise_s);
  std::normal_distribution<double> extra(options.delay_s, options.delay_spread_s);
  std::vector<std::vector<double>> compute(options.iterations, std::vector<double>(options.ranks));
  for (std::vector<double>& step : compute) {
    for (int rank = 0; rank < options.ranks; ++rank) {
      step[rank] = std::max(0.0, options.compute_s + noise(random));
      if (options.straggler == rank) step[rank] += std::max(0.0, extra(random));
    }
  }
  return compute;
}

// Runs every phase step by step, interleaved: in each step every rank computes and joins the
// baseline's collective, then computes again (the same time) and joins the adaptive one. Both see
// the same delays and the same machine conditions, so their ratio is not skewed by drift between
// two back-to-back runs.
absl::Status RunPhases(const RunOptions& options, const LinkModel& link,
                       prometheus::Registry* metrics,
                       const std::vector<std::vector<double>>& compute_s,
                       const std::vector<std::vector<std::byte>>& inputs,
                       const std::vector<std::byte>& expected, Phase& baseline, Phase& adaptive,
                       std::ostream& progress) {
  const int n = options.ranks;
  const int64_t count = options.bytes / DataTypeSize(options.type);
  Phase* phases[] = {&baseline, &adaptive};
  std::vector<std::unique_ptr<HostCommunicator>> comms;
  for (Phase* phase : phases) {
    RuntimeConfig config;
    config.mode = phase->mode;
    config.epoch_calls = options.epoch_calls;
    // Only the adaptive runtime learns across runs; the baseline always starts cold.
    if (phase->mode == RuntimeMode::kAdapt) {
      config.state_file = options.state_file;
      config.candidates = options.candidates;
    }
    std::vector<std::shared_ptr<CollectiveObserver>> observers;
    if (metrics != nullptr) {
      observers.push_back(std::make_shared<PrometheusObserver>(*metrics, phase->name, n));
    }
    absl::StatusOr<std::unique_ptr<HostCommunicator>> comm =
        HostCommunicator::Create(n, config, link, std::move(observers));
    if (!comm.ok()) return comm.status();
    comms.push_back(*std::move(comm));
    phase->arrival_s.assign(options.iterations, std::vector<double>(n));
    phase->duration_s.assign(options.iterations, std::vector<double>(n));
    phase->algorithm.assign(options.iterations, std::vector<Algorithm>(n));
    phase->latency_s.assign(options.iterations, 0);
    phase->span_s.assign(options.iterations, 0);
  }
  std::vector<std::vector<std::byte>> outputs(n, std::vector<std::byte>(options.bytes));
  std::atomic<bool> failed = false;
  std::atomic<bool> wrong[2] = {false, false};  // per phase
  std::mutex error_mutex;
  absl::Status first_error;
  std::barrier step_barrier(n);

  auto run_collective = [&](int index, int it, int rank) {
    Phase& phase = *phases[index];
    HostCommunicator& comm = *comms[index];
    // Poison the output so a call that does nothing cannot pass the check.
    std::memset(outputs[rank].data(), 0xA5, outputs[rank].size());
    step_barrier.arrive_and_wait();
    if (!failed) {
      std::this_thread::sleep_for(std::chrono::duration<double>(compute_s[it][rank]));
      HostAllReduceArgs args{.send = inputs[rank].data(),
                             .recv = outputs[rank].data(),
                             .count = count,
                             .type = options.type,
                             .op = ReduceOp::kSum};
      // The timing the runtime itself recorded, so the trace shows exactly what the detector saw.
      CallTiming timing;
      absl::StatusOr<CallDecision> decision = comm.AllReduce(rank, args, &timing);
      phase.arrival_s[it][rank] = timing.arrival_s;
      phase.duration_s[it][rank] = timing.duration_s;
      if (!decision.ok()) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (first_error.ok()) {
          first_error = absl::Status(decision.status().code(),
                                     absl::StrCat(phase.name, " step ", it, " rank ", rank, ": ",
                                                  decision.status().message()));
        }
        failed = true;
      } else {
        phase.algorithm[it][rank] = decision->algorithm;
        if (std::memcmp(outputs[rank].data(), expected.data(), expected.size()) != 0) {
          wrong[index] = true;
        }
      }
    }
    step_barrier.arrive_and_wait();
    if (rank != 0 || failed) return;
    double first_arrival = phase.arrival_s[it][0], last_arrival = 0, last_completion = 0;
    for (int r = 0; r < n; ++r) {
      first_arrival = std::min(first_arrival, phase.arrival_s[it][r]);
      last_arrival = std::max(last_arrival, phase.arrival_s[it][r]);
      last_completion = std::max(last_completion, phase.arrival_s[it][r] + phase.duration_s[it][r]);
    }
    phase.latency_s[it] = last_completion - last_arrival;
    phase.span_s[it] = last_completion - first_arrival;
  };

  auto report_epoch = [&](int it) {
    const int epochs = (options.iterations + options.epoch_calls - 1) / options.epoch_calls;
    for (int index = 0; index < 2; ++index) {
      const Phase& phase = *phases[index];
      const RuntimeCore& core = comms[index]->core(0);
      const std::optional<int> straggler = core.detector().straggler();
      std::string line = absl::StrFormat(
          "%-9s epoch %d/%d  steps %4d  straggler %-10s  %-26s  mean %s", phase.name,
          (it + options.epoch_calls) / options.epoch_calls, epochs, it + 1,
          straggler.has_value() ? absl::StrFormat("%d (%.0f%%)", *straggler,
                                                  100 * core.detector().persistence(*straggler))
                                : "-",
          DescribeMix(phase, it + 1), FormatSeconds(Mean(phase.latency_s, it + 1)));
      if (index == 1) {
        absl::StrAppendFormat(&line, "  speedup %.2fx",
                              Mean(baseline.latency_s, it + 1) / Mean(phase.latency_s, it + 1));
      }
      progress << line << std::endl;
    }
  };

  auto run_rank = [&](int rank) {
    for (int it = 0; it < options.iterations; ++it) {
      run_collective(0, it, rank);
      run_collective(1, it, rank);
      const bool epoch_end = (it + 1) % options.epoch_calls == 0 || it + 1 == options.iterations;
      if (rank == 0 && !failed && epoch_end) report_epoch(it);
    }
  };
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) threads.emplace_back(run_rank, rank);
  for (std::thread& thread : threads) thread.join();
  if (!first_error.ok()) return first_error;

  for (int index = 0; index < 2; ++index) {
    Phase& phase = *phases[index];
    for (int it = 0; it < options.iterations; ++it) {
      for (int rank = 1; rank < n; ++rank) {
        if (phase.algorithm[it][rank] != phase.algorithm[it][0]) {
          return absl::InternalError(absl::StrCat(phase.name, " step ", it, ": rank ", rank,
                                                  " ran ", AlgorithmName(phase.algorithm[it][rank]),
                                                  " but rank 0 ran ",
                                                  AlgorithmName(phase.algorithm[it][0])));
        }
      }
    }
    phase.correct = !wrong[index];
    const RuntimeCore& core = comms[index]->core(0);
    phase.detected = core.detector().straggler();
    phase.detections = core.detections();
    phase.calibration = core.calibration().ToJson();
    if (phase.detected.has_value()) {
      phase.persistence = core.detector().persistence(*phase.detected);
    }
    for (int it = 0; it < options.iterations; ++it) {
      if (phase.algorithm[it][0] == Algorithm::kStragglar) {
        phase.first_stragglar_call = it;
        break;
      }
    }
  }
  return absl::OkStatus();
}

// Opens an output file before the run, so a bad path costs a second, not the whole job.
absl::Status OpenOutput(const std::string& path, absl::string_view what, std::ofstream& file) {
  if (path.empty()) return absl::OkStatus();
  file.open(path);
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write the ", what, " file ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status Finish(std::ofstream& file, const std::string& path, absl::string_view what) {
  file.close();
  if (!file) return absl::DataLossError(absl::StrCat("failed writing the ", what, " file ", path));
  return absl::OkStatus();
}

// One row per rank per step: what the trace files and the lag summary are made of.
std::vector<TraceRow> TraceRows(const Phase& phase, int64_t bytes) {
  std::vector<TraceRow> rows;
  for (size_t it = 0; it < phase.arrival_s.size(); ++it) {
    for (size_t rank = 0; rank < phase.arrival_s[it].size(); ++rank) {
      rows.push_back({.call = static_cast<int64_t>(it),
                      .rank = static_cast<int>(rank),
                      .arrival_s = phase.arrival_s[it][rank],
                      .duration_s = phase.duration_s[it][rank],
                      .bytes = bytes,
                      .algorithm = std::string(AlgorithmName(phase.algorithm[it][rank]))});
    }
  }
  return rows;
}

nlohmann::json Timings(const std::vector<double>& latency_s) {
  return {{"mean_s", Mean(latency_s, latency_s.size())},
          {"p50_s", Percentile(latency_s, 0.5)},
          {"p99_s", Percentile(latency_s, 0.99)}};
}

}  // namespace

absl::StatusOr<nlohmann::json> RunJob(const RunOptions& options, std::ostream& progress) {
  if (absl::Status status = ValidateOptions(options); !status.ok()) return status;
  std::ofstream trace_file, trace_json_file, summary_file;
  if (absl::Status status = OpenOutput(options.trace_path, "trace", trace_file); !status.ok()) {
    return status;
  }
  if (absl::Status status = OpenOutput(options.trace_json_path, "trace JSON", trace_json_file);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = OpenOutput(options.summary_json_path, "summary", summary_file);
      !status.ok()) {
    return status;
  }
  const int n = options.ranks;
  const int64_t count = options.bytes / DataTypeSize(options.type);
  progress << absl::StrFormat(
      "stragglar run: %d ranks (threads), %s %s sum per step, %d steps; compute %s per step; %s\n",
      n, FormatBytes(options.bytes), DataTypeName(options.type), options.iterations,
      FormatSeconds(options.compute_s),
      options.straggler.has_value()
          ? absl::StrFormat("rank %d late by %s (sd %s)", *options.straggler,
                            FormatSeconds(options.delay_s), FormatSeconds(options.delay_spread_s))
          : "no straggler");

  absl::StatusOr<LinkModel> link = MeasureHostLink(n);
  if (!link.ok()) return link.status();
  progress << absl::StrFormat(
      "measured link: alpha %s, bandwidth %s per transfer, shared by %.0f cores\n",
      FormatSeconds(link->alpha_s), FormatBandwidth(link->bandwidth_bytes_per_s),
      link->shared_lanes);

  // Inputs whose sum is exact in every type (bf16 included, up to 64 ranks and beyond) and every
  // reduction order, so every result must equal `expected` bit for bit.
  const exact_data::Spec data{
      .type = options.type, .op = ReduceOp::kSum, .ranks = n, .seed = options.seed};
  std::vector<std::vector<std::byte>> inputs(n, std::vector<std::byte>(options.bytes));
  for (int rank = 0; rank < n; ++rank) {
    exact_data::FillInput(data, rank, 0, count, inputs[rank].data());
  }
  std::vector<std::byte> expected(options.bytes);
  exact_data::FillReference(data, 0, count, expected.data());
  const std::vector<std::vector<double>> compute_s = DrawComputeTimes(options);

  // Metrics are optional: a port that cannot be bound costs the operator the endpoint, not the
  // job.
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<MetricsServer> metrics_server;
  if (options.metrics_port.has_value()) {
    registry = std::make_shared<prometheus::Registry>();
    absl::StatusOr<std::unique_ptr<MetricsServer>> server =
        MetricsServer::Start(options.metrics_address, *options.metrics_port, registry);
    if (server.ok()) {
      metrics_server = *std::move(server);
      progress << "metrics: http://" << metrics_server->endpoint() << "/metrics\n";
    } else {
      std::fprintf(stderr, "stragglar: %s; running without metrics\n",
                   std::string(server.status().message()).c_str());
      registry.reset();
    }
  }

  Phase baseline{.name = "baseline", .mode = RuntimeMode::kObserve};
  Phase adaptive{.name = "adaptive", .mode = RuntimeMode::kAdapt};
  if (absl::Status status = RunPhases(options, *link, registry.get(), compute_s, inputs, expected,
                                      baseline, adaptive, progress);
      !status.ok()) {
    return status;
  }
  const std::vector<TraceRow> rows = TraceRows(adaptive, options.bytes);
  if (trace_file.is_open()) {
    WriteCsvTrace(rows, trace_file);
    if (absl::Status status = Finish(trace_file, options.trace_path, "trace"); !status.ok()) {
      return status;
    }
  }
  if (trace_json_file.is_open()) {
    trace_json_file << PerfettoTrace(rows, "stragglar run (adaptive)").dump() << "\n";
    if (absl::Status status = Finish(trace_json_file, options.trace_json_path, "trace JSON");
        !status.ok()) {
      return status;
    }
  }
  const LagSummary lags = SummarizeLags(rows);

  const double speedup =
      Mean(baseline.latency_s, options.iterations) / Mean(adaptive.latency_s, options.iterations);
  const double span_speedup =
      Mean(baseline.span_s, options.iterations) / Mean(adaptive.span_s, options.iterations);
  nlohmann::json summary = {
      {"ranks", n},
      {"injected_straggler", options.straggler.has_value() ? nlohmann::json(*options.straggler)
                                                           : nlohmann::json(nullptr)},
      {"detected_straggler", adaptive.detected.has_value() ? nlohmann::json(*adaptive.detected)
                                                           : nlohmann::json(nullptr)},
      {"iterations", options.iterations},
      {"bytes", options.bytes},
      {"dtype", DataTypeName(options.type)},
      {"candidates",
       [&] {
         std::vector<std::string> names;
         for (Algorithm algorithm : options.candidates) {
           names.emplace_back(AlgorithmName(algorithm));
         }
         return names;
       }()},
      {"correct", baseline.correct && adaptive.correct},
      {"algorithm_counts", AlgorithmCounts(adaptive)},
      {"adaptive", Timings(adaptive.latency_s)},
      {"baseline", Timings(baseline.latency_s)},
      {"speedup", speedup},
      {"latency", "last completion - last arrival"},
      // The whole wait as a step sees it, including the straggler's delay (no algorithm removes
      // that part, so this ratio is smaller).
      {"span",
       {{"definition", "last completion - first arrival"},
        {"baseline_mean_s", Mean(baseline.span_s, options.iterations)},
        {"adaptive_mean_s", Mean(adaptive.span_s, options.iterations)},
        {"speedup", span_speedup}}},
      {"first_stragglar_call", adaptive.first_stragglar_call},
      {"stragglers", StragglersJson(adaptive.detections)},
      // measured / modelled time after the last arrival, per algorithm and size bucket
      {"calibration", adaptive.calibration},
      // Per-rank arrival lag and time spent waiting for the others, in the adaptive phase.
      {"lags", LagSummaryJson(lags)},
      {"persistence", adaptive.persistence},
      {"delay_s", options.delay_s},
      {"seed", options.seed},
      {"link",
       {{"alpha_s", link->alpha_s},
        {"bandwidth_Bps", link->bandwidth_bytes_per_s},
        {"shared_lanes", link->shared_lanes}}},
  };
  summary["baseline"]["algorithm"] = "ring";

  progress << "\nadaptive phase, " << FormatLagSummary(lags);
  progress << absl::StrFormat(
      "\nlatency = last completion - last arrival; span = last completion - "
      "first arrival\n%-9s %10s %10s %10s %12s\n",
      "", "mean", "p50", "p99", "span mean");
  for (const Phase* phase : {&baseline, &adaptive}) {
    progress << absl::StrFormat("%-9s %10s %10s %10s %12s\n", phase->name,
                                FormatSeconds(Mean(phase->latency_s, options.iterations)),
                                FormatSeconds(Percentile(phase->latency_s, 0.5)),
                                FormatSeconds(Percentile(phase->latency_s, 0.99)),
                                FormatSeconds(Mean(phase->span_s, options.iterations)));
  }
  progress << absl::StrFormat(
      "speedup %.2fx (span %.2fx); results %s; straggler detected: %s; algorithms: %s\n", speedup,
      span_speedup, summary["correct"].get<bool>() ? "correct on every rank and step" : "WRONG",
      adaptive.detected.has_value() ? absl::StrCat("rank ", *adaptive.detected) : "none",
      DescribeMix(adaptive, options.iterations));
  if (metrics_server != nullptr && options.metrics_hold_s > 0) {
    progress << "metrics: serving the final values for " << FormatSeconds(options.metrics_hold_s)
             << std::endl;
    std::this_thread::sleep_for(std::chrono::duration<double>(options.metrics_hold_s));
  }
  if (summary_file.is_open()) {
    summary_file << summary.dump(2) << "\n";
    if (absl::Status status = Finish(summary_file, options.summary_json_path, "summary");
        !status.ok()) {
      return status;
    }
  }
  return summary;
}

}  // namespace stragglar
