// The `stragglar` command line: plan, sim, verify, rounds, run, replay, scenarios, pipeline,
// doctor. Flags are absl flags shared by all subcommands; each subcommand rejects the flags that do
// not apply to it, so a typo never passes silently. Every error is one line on stderr and a
// non-zero exit.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "base/units.h"
#include "exporters/prometheus_exporter.h"
#include "kernels/plan/plan.h"
#include "kernels/plan/verifier.h"
#include "kernels/synth/stragglar_schedule.h"
#include "kernels/synth/synthesizers.h"
#include "nlohmann/json.hpp"
#include "policy/model/simulator.h"
#include "runtime/env_config.h"
#include "runtime/replay/replay.h"
#include "runtime/replay/scenarios.h"
#include "runtime/version.h"
#include "tools/cli_args.h"
#include "tools/doctor.h"
#include "tools/input_file.h"
#include "tools/pipeline_command.h"
#include "tools/plan_command.h"
#include "tools/plan_size_limit.h"
#include "tools/progress.h"
#include "tools/run_job.h"
#include "tools/sim_command.h"
#include "tools/text_reports.h"
#include "tools/usage.h"

ABSL_FLAG(std::string, algorithm, "",
          "plan: ring, halving-doubling, stragglar or stragglar-log-depth");
ABSL_FLAG(std::optional<int>, ranks, std::nullopt, "number of ranks (>= 2)");
ABSL_FLAG(std::string, straggler, "", "the late rank (default: the last rank)");
ABSL_FLAG(int, pieces, 1,
          "plan: stragglar's pieces per chunk (pipelined; 1: the unpipelined schedule); "
          "stragglar-log-depth's blocks (a power of two)");
ABSL_FLAG(std::optional<stragglar::ByteSize>, bytes, std::nullopt, "buffer size, e.g. 16MiB");
ABSL_FLAG(stragglar::Seconds, alpha, stragglar::Seconds{3e-6}, "per-message latency, e.g. 3us");
ABSL_FLAG(stragglar::Bandwidth, bandwidth, stragglar::Bandwidth{450.0 * (1LL << 30)},
          "link bandwidth, e.g. 450GiB/s");
ABSL_FLAG(std::string, topology, "",
          "sim, plan, run: NxG, N nodes of G ranks (ranks numbered node by node). sim: links "
          "inside a node use --alpha and --bandwidth, links between nodes --inter-alpha and "
          "--inter-bandwidth. plan: the hierarchical StragglAR plan for that machine. run: an "
          "emulated machine, messages between nodes delayed by --inter-alpha and "
          "--inter-bandwidth");
ABSL_FLAG(stragglar::Seconds, inter_alpha,
          stragglar::Seconds{stragglar::kTypicalInterNodeLink.alpha_s},
          "sim, run --topology: per-message latency between nodes, e.g. 10us");
ABSL_FLAG(stragglar::Bandwidth, inter_bandwidth,
          stragglar::Bandwidth{stragglar::kTypicalInterNodeLink.bandwidth_bytes_per_s},
          "sim, run --topology: bandwidth of each rank's NIC, e.g. 50GB/s");
ABSL_FLAG(std::optional<stragglar::Seconds>, delay, std::nullopt,
          "how late the straggler arrives, e.g. 20ms (sim: 0, run: 20ms)");
ABSL_FLAG(std::string, algorithms, "",
          "sim: comma-separated algorithms to compare (default ring,halving-doubling,stragglar); "
          "run: the adaptive runtime's candidates, ring first (default ring,stragglar)");
ABSL_FLAG(bool, json, false, "print JSON instead of a table");
ABSL_FLAG(std::string, queues, "rounds",
          "sim, run --topology: how a rank runs a plan's transfers: rounds (one round after the "
          "other, what the NCCL and MPI executors do) or per-class (a send and a receive queue "
          "per link class, each in round order, a transfer waiting only for its queues and its "
          "chunks; the host executor can)");
ABSL_FLAG(std::string, plan, "", "verify: plan JSON file ('-' for stdin)");
ABSL_FLAG(int, min_ranks, 2, "rounds: smallest rank count");
ABSL_FLAG(int, max_ranks, 64, "rounds: largest rank count");
ABSL_FLAG(bool, verify, false, "rounds: also verify every synthesized plan symbolically");
ABSL_FLAG(bool, progress, false,
          "rounds, sim: a progress line on stderr every 2 s even when stderr is not a terminal");
