#include "tools/run_job.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/units.h"
#include "exporters/prometheus_exporter.h"
#include "exporters/run_summary.h"
#include "exporters/trace.h"
#include "exporters/trace_recorder.h"
#include "kernels/reduce/exact_data.h"
#include "kernels/synth/synthesizers.h"
#include "policy/model/queue_simulator.h"
#include "policy/model/simulator.h"
#include "runtime/host_runtime.h"
#include "tools/run_phases.h"
#include "tools/run_report.h"

namespace stragglar {
namespace {

bool OnNodes(const RunOptions& options) {
  return options.topology.has_value() && options.topology->multi_node();
}

// What the model says the baseline (the Ring plan, every rank arriving together) takes after the
// last arrival on the run's machine, priced with the measured links (between nodes, the emulated
// one where it was not measured). On nodes Ring is the hierarchical ring, as the policy's plan
// cache makes it, priced as the ranks run it: round by round or on per-class queues.
absl::StatusOr<double> ModelledBaselineSeconds(const RunOptions& options,
                                               const ProbedLinks& links) {
  const LinkModel& link = links.intra_node;
  absl::StatusOr<Plan> ring =
      OnNodes(options)
          ? SynthesizeHierarchicalRing(options.topology->nodes, options.topology->ranks_per_node)
          : SynthesizeRing(options.ranks);
  if (!ring.ok()) return ring.status();
  const NetworkModel network =
      options.topology.has_value()
          ? NetworkModel{.topology = *options.topology,
                         .intra_node = link,
                         .inter_node = links.inter_node.value_or(options.inter_node_link)}
          : NetworkModel::Flat(options.ranks, link);
  const std::vector<double> together(static_cast<size_t>(options.ranks), 0.0);
  absl::StatusOr<SimulationResult> result =
      OnNodes(options) && options.per_class_queues
          ? SimulatePlanWithQueues(*ring, static_cast<double>(options.bytes), network, together)
          : SimulatePlan(*ring, static_cast<double>(options.bytes), network, together);
  if (!result.ok()) return result.status();
  return result->after_last_arrival_s;
}

// The host's link, and on an emulated machine of nodes (of at least 2 ranks each) each class on
// its own rings, the emulated NICs included.
absl::StatusOr<ProbedLinks> MeasureLinks(const RunOptions& options) {
  if (OnNodes(options) && options.topology->ranks_per_node > 1) {
    return MeasureEmulatedLinks(*options.topology,
                                {.ranks_per_node = options.topology->ranks_per_node,
                                 .alpha_s = options.inter_node_link.alpha_s,
                                 .bytes_per_s = options.inter_node_link.bandwidth_bytes_per_s});
  }
  absl::StatusOr<LinkModel> link = MeasureHostLink(options.ranks);
  if (!link.ok()) return link.status();
  return ProbedLinks{.intra_node = *link};
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
  if (options.topology.has_value() && options.topology->num_ranks() != options.ranks) {
    return absl::InvalidArgumentError(absl::StrCat("--topology ", TopologyName(*options.topology),
                                                   " has ", options.topology->num_ranks(),
                                                   " ranks, --ranks ", options.ranks));
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

// Inputs whose sum is exact in every type (bf16 included, up to 64 ranks and beyond) and every
// reduction order, so every result must equal `expected` bit for bit; and the compute times.
PhaseData MakePhaseData(const RunOptions& options) {
  const int n = options.ranks;
  const int64_t count = options.bytes / DataTypeSize(options.type);
  const exact_data::Spec spec{
      .type = options.type, .op = ReduceOp::kSum, .ranks = n, .seed = options.seed};
  PhaseData data{
      .compute_s = DrawComputeTimes(options),
      .inputs = std::vector<std::vector<std::byte>>(n, std::vector<std::byte>(options.bytes)),
      .expected = std::vector<std::byte>(options.bytes)};
  for (int rank = 0; rank < n; ++rank) {
    exact_data::FillInput(spec, rank, 0, count, data.inputs[rank].data());
  }
  exact_data::FillReference(spec, 0, count, data.expected.data());
  return data;
}

// Metrics are optional: a port that cannot be bound costs the operator the endpoint, not the job.
std::shared_ptr<prometheus::Registry> StartMetrics(const RunOptions& options,
                                                   std::unique_ptr<MetricsServer>& server,
                                                   std::ostream& progress) {
  if (!options.metrics_port.has_value()) return nullptr;
  auto registry = std::make_shared<prometheus::Registry>();
  absl::StatusOr<std::unique_ptr<MetricsServer>> started =
      MetricsServer::Start(options.metrics_address, *options.metrics_port, registry);
  if (!started.ok()) {
    std::fprintf(stderr, "stragglar: %s; running without metrics\n",
                 std::string(started.status().message()).c_str());
    return nullptr;
  }
  server = *std::move(started);
  progress << "metrics: http://" << server->endpoint() << "/metrics\n";
  return registry;
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

// The output files opened before the run (a bad path fails at once), written after it.
struct Outputs {
  std::ofstream trace, trace_json, summary;

  absl::Status Open(const RunOptions& options) {
    for (auto [path, what, file] : {std::tuple(&options.trace_path, "trace", &trace),
                                    std::tuple(&options.trace_json_path, "trace JSON", &trace_json),
                                    std::tuple(&options.summary_json_path, "summary", &summary)}) {
      if (absl::Status status = OpenOutput(*path, what, *file); !status.ok()) return status;
    }
    return absl::OkStatus();
  }

  // The adaptive phase's trace, as the runtime's epoch reports recorded it.
  absl::Status WriteTraces(const RunOptions& options, const std::vector<TraceRow>& rows) {
    if (trace.is_open()) {
      WriteCsvTrace(rows, trace);
      if (absl::Status status = Finish(trace, options.trace_path, "trace"); !status.ok()) {
        return status;
      }
    }
    if (trace_json.is_open()) {
      trace_json << PerfettoTrace(rows, "stragglar run (adaptive)").dump() << "\n";
      return Finish(trace_json, options.trace_json_path, "trace JSON");
    }
    return absl::OkStatus();
  }

  absl::Status WriteSummary(const RunOptions& options, const nlohmann::json& json) {
    if (!summary.is_open()) return absl::OkStatus();
    summary << json.dump(2) << "\n";
    return Finish(summary, options.summary_json_path, "summary");
  }
};

}  // namespace

absl::StatusOr<nlohmann::json> RunJob(const RunOptions& options, std::ostream& progress) {
  if (absl::Status status = ValidateOptions(options); !status.ok()) return status;
  Outputs outputs;
  if (absl::Status status = outputs.Open(options); !status.ok()) return status;
  progress << absl::StrFormat(
      "stragglar run: %d ranks (threads), %s %s sum per step, %d steps; compute %s per step; %s\n",
      options.ranks, FormatBytes(options.bytes), DataTypeName(options.type), options.iterations,
      FormatSeconds(options.compute_s),
      options.straggler.has_value()
          ? absl::StrFormat("rank %d late by %s (sd %s)", *options.straggler,
                            FormatSeconds(options.delay_s), FormatSeconds(options.delay_spread_s))
          : "no straggler");
  absl::StatusOr<ProbedLinks> links = MeasureLinks(options);
  if (!links.ok()) return links.status();
  const LinkModel& link = links->intra_node;
  progress << absl::StrFormat(
      "measured link: alpha %s, bandwidth %s per transfer, shared by %.0f cores\n",
      FormatSeconds(link.alpha_s), FormatBandwidth(link.bandwidth_bytes_per_s), link.shared_lanes);
  if (options.topology.has_value()) {
    progress << absl::StrFormat(
        "emulated machine: %d nodes of %d ranks; between nodes alpha %s, bandwidth %s per NIC; "
        "%s\n",
        options.topology->nodes, options.topology->ranks_per_node,
        FormatSeconds(options.inter_node_link.alpha_s),
        FormatBandwidth(options.inter_node_link.bandwidth_bytes_per_s),
        options.per_class_queues ? "one queue per link class" : "round by round");
  }
  if (links->inter_node.has_value()) {
    progress << absl::StrFormat(
        "measured between nodes: alpha %s, bandwidth %s per transfer (what the policy prices)\n",
        FormatSeconds(links->inter_node->alpha_s),
        FormatBandwidth(links->inter_node->bandwidth_bytes_per_s));
  }
  const PhaseData data = MakePhaseData(options);
  std::unique_ptr<MetricsServer> metrics_server;
  const std::shared_ptr<prometheus::Registry> registry =
      StartMetrics(options, metrics_server, progress);

  Phase baseline{.name = "baseline", .mode = RuntimeMode::kObserve};
  Phase adaptive{.name = "adaptive", .mode = RuntimeMode::kAdapt};
  auto recorder = std::make_shared<TraceRecorder>(/*recording_rank=*/0);
  if (absl::Status status =
          RunPhases(options, *links, registry.get(), data, recorder, baseline, adaptive, progress);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = outputs.WriteTraces(options, recorder->rows()); !status.ok()) {
    return status;
  }
  const LagSummary lags = SummarizeLags(recorder->rows());
  nlohmann::json summary = RunSummaryJson(options, link, baseline, adaptive, lags);
  absl::StatusOr<double> modelled_s = ModelledBaselineSeconds(options, *links);
  if (!modelled_s.ok()) return modelled_s.status();
  summary["baseline"]["model_s"] = *modelled_s;
  if (OnNodes(options)) {
    summary["baseline"]["variant"] = PlanVariantName(PlanVariant::kHierarchical);
  }
  if (options.topology.has_value()) {
    summary["topology"] = {{"nodes", options.topology->nodes},
                           {"ranks_per_node", options.topology->ranks_per_node},
                           {"inter_node",
                            {{"alpha_s", options.inter_node_link.alpha_s},
                             {"bandwidth_Bps", options.inter_node_link.bandwidth_bytes_per_s}}},
                           {"queues", options.per_class_queues ? "per-class" : "rounds"}};
    if (links->inter_node.has_value()) {
      summary["topology"]["inter_node_measured"] = {
          {"alpha_s", links->inter_node->alpha_s},
          {"bandwidth_Bps", links->inter_node->bandwidth_bytes_per_s}};
    }
  }
  PrintRunSummary(options, baseline, adaptive, lags, summary, progress);
  progress << absl::StrFormat(
      "model: %s takes %s after the last arrival on this machine; measured mean %s (%+.0f%%)\n",
      OnNodes(options) ? "the hierarchical ring" : "ring", FormatSeconds(*modelled_s),
      FormatSeconds(summary["baseline"]["mean_s"].get<double>()),
      100 * (summary["baseline"]["mean_s"].get<double>() / *modelled_s - 1));
  if (metrics_server != nullptr && options.metrics_hold_s > 0) {
    progress << "metrics: serving the final values for " << FormatSeconds(options.metrics_hold_s)
             << std::endl;
    std::this_thread::sleep_for(std::chrono::duration<double>(options.metrics_hold_s));
  }
  if (absl::Status status = outputs.WriteSummary(options, summary); !status.ok()) return status;
  return summary;
}

}  // namespace stragglar
