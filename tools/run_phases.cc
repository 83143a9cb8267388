#include "tools/run_phases.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/units.h"
#include "exporters/build_info.h"
#include "exporters/prometheus_exporter.h"
#include "runtime/host_runtime.h"
#include "runtime/version.h"

namespace stragglar {

double Mean(const std::vector<double>& values, size_t end) {
  end = std::min(end, values.size());
  if (end == 0) return 0;
  return std::accumulate(values.begin(), values.begin() + end, 0.0) / end;
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

namespace {

// Both phases' communicators and the state the rank threads share.
class PhaseRun {
 public:
  PhaseRun(const RunOptions& options, const PhaseData& data, Phase& baseline, Phase& adaptive,
           std::ostream& progress)
      : options_(options),
        data_(data),
        phases_{&baseline, &adaptive},
        progress_(progress),
        outputs_(options.ranks, std::vector<std::byte>(options.bytes)),
        step_barrier_(options.ranks) {}

  absl::Status Start(const ProbedLinks& links, prometheus::Registry* metrics,
                     std::shared_ptr<TraceRecorder> recorder);
  void RunRank(int rank);
  absl::Status Conclude();

 private:
  void RunCollective(int index, int it, int rank);
  void Fail(const Phase& phase, int it, int rank, const absl::Status& status);
  void ReportEpoch(int it);
  // The detector's and the calibration's state after the last step, from rank 0's communicator.
  void Capture(int index);

  const RunOptions& options_;
  const PhaseData& data_;
  Phase* phases_[2];
  std::ostream& progress_;
  std::unique_ptr<HostCommunicator> comms_[2];
  std::vector<std::vector<std::byte>> outputs_;
  std::atomic<bool> failed_ = false;
  std::atomic<bool> wrong_[2] = {false, false};  // per phase
  std::mutex error_mutex_;
  absl::Status first_error_;
  std::barrier<> step_barrier_;
};

absl::Status PhaseRun::Start(const ProbedLinks& links, prometheus::Registry* metrics,
                             std::shared_ptr<TraceRecorder> recorder) {
  const int n = options_.ranks;
  for (int index = 0; index < 2; ++index) {
    Phase& phase = *phases_[index];
    RuntimeConfig config;
    config.mode = phase.mode;
    config.epoch_calls = options_.epoch_calls;
    config.topology = options_.topology;
    config.per_class_queues = options_.per_class_queues;
    config.inter_node_link = links.inter_node.value_or(options_.inter_node_link);
    std::vector<std::shared_ptr<CollectiveObserver>> observers;
    // Only the adaptive runtime learns across runs and is traced; the baseline always starts cold.
    if (phase.mode == RuntimeMode::kAdapt) {
      config.state_file = options_.state_file;
      config.candidates = options_.candidates;
      if (recorder != nullptr) observers.push_back(recorder);
    }
    if (metrics != nullptr) {
      observers.push_back(std::make_shared<PrometheusObserver>(*metrics, phase.name, n));
      // Ranks as threads: no collective library, so no backend_version (an empty label is
      // absent).
      std::vector<int> ranks(n);
      std::iota(ranks.begin(), ranks.end(), 0);
      ExportBuildInfo(*metrics, {.version = std::string(StragglarVersion()), .backend = "host"},
                      phase.name, ranks);
    }
    absl::StatusOr<std::unique_ptr<HostCommunicator>> comm = HostCommunicator::Create(
        n, config, links.intra_node, std::move(observers), options_.inter_node_link);
    if (!comm.ok()) return comm.status();
    comms_[index] = *std::move(comm);
    phase.arrival_s.assign(options_.iterations, std::vector<double>(n));
    phase.duration_s.assign(options_.iterations, std::vector<double>(n));
    phase.algorithm.assign(options_.iterations, std::vector<Algorithm>(n));
    phase.latency_s.assign(options_.iterations, 0);
    phase.span_s.assign(options_.iterations, 0);
  }
  return absl::OkStatus();
}

void PhaseRun::Fail(const Phase& phase, int it, int rank, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (first_error_.ok()) {
    first_error_ = absl::Status(status.code(), absl::StrCat(phase.name, " step ", it, " rank ",
                                                            rank, ": ", status.message()));
  }
  failed_ = true;
}

void PhaseRun::RunCollective(int index, int it, int rank) {
  Phase& phase = *phases_[index];
  // Poison the output so a call that does nothing cannot pass the check.
  std::memset(outputs_[rank].data(), 0xA5, outputs_[rank].size());
  step_barrier_.arrive_and_wait();
  if (!failed_) {
    std::this_thread::sleep_for(std::chrono::duration<double>(data_.compute_s[it][rank]));
    const AllReduceArgs args{.send = data_.inputs[rank].data(),
                             .recv = outputs_[rank].data(),
                             .count = options_.bytes / DataTypeSize(options_.type),
                             .type = options_.type,
                             .op = ReduceOp::kSum};
    // The timing the runtime itself recorded: what the detector saw.
    CallTiming timing;
    absl::StatusOr<CallDecision> decision = comms_[index]->AllReduce(rank, args, &timing);
    phase.arrival_s[it][rank] = timing.arrival_s;
    phase.duration_s[it][rank] = timing.duration_s;
    if (!decision.ok()) {
      Fail(phase, it, rank, decision.status());
    } else {
      phase.algorithm[it][rank] = decision->algorithm;
      if (std::memcmp(outputs_[rank].data(), data_.expected.data(), data_.expected.size()) != 0) {
        wrong_[index] = true;
      }
    }
  }
  step_barrier_.arrive_and_wait();
  if (rank != 0 || failed_) return;
  double first_arrival = phase.arrival_s[it][0], last_arrival = 0, last_completion = 0;
  for (int r = 0; r < options_.ranks; ++r) {
    first_arrival = std::min(first_arrival, phase.arrival_s[it][r]);
    last_arrival = std::max(last_arrival, phase.arrival_s[it][r]);
    last_completion = std::max(last_completion, phase.arrival_s[it][r] + phase.duration_s[it][r]);
  }
  phase.latency_s[it] = last_completion - last_arrival;
  phase.span_s[it] = last_completion - first_arrival;
}

void PhaseRun::ReportEpoch(int it) {
  const int epochs = (options_.iterations + options_.epoch_calls - 1) / options_.epoch_calls;
  for (int index = 0; index < 2; ++index) {
    const Phase& phase = *phases_[index];
    const RuntimeCore& core = comms_[index]->core(0);
    const std::optional<int> straggler = core.detector().straggler();
    std::string line = absl::StrFormat(
        "%-9s epoch %d/%d  steps %4d  straggler %-10s  %-26s  mean %s", phase.name,
        (it + options_.epoch_calls) / options_.epoch_calls, epochs, it + 1,
        straggler.has_value() ? absl::StrFormat("%d (%.0f%%)", *straggler,
                                                100 * core.detector().persistence(*straggler))
                              : "-",
        DescribeMix(phase, it + 1), FormatSeconds(Mean(phase.latency_s, it + 1)));
    if (index == 1) {
      absl::StrAppendFormat(&line, "  speedup %.2fx",
                            Mean(phases_[0]->latency_s, it + 1) / Mean(phase.latency_s, it + 1));
    }
    progress_ << line << std::endl;
  }
}

void PhaseRun::Capture(int index) {
  Phase& phase = *phases_[index];
  const RuntimeCore& core = comms_[index]->core(0);
  phase.detected = core.detector().straggler();
  phase.detections = core.detections();
  phase.calibration = core.calibration().ToJson();
  if (phase.detected.has_value()) phase.persistence = core.detector().persistence(*phase.detected);
}

void PhaseRun::RunRank(int rank) {
  for (int it = 0; it < options_.iterations; ++it) {
    RunCollective(0, it, rank);
    RunCollective(1, it, rank);
    const bool epoch_end = (it + 1) % options_.epoch_calls == 0 || it + 1 == options_.iterations;
    if (rank == 0 && !failed_ && epoch_end) ReportEpoch(it);
  }
  if (failed_) return;
  // What the steps left, before the last partial epoch is exchanged for the trace (rank 0's core
  // changes only when rank 0 itself exchanges).
  if (rank == 0) {
    for (int index = 0; index < 2; ++index) Capture(index);
  }
  if (absl::Status status = comms_[1]->Flush(rank); !status.ok()) {
    Fail(*phases_[1], options_.iterations, rank, status);
  }
}

absl::Status PhaseRun::Conclude() {
  if (!first_error_.ok()) return first_error_;
  for (int index = 0; index < 2; ++index) {
    Phase& phase = *phases_[index];
    for (int it = 0; it < options_.iterations; ++it) {
      for (int rank = 1; rank < options_.ranks; ++rank) {
        if (phase.algorithm[it][rank] != phase.algorithm[it][0]) {
          return absl::InternalError(absl::StrCat(phase.name, " step ", it, ": rank ", rank,
                                                  " ran ", AlgorithmName(phase.algorithm[it][rank]),
                                                  " but rank 0 ran ",
                                                  AlgorithmName(phase.algorithm[it][0])));
        }
      }
    }
    phase.correct = !wrong_[index];
    for (int it = 0; it < options_.iterations; ++it) {
      if (phase.algorithm[it][0] == Algorithm::kStragglar) {
        phase.first_stragglar_call = it;
        break;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunPhases(const RunOptions& options, const ProbedLinks& links,
                       prometheus::Registry* metrics, const PhaseData& data,
                       std::shared_ptr<TraceRecorder> recorder, Phase& baseline, Phase& adaptive,
                       std::ostream& progress) {
  PhaseRun run(options, data, baseline, adaptive, progress);
  if (absl::Status status = run.Start(links, metrics, std::move(recorder)); !status.ok()) {
    return status;
  }
  std::vector<std::thread> threads;
  for (int rank = 0; rank < options.ranks; ++rank) {
    threads.emplace_back([&run, rank] { run.RunRank(rank); });
  }
  for (std::thread& thread : threads) thread.join();
  return run.Conclude();
}

}  // namespace stragglar