ABSL_FLAG(std::optional<int>, iterations, std::nullopt, "run: training steps per phase (256)");
ABSL_FLAG(int64_t, calls, 20000, "scenarios: calls per scenario");
ABSL_FLAG(int64_t, noise_calls, 100000, "scenarios: calls of the noise-only scenarios");
ABSL_FLAG(std::string, summary_json, "", "run: write the summary JSON to this file");
ABSL_FLAG(std::string, trace, "",
          "run: write the arrival trace CSV to this file; replay: the trace to read ('-': stdin)");
ABSL_FLAG(std::string, trace_json, "",
          "run: write a Perfetto/Chrome trace-event JSON (one track per rank) to this file");
ABSL_FLAG(std::optional<int>, metrics_port, std::nullopt,
          "run: serve Prometheus metrics on this port (0: any free port; default: "
          "STRAGGLAR_METRICS_PORT, else none)");
ABSL_FLAG(std::string, metrics_addr, "",
          "run: address to serve metrics on (default: STRAGGLAR_METRICS_ADDR, else 127.0.0.1)");
ABSL_FLAG(stragglar::Seconds, metrics_hold, stragglar::Seconds{0},
          "run: keep serving metrics this long after the last step, e.g. 5s");
ABSL_FLAG(std::string, dtype, "float32", "run: element type (float32, bfloat16, int32, ...)");
ABSL_FLAG(uint64_t, seed, 1, "run: seed of the compute-time and delay draws");
ABSL_FLAG(std::string, preload, "any",
          "doctor: the preload the verdict is about: nccl, mpi or any (at least one works)");
ABSL_FLAG(int, local_ranks, 8, "doctor: ranks per node (the metrics ports checked)");
ABSL_FLAG(std::optional<int>, stages, std::nullopt, "pipeline: number of pipeline stages");
ABSL_FLAG(std::optional<int>, microbatches, std::nullopt, "pipeline: micro-batches per iteration");
ABSL_FLAG(std::string, forward, "", "pipeline: forward time, or one per stage (10ms,12ms,...)");
ABSL_FLAG(std::string, backward, "", "pipeline: backward time, or one per stage");
ABSL_FLAG(std::vector<std::string>, link_delay, {},
          "pipeline: I-J:DELAY, a slow link between adjacent stages (repeatable)");
ABSL_FLAG(bool, blocking_sends, false,
          "pipeline: a send holds its stage until it arrives (NCCL on the compute stream)");
ABSL_FLAG(int, memory_microbatches, 0,
          "pipeline: activations a stage can hold, in micro-batches (0: unlimited)");
ABSL_FLAG(std::string, advice_file, "",
          "pipeline-run: write the advisor's warm-up counts to this JSON file (default: "
          "STRAGGLAR_PIPELINE_ADVICE_FILE)");
ABSL_FLAG(bool, apply_advice, false, "pipeline-run: run the advised counts once there are any");
ABSL_FLAG(int, delay_from, 3, "pipeline-run: the iteration the link delays start with");
ABSL_FLAG(std::string, exchange, "immediate",
          "replay: how the job exchanged epochs: immediate (stragglar run, the MPI preload) or "
          "deferred (the NCCL preload, whose decisions lag its measurements by an epoch)");
ABSL_FLAG(std::string, lags, "",
          "replay: where a rank's lag comes from: arrival (the ranks' arrivals on one clock: "
          "stragglar run, the MPI preload) or duration (the longest call's duration minus its "
          "own: the NCCL preload); default: as the --exchange's preload does");
ABSL_FLAG(int, epoch_calls, 32,
          "run, replay: calls between epoch exchanges (policy updates); replay a trace with the "
          "value of the run that wrote it");

