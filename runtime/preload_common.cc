#include "runtime/preload_common.h"

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "runtime/version.h"

namespace stragglar {

namespace {

// Writes a buffered log's lines whatever the level.
void LogAlwaysLines(const std::string& lines) {
  for (absl::string_view line : absl::StrSplit(lines, '\n', absl::SkipEmpty())) {
    LogAlways(LogLevel::kWarn, line);
  }
}

}  // namespace

PreloadConfig ConfigureFromEnv(absl::string_view library, absl::string_view backend_library) {
  std::ostringstream invalid;
  PreloadConfig config = PreloadConfigFromEnv(nullptr, &invalid);
  SetLogLevel(config.debug);
  Log(LogLevel::kInfo, absl::StrCat(library, " ", StragglarVersion(), " active over ",
                                    backend_library, ": ", DescribeConfig(config)));
  LogAlwaysLines(invalid.str());
  return config;
}

int LocalRankFromEnv() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      return std::atoi(value);
    }
  }
  return 0;
}

MetricsSetup StartMetricsFromEnv(int local_rank) {
  MetricsSetup setup;
  std::ostringstream config_log;
  if (std::optional<MetricsEndpoint> endpoint = MetricsEndpointFromEnv(local_rank, config_log)) {
    auto registry = std::make_shared<prometheus::Registry>();
    absl::StatusOr<std::unique_ptr<MetricsServer>> server =
        MetricsServer::Start(endpoint->address, endpoint->port, registry);
    if (server.ok()) {
      setup.registry = std::move(registry);
      setup.server = *std::move(server);
      Log(LogLevel::kInfo,
          absl::StrCat("metrics on http://", setup.server->endpoint(), "/metrics"));
    } else {
      Log(LogLevel::kWarn, absl::StrCat(server.status().message(), "; running without metrics"));
    }
  }
  // A bad STRAGGLAR_METRICS_* value is printed whatever the log level, like every setting.
  LogAlwaysLines(config_log.str());
  return setup;
}

absl::StatusOr<std::optional<Topology>> LearnTopology(const PreloadConfig& config,
                                                      CommBackend& backend, int size,
                                                      int64_t node_id, absl::string_view comm) {
  // Always gathered, so that ranks with different environments still make the same calls.
  const double mine[] = {static_cast<double>(node_id)};
  if (absl::Status status = backend.StartGather(mine); !status.ok()) return status;
  absl::StatusOr<std::vector<double>> all = backend.FinishGather();
  if (!all.ok()) return all.status();
  if (all->size() != static_cast<size_t>(size)) {
    return absl::InternalError(
        absl::StrCat("node ids: gathered ", all->size(), " values from ", size, " ranks"));
  }
  return TopologyOfNodes(config, std::vector<int64_t>(all->begin(), all->end()), comm);
}

std::optional<Topology> TopologyOfNodes(const PreloadConfig& config,
                                        const std::vector<int64_t>& node_of_rank,
                                        absl::string_view comm) {
  const int size = static_cast<int>(node_of_rank.size());
  if (config.topology.has_value()) {
    if (config.topology->num_ranks() == size) {
      Log(LogLevel::kInfo, absl::StrCat(comm, ": topology ", TopologyName(*config.topology),
                                        " (STRAGGLAR_TOPOLOGY)"));
      return config.topology;
    }
    LogOnce(LogLevel::kWarn, "topology-size",
            absl::StrCat("STRAGGLAR_TOPOLOGY=", TopologyName(*config.topology), " has ",
                         config.topology->num_ranks(), " ranks, ", comm, " has ", size,
                         "; using the nodes the ranks report"));
  }
  absl::StatusOr<Topology> learned = TopologyFromNodeIds(node_of_rank);
  if (!learned.ok()) {
    LogOnce(LogLevel::kInfo, "topology-learned",
            absl::StrCat(comm, ": ", learned.status().message(), "; priced as one node"));
    return std::nullopt;
  }
  if (!learned->multi_node()) return std::nullopt;
  Log(LogLevel::kInfo,
      absl::StrCat(comm, ": ", learned->nodes, " nodes of ", learned->ranks_per_node, " ranks"));
  return *learned;
}

int64_t HostNodeId() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return static_cast<int64_t>(std::hash<std::string>{}(name) & ((uint64_t{1} << 52) - 1));
}

CommOptions PreloadCommOptions(const PreloadConfig& config, absl::string_view backend,
                               absl::string_view library_call, std::string name,
                               LagSource lag_source) {
  CommOptions options{.runtime = ToRuntimeConfig(config),
                      .name = std::move(name),
                      .backend = std::string(backend),
                      .library_call = std::string(library_call),
                      .has_native = true,
                      .forced = config.algorithm,
                      .forced_straggler = config.straggler};
  // The library's own AllReduce by default; our plans where the model, calibrated on what each
  // really took, says they are faster.
  options.runtime.default_algorithm = Algorithm::kNative;
  options.runtime.candidates = {Algorithm::kNative, Algorithm::kRing, Algorithm::kHalvingDoubling,
                                Algorithm::kStragglar};
  options.runtime.lag_source = lag_source;
  return options;
}

}  // namespace stragglar