namespace stragglar {
namespace {

struct Command {
  absl::string_view name;
  std::vector<absl::string_view> flags;
  absl::Status (*run)();
};

absl::Status Usage(absl::string_view message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<int> RequiredRanks() {
  std::optional<int> ranks = absl::GetFlag(FLAGS_ranks);
  if (!ranks.has_value()) return Usage("--ranks is required");
  if (*ranks < 2) return Usage(absl::StrCat("--ranks must be at least 2, got ", *ranks));
  if (*ranks > 65536) return Usage(absl::StrCat("--ranks must be at most 65536, got ", *ranks));
  return *ranks;
}

// --straggler: an index in [0, ranks); defaults to the last rank.
absl::StatusOr<int> StragglerFlag(int num_ranks) {
  const std::string text = absl::GetFlag(FLAGS_straggler);
  if (text.empty()) return num_ranks - 1;
  int straggler = 0;
  if (!absl::SimpleAtoi(text, &straggler)) {
    return Usage(absl::StrCat("--straggler must be a rank index, got \"", text, "\""));
  }
  if (straggler < 0 || straggler >= num_ranks) {
    return Usage(absl::StrCat("--straggler ", straggler, " is outside [0, ", num_ranks - 1,
                              "] for ", num_ranks, " ranks"));
  }
  return straggler;
}

void PrintJson(const nlohmann::json& json) { std::cout << json.dump(2) << "\n"; }

absl::StatusOr<std::optional<Topology>> TopologyFromFlags();

absl::Status RunPlan() {
  PlanArgs args{.algorithm = absl::GetFlag(FLAGS_algorithm),
                .pieces = absl::GetFlag(FLAGS_pieces),
                .json = absl::GetFlag(FLAGS_json)};
  if (args.algorithm.empty()) return Usage("--algorithm is required");
  absl::StatusOr<std::optional<Topology>> topology = TopologyFromFlags();
  if (!topology.ok()) return topology.status();
  args.topology = *topology;
  if (args.topology.has_value()) {
    args.num_ranks = args.topology->num_ranks();
  } else {
    absl::StatusOr<int> ranks = RequiredRanks();
    if (!ranks.ok()) return ranks.status();
    args.num_ranks = *ranks;
  }
  if (!absl::GetFlag(FLAGS_straggler).empty()) {
    absl::StatusOr<int> straggler = StragglerFlag(args.num_ranks);
    if (!straggler.ok()) return straggler.status();
    args.straggler = *straggler;
  }
  return RunPlanCommand(args, std::cout);
}

// --alpha and --bandwidth (the bandwidth parser already refuses non-positive values); with
// `inter_node`, --inter-alpha and --inter-bandwidth.
absl::StatusOr<LinkModel> LinkFromFlags(bool inter_node = false) {
  const double alpha_s = absl::GetFlag(inter_node ? FLAGS_inter_alpha : FLAGS_alpha).value;
  if (alpha_s < 0) {
    return Usage(absl::StrCat(inter_node ? "--inter-alpha" : "--alpha",
                              " must not be negative, got ", FormatSeconds(alpha_s)));
  }
  return LinkModel{
      .alpha_s = alpha_s,
      .bandwidth_bytes_per_s =
          absl::GetFlag(inter_node ? FLAGS_inter_bandwidth : FLAGS_bandwidth).bytes_per_s};
}

// --topology NxG, if given, checked against --ranks (which must then agree).
absl::StatusOr<std::optional<Topology>> TopologyFromFlags() {
  const std::string text = absl::GetFlag(FLAGS_topology);
  if (text.empty()) return std::nullopt;
  absl::StatusOr<Topology> topology = ParseTopology(text);
  if (!topology.ok()) return Usage(absl::StrCat("--topology: ", topology.status().message()));
  if (topology->num_ranks() < 2) {
    return Usage(absl::StrCat("--topology ", text, " has one rank; an AllReduce needs two"));
  }
  const std::optional<int> ranks = absl::GetFlag(FLAGS_ranks);
  if (ranks.has_value() && *ranks != topology->num_ranks()) {
    return Usage(absl::StrCat("--ranks ", *ranks, " disagrees with --topology ", text, " (",
                              topology->num_ranks(), " ranks); give one of them"));
  }
  return *topology;
}

// --queues: true for per-class.
absl::StatusOr<bool> PerClassQueuesFlag() {
  const std::string queues = absl::GetFlag(FLAGS_queues);
  if (queues != "rounds" && queues != "per-class") {
    return Usage(absl::StrCat("--queues must be rounds or per-class, got \"", queues, "\""));
  }
  return queues == "per-class";
}

// Without --topology the links between nodes mean nothing: giving them is a mistake.
absl::Status InterNodeFlagsUnused() {
  if (absl::GetFlag(FLAGS_inter_alpha).value != kTypicalInterNodeLink.alpha_s ||
      absl::GetFlag(FLAGS_inter_bandwidth).bytes_per_s !=
          kTypicalInterNodeLink.bandwidth_bytes_per_s) {
    return Usage("--inter-alpha and --inter-bandwidth need --topology NxG");
  }
  return absl::OkStatus();
}

// --topology NxG (and --ranks, which must then agree), with the links of each class; a flat
// machine of --ranks without it.
absl::StatusOr<NetworkModel> NetworkFromFlags() {
  absl::StatusOr<LinkModel> intra = LinkFromFlags();
  if (!intra.ok()) return intra.status();
  absl::StatusOr<std::optional<Topology>> topology = TopologyFromFlags();
  if (!topology.ok()) return topology.status();
  if (!topology->has_value()) {
    if (absl::Status unused = InterNodeFlagsUnused(); !unused.ok()) return unused;
    absl::StatusOr<int> ranks = RequiredRanks();
    if (!ranks.ok()) return ranks.status();
    return NetworkModel::Flat(*ranks, *intra);
  }
  absl::StatusOr<LinkModel> inter = LinkFromFlags(/*inter_node=*/true);
  if (!inter.ok()) return inter.status();
  return NetworkModel{.topology = **topology, .intra_node = *intra, .inter_node = *inter};
}

absl::Status RunSim() {
  absl::StatusOr<NetworkModel> network = NetworkFromFlags();
  if (!network.ok()) return network.status();
  const std::optional<ByteSize> size = absl::GetFlag(FLAGS_bytes);
  if (!size.has_value()) return Usage("--bytes is required");
  absl::StatusOr<int> straggler = StragglerFlag(network->topology.num_ranks());
  if (!straggler.ok()) return straggler.status();
  const double delay_s = absl::GetFlag(FLAGS_delay).value_or(Seconds{0}).value;
  if (delay_s < 0) {
    return Usage(absl::StrCat("--delay must not be negative, got ", FormatSeconds(delay_s)));
  }
  absl::StatusOr<bool> per_class_queues = PerClassQueuesFlag();
  if (!per_class_queues.ok()) return per_class_queues.status();
  return RunSimCommand({.network = *network,
                        .straggler = *straggler,
                        .bytes = size->bytes,
                        .delay_s = delay_s,
                        .algorithms = absl::GetFlag(FLAGS_algorithms),
                        .per_class_queues = *per_class_queues,
                        .json = absl::GetFlag(FLAGS_json),
                        .progress = absl::GetFlag(FLAGS_progress)},
                       std::cout);
}

absl::Status RunVerify() {
  const std::string path = absl::GetFlag(FLAGS_plan);
  if (path.empty()) return Usage("--plan is required");
  absl::StatusOr<Plan> plan = ReadInput<Plan>(path, "cannot open plan file",
                                              [](std::istream& in) { return ReadPlanJson(in); });
  if (!plan.ok() && plan.status().message() == "not valid JSON") {
    return Usage(absl::StrCat(path, ": not valid JSON"));
  }
  if (!plan.ok()) return plan.status();
  if (absl::Status status = VerifyPlan(*plan); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("plan is incorrect: ", status.message()));
  }
  std::cout << absl::StrFormat("ok: %s plan for %d ranks, %d rounds, verified\n",
                               AlgorithmName(plan->algorithm), plan->num_ranks, plan->num_rounds());
  return absl::OkStatus();
}

// The table docs/plans.md shows: achieved rounds against the lower bound for a range of n.
absl::Status RunRounds() {
  const int min_ranks = absl::GetFlag(FLAGS_min_ranks);
  const int max_ranks = absl::GetFlag(FLAGS_max_ranks);
  if (min_ranks < 2 || max_ranks < min_ranks) {
    return Usage(
        absl::StrCat("need 2 <= --min-ranks <= --max-ranks, got ", min_ranks, " and ", max_ranks));
  }
  const bool verify = absl::GetFlag(FLAGS_verify);
  const std::string given = absl::StrCat("--max-ranks ", max_ranks);
  if (absl::Status fits =
          verify ? FlatStragglarPlanFits(max_ranks, 1, given) : RingPlanFits(max_ranks, given);
      !fits.ok()) {
    return fits;
  }
  const bool json_output = absl::GetFlag(FLAGS_json);
  Progress progress("stragglar rounds", max_ranks - min_ranks + 1, "rank counts",
                    absl::GetFlag(FLAGS_progress));
  nlohmann::json rows = nlohmann::json::array();
  int misses = 0;
  if (!json_output) {
    std::cout << absl::StrFormat("%6s %6s %10s %6s %6s %12s%s\n", "ranks", "L(n)", "stragglar",
                                 "ring", "hd", "synthesis", verify ? "  verified" : "");
  }
  for (int n = min_ranks; n <= max_ranks; ++n) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<PostArrivalSchedule> schedule = SynthesizeStragglarPostArrival(n);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!schedule.ok()) return schedule.status();
    const int achieved = static_cast<int>(schedule->size());
    const int bound = StragglarRoundLowerBound(n);
    misses += achieved != bound;
    absl::StatusOr<Plan> ring = SynthesizeRing(n);
    absl::StatusOr<Plan> halving_doubling = SynthesizeHalvingDoubling(n);
    if (!ring.ok() || !halving_doubling.ok())
      return absl::InternalError("baseline synthesis failed");
    if (verify) {
      absl::StatusOr<Plan> plan = SynthesizeStragglar(n, n - 1);
      if (!plan.ok()) return plan.status();
      for (const Plan* candidate : {&*plan, &*ring, &*halving_doubling}) {
        if (absl::Status status = VerifyPlan(*candidate); !status.ok()) {
          return absl::InternalError(absl::StrCat(AlgorithmName(candidate->algorithm), " plan for ",
                                                  n,
                                                  " ranks fails verification: ", status.message()));
        }
      }
    }
    if (json_output) {
      rows.push_back({{"ranks", n},
                      {"lower_bound", bound},
                      {"stragglar_post_arrival_rounds", achieved},
                      {"ring_rounds", ring->num_rounds()},
                      {"halving_doubling_rounds", halving_doubling->num_rounds()},
                      {"synthesis_s", seconds},
                      {"verified", verify}});
    } else {
      std::cout << absl::StrFormat("%6d %6d %10d %6d %6d %12s%s\n", n, bound, achieved,
                                   ring->num_rounds(), halving_doubling->num_rounds(),
                                   FormatSeconds(seconds), verify ? "  yes" : "");
    }
    progress.Done(n - min_ranks + 1);
  }
  if (json_output) {
    PrintJson({{"rows", std::move(rows)}, {"misses", misses}});
  } else {
    std::cout << absl::StrFormat("\n%d of %d rank counts reach the lower bound L(n)\n",
                                 max_ranks - min_ranks + 1 - misses, max_ranks - min_ranks + 1);
  }
  return absl::OkStatus();
}

// --metrics-port and --metrics-addr, over STRAGGLAR_METRICS_PORT and STRAGGLAR_METRICS_ADDR (one
// process: local rank 0); nullopt when neither sets a port.
absl::StatusOr<std::optional<MetricsEndpoint>> MetricsEndpointFromFlags() {
  std::optional<MetricsEndpoint> endpoint = MetricsEndpointFromEnv(0, std::cerr);
  if (std::optional<int> port = absl::GetFlag(FLAGS_metrics_port); port.has_value()) {
    if (*port < 0 || *port > 65535) {
      return Usage(absl::StrCat("--metrics-port must be in [0, 65535], got ", *port));
    }
    if (!endpoint.has_value()) endpoint.emplace();
    endpoint->port = *port;
  }
  if (const std::string address = absl::GetFlag(FLAGS_metrics_addr); !address.empty()) {
    if (endpoint.has_value()) endpoint->address = address;
  }
  return endpoint;
}

absl::Status RunRun() {
  RunOptions options;
  absl::StatusOr<std::optional<Topology>> topology = TopologyFromFlags();
  if (!topology.ok()) return topology.status();
  options.topology = *topology;
  options.ranks = options.topology.has_value() ? options.topology->num_ranks()
                                               : absl::GetFlag(FLAGS_ranks).value_or(options.ranks);
  if (options.topology.has_value()) {
    absl::StatusOr<LinkModel> inter = LinkFromFlags(/*inter_node=*/true);
    if (!inter.ok()) return inter.status();
    options.inter_node_link = *inter;
    absl::StatusOr<bool> per_class_queues = PerClassQueuesFlag();
    if (!per_class_queues.ok()) return per_class_queues.status();
    options.per_class_queues = *per_class_queues;
  } else if (absl::Status unused = InterNodeFlagsUnused(); !unused.ok()) {
    return unused;
  } else if (absl::GetFlag(FLAGS_queues) != "rounds") {
    return Usage("--queues needs --topology NxG: one machine has one link class");
  }
  const std::string straggler = absl::GetFlag(FLAGS_straggler);
  if (straggler == "none") {
    options.straggler.reset();
  } else if (!straggler.empty()) {
    int index = 0;
    if (!absl::SimpleAtoi(straggler, &index)) {
      return Usage(
          absl::StrCat("--straggler must be a rank index or \"none\", got \"", straggler, "\""));
    }
    options.straggler = index;
  } else if (options.straggler.has_value() && *options.straggler >= options.ranks) {
    options.straggler = options.ranks - 1;  // the default, rank 5, where there is one
  }
  options.delay_s = absl::GetFlag(FLAGS_delay).value_or(Seconds{options.delay_s}).value;
  options.delay_spread_s = options.delay_s / 10;
  options.bytes = absl::GetFlag(FLAGS_bytes).value_or(ByteSize{options.bytes}).bytes;
  options.iterations = absl::GetFlag(FLAGS_iterations).value_or(options.iterations);
  absl::StatusOr<DataType> type = ParseDataType(absl::GetFlag(FLAGS_dtype));
  if (!type.ok()) return type.status();
  options.type = *type;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.epoch_calls = absl::GetFlag(FLAGS_epoch_calls);
  options.summary_json_path = absl::GetFlag(FLAGS_summary_json);
  options.trace_path = absl::GetFlag(FLAGS_trace);
  options.trace_json_path = absl::GetFlag(FLAGS_trace_json);
  if (const std::string names = absl::GetFlag(FLAGS_algorithms); !names.empty()) {
    absl::StatusOr<std::vector<Algorithm>> algorithms = ParseAlgorithmList(names);
    if (!algorithms.ok()) return algorithms.status();
    options.candidates = *algorithms;
  }
  options.state_file = StateFileFromEnv();
  absl::StatusOr<std::optional<MetricsEndpoint>> endpoint = MetricsEndpointFromFlags();
  if (!endpoint.ok()) return endpoint.status();
  if (endpoint->has_value()) {
    options.metrics_port = (*endpoint)->port;
    options.metrics_address = (*endpoint)->address;
  }
  options.metrics_hold_s = absl::GetFlag(FLAGS_metrics_hold).value;
  absl::StatusOr<nlohmann::json> summary = RunJob(options, std::cout);
  if (!summary.ok()) return summary.status();
  if (!(*summary)["correct"].get<bool>()) {
    return absl::InternalError("an AllReduce result differed from the reference");
  }
  return absl::OkStatus();
}

absl::Status RunReplay() {
  const std::string path = absl::GetFlag(FLAGS_trace);
  if (path.empty()) return Usage("--trace is required");
  const std::string exchange = absl::GetFlag(FLAGS_exchange);
  if (exchange != "immediate" && exchange != "deferred") {
    return Usage(absl::StrCat("--exchange must be immediate or deferred, got \"", exchange, "\""));
  }
  // Lags as the exchange's preload takes them, unless asked otherwise.
  std::string lags = absl::GetFlag(FLAGS_lags);
  if (lags.empty()) lags = exchange == "deferred" ? "duration" : "arrival";
  if (lags != "arrival" && lags != "duration") {
    return Usage(absl::StrCat("--lags must be arrival or duration, got \"", lags, "\""));
  }
  absl::StatusOr<Trace> trace = ReadInput<Trace>(
      path, "cannot read the trace",
      [&](std::istream& in) { return ParseTrace(in, path == "-" ? "<stdin>" : path); });
  if (!trace.ok()) return trace.status();
  absl::StatusOr<LinkModel> link = LinkFromFlags();
  if (!link.ok()) return link.status();
  ReplayOptions options{.link = *link};
  options.config.epoch_calls = absl::GetFlag(FLAGS_epoch_calls);
  options.deferred_exchange = exchange == "deferred";
  options.config.lag_source = lags == "duration" ? LagSource::kDuration : LagSource::kArrivalClock;
  if (options.config.epoch_calls < 1) {
    return Usage(
        absl::StrCat("--epoch-calls must be at least 1, got ", options.config.epoch_calls));
  }
  absl::StatusOr<nlohmann::json> report = ReplayTrace(*trace, options);
  if (!report.ok()) return report.status();
  if (absl::GetFlag(FLAGS_json)) {
    PrintJson(*report);
    return absl::OkStatus();
  }
  PrintReplayReport(*report, path, *link, std::cout);
  return absl::OkStatus();
}

absl::Status RunScenarios() {
  SuiteConfig config;
  config.calls = absl::GetFlag(FLAGS_calls);
  config.noise_calls = absl::GetFlag(FLAGS_noise_calls);
  config.seed = absl::GetFlag(FLAGS_seed);
  config.runtime.epoch_calls = absl::GetFlag(FLAGS_epoch_calls);
  if (config.calls < 1 || config.noise_calls < 1) {
    return Usage("--calls and --noise-calls must be at least 1");
  }
  if (config.runtime.epoch_calls < 1) {
    return Usage(
        absl::StrCat("--epoch-calls must be at least 1, got ", config.runtime.epoch_calls));
  }
  if (std::optional<ByteSize> bytes = absl::GetFlag(FLAGS_bytes); bytes.has_value()) {
    config.bytes = bytes->bytes;
  }
  if (std::optional<int> ranks = absl::GetFlag(FLAGS_ranks); ranks.has_value()) {
    if (*ranks < 2 || *ranks > 64) {
      return Usage(absl::StrCat("--ranks must be in [2, 64] for the suite, got ", *ranks));
    }
    config.num_ranks = *ranks;
  }
  absl::StatusOr<LinkModel> link = LinkFromFlags();
  if (!link.ok()) return link.status();
  config.link = *link;
  const bool json = absl::GetFlag(FLAGS_json);
  std::vector<ScenarioResult> results;
  for (const Scenario& scenario : ScenarioSuite()) {
    if (!json) std::cerr << "scenario " << scenario.name << "...\n";
    absl::StatusOr<ScenarioResult> result = RunScenario(scenario, config);
    if (!result.ok()) return result.status();
    results.push_back(*std::move(result));
  }
  const nlohmann::json report = ScenarioResultsJson(results, config);
  if (json) {
    PrintJson(report);
  } else {
    PrintScenarioReport(report, config, std::cout);
  }
  if (!report["targets_met"].get<bool>()) {
    return absl::FailedPreconditionError("the policy missed some of its targets (listed above)");
  }
  return absl::OkStatus();
}

PipelineArgs PipelineArgsFromFlags() {
  return {.stages = absl::GetFlag(FLAGS_stages),
          .microbatches = absl::GetFlag(FLAGS_microbatches),
          .forward = absl::GetFlag(FLAGS_forward),
          .backward = absl::GetFlag(FLAGS_backward),
          .link_delays = absl::GetFlag(FLAGS_link_delay),
          .memory_microbatches = absl::GetFlag(FLAGS_memory_microbatches),
          .blocking_sends = absl::GetFlag(FLAGS_blocking_sends),
          .json = absl::GetFlag(FLAGS_json)};
}

absl::Status RunPipelineCommand() { return RunPipeline(PipelineArgsFromFlags(), std::cout); }

absl::Status RunPipelineRunCommand() {
  absl::StatusOr<std::optional<MetricsEndpoint>> endpoint = MetricsEndpointFromFlags();
  if (!endpoint.ok()) return endpoint.status();
  PipelineRunArgs run{.iterations = absl::GetFlag(FLAGS_iterations),
                      .delay_from = absl::GetFlag(FLAGS_delay_from),
                      .advice_file = absl::GetFlag(FLAGS_advice_file),
                      .apply_advice = absl::GetFlag(FLAGS_apply_advice),
                      .metrics_hold_s = absl::GetFlag(FLAGS_metrics_hold).value};
  if (std::optional<ByteSize> bytes = absl::GetFlag(FLAGS_bytes))
    run.activation_bytes = bytes->bytes;
  if (endpoint->has_value()) {
    run.metrics_port = (*endpoint)->port;
    run.metrics_address = (*endpoint)->address;
  }
  // The flag wins over the environment the preload reads, as for the metrics endpoint.
  // (Only that setting: the others are the preload's, and their errors are not this command's.)
  std::ostringstream other_settings;
  if (run.advice_file.empty()) {
    run.advice_file = PreloadConfigFromEnv(nullptr, &other_settings).pipeline_advice_file;
  }
  return RunPipelineJobCommand(PipelineArgsFromFlags(), run, std::cout);
}

absl::Status RunDoctorCommand() {
  absl::StatusOr<int> status = RunDoctor(
      {.preload = absl::GetFlag(FLAGS_preload), .local_ranks = absl::GetFlag(FLAGS_local_ranks)},
      std::cout);
  if (!status.ok()) return status.status();
  if (*status != 0) {
    return absl::FailedPreconditionError(
        "the preload cannot work here as configured (the [fail] lines above say why)");
  }
  return absl::OkStatus();
}

const std::vector<Command>& Commands() {
  static const auto& commands = *new std::vector<Command>{
      {"plan", {"algorithm", "ranks", "topology", "straggler", "pieces", "json"}, RunPlan},
      {"sim",
       {"ranks", "topology", "bytes", "alpha", "bandwidth", "inter_alpha", "inter_bandwidth",
        "delay", "straggler", "algorithms", "queues", "json", "progress"},
       RunSim},
      {"verify", {"plan"}, RunVerify},
      {"rounds", {"min_ranks", "max_ranks", "verify", "json", "progress"}, RunRounds},
      {"run",
       {"ranks", "topology", "inter_alpha", "inter_bandwidth", "straggler", "delay", "bytes",
        "iterations", "summary_json", "trace", "trace_json", "dtype", "seed", "epoch_calls",
        "algorithms", "queues", "metrics_port", "metrics_addr", "metrics_hold"},
       RunRun},
      {"replay",
       {"trace", "json", "epoch_calls", "exchange", "lags", "alpha", "bandwidth"},
       RunReplay},
      {"scenarios",
       {"calls", "noise_calls", "seed", "epoch_calls", "ranks", "bytes", "alpha", "bandwidth",
        "json"},
       RunScenarios},
      {"pipeline",
       {"stages", "microbatches", "forward", "backward", "link_delay", "memory_microbatches",
        "blocking_sends", "json"},
       RunPipelineCommand},
      {"pipeline-run",
       {"stages", "microbatches", "forward", "backward", "link_delay", "memory_microbatches",
        "iterations", "delay_from", "bytes", "advice_file", "apply_advice", "metrics_port",
        "metrics_addr", "metrics_hold"},
       RunPipelineRunCommand},
      {"doctor", {"preload", "local_ranks"}, RunDoctorCommand},
  };
  return commands;
}

std::string DisplayFlagName(absl::string_view name) {
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

// Flags of this file set (to a non-default value) that mean nothing to `command`. This absl
// version keeps "specified on the command line" private, so a flag set to its default passes.
absl::Status CheckFlagsApply(const Command& command) {
  absl::flat_hash_set<absl::string_view> allowed(command.flags.begin(), command.flags.end());
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StrContains(flag->Filename(), "tools/stragglar.cc")) continue;
    if (flag->CurrentValue() != flag->DefaultValue() && !allowed.contains(name)) {
      return Usage(absl::StrCat("--", DisplayFlagName(name), " does not apply to 'stragglar ",
                                command.name, "'"));
    }
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  if (argc < 2 || absl::string_view(argv[1]) == "help" || absl::string_view(argv[1]) == "--help" ||
      absl::string_view(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 1 : 0;
  }
  const absl::string_view name = argv[1];
  if (name == "--version" || name == "version") {
    std::cout << "stragglar " << StragglarVersion() << "\n";
    return 0;
  }
  const Command* command = nullptr;
  for (const Command& candidate : Commands()) {
    if (candidate.name == name) command = &candidate;
  }
  if (command == nullptr) {
    std::cerr << "stragglar: unknown command \"" << name << "\"\n\n" << kUsage;
    return 1;
  }
  for (int i = 2; i < argc; ++i) {
    if (absl::string_view(argv[i]) == "--help" || absl::string_view(argv[i]) == "-h") {
      std::cout << kUsage;
      return 0;
    }
  }
  // absl sees "stragglar <command>" as the program name and parses the rest; it exits with a
  // message naming the flag on malformed values and unknown flags.
  std::vector<std::string> storage = {absl::StrCat(argv[0], " ", name)};
  for (std::string& arg : NormalizedArguments(argc, argv, 2, {"link_delay"})) {
    storage.push_back(std::move(arg));
  }
  std::vector<char*> args;
  for (std::string& arg : storage) args.push_back(arg.data());
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  absl::Status status = positional.size() > 1
                            ? Usage(absl::StrCat("unexpected argument \"", positional[1], "\""))
                            : CheckFlagsApply(*command);
  if (status.ok()) status = command->run();
  if (!status.ok()) {
    std::cerr << "stragglar " << name << ": " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace stragglar

int main(int argc, char** argv) { return stragglar::Main(argc, argv); }
