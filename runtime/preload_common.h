// What both preload libraries (libstragglar.so for NCCL, libstragglar_mpi.so for MPI) do the same
// way around their communicators: the settings and the metrics endpoint from the environment, the
// machine's topology, and the communicator options from the STRAGGLAR_* settings. What they keep
// per process (the outputs among it) is runtime/preload_process.h.
#pragma once

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "exporters/prometheus_exporter.h"
#include "runtime/communicator.h"
#include "runtime/env_config.h"

namespace stragglar {

// Reads the STRAGGLAR_* settings and sets the log level. Its first line, at INFO, says that
// `library` (e.g. "libstragglar.so") is active, its version, and `backend_library` (the collective
// library found, e.g. "NCCL 2.28.9"):
//   libstragglar.so 0.1.0 active over NCCL 2.28.9: mode adapt, epoch 64 calls, ...
// then one line per invalid setting, printed whatever the level (see PreloadConfigFromEnv).
PreloadConfig ConfigureFromEnv(absl::string_view library, absl::string_view backend_library);

// The endpoint STRAGGLAR_METRICS_PORT / STRAGGLAR_METRICS_ADDR configure for the process of node
// rank `local_rank`, started; both null when it is not configured or cannot bind (said in one
// line: the job goes on without metrics).
struct MetricsSetup {
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<MetricsServer> server;
};
MetricsSetup StartMetricsFromEnv(int local_rank);
// The node-local rank as the launcher gives it (torchrun's LOCAL_RANK, OpenMPI's, Slurm's); 0
// without one. For a library that has no node communicator of its own to ask (NCCL's).
int LocalRankFromEnv();

// A preload library's communicator options from its settings: the policy's (ToRuntimeConfig),
// the library's own AllReduce as the default algorithm (priced as Ring), Ring and StragglAR as
// the candidates, STRAGGLAR_ALGORITHM applied, failures logged under `library_call`.
// The machine a communicator of `size` ranks runs on, for the policy's cost model. Gathers every
// rank's `node_id` (equal on the ranks of one node) through `backend`, so every rank of the
// communicator must call it, at setup. STRAGGLAR_TOPOLOGY wins when it has `size` ranks; else the
// gathered ids' topology (TopologyFromNodeIds); else nullopt (one node), with one line saying why.
// A topology of several nodes is logged at INFO. Pricing per link class costs about what pricing
// one machine does (ring runs that cross nodes are in closed form): 1.4 ms an epoch at 1024 ranks
// in nodes of 8 and 5.7-7.0 ms at 4096 (policy_bench), so there is no size limit.
absl::StatusOr<std::optional<Topology>> LearnTopology(const PreloadConfig& config,
                                                      CommBackend& backend, int size,
                                                      int64_t node_id, absl::string_view comm);
// LearnTopology's verdict once every rank's node id is known (`node_of_rank`, one per rank),
// without a gather: for a library that knows them already.
std::optional<Topology> TopologyOfNodes(const PreloadConfig& config,
                                        const std::vector<int64_t>& node_of_rank,
                                        absl::string_view comm);

// A node identity from this host's name: 52 bits of its hash, exact in the doubles the gather
// carries. The same on every rank of a host (one binary), different across hosts but for hash
// collisions.
int64_t HostNodeId();

CommOptions PreloadCommOptions(const PreloadConfig& config, absl::string_view backend,
                               absl::string_view library_call, std::string name,
                               LagSource lag_source);

}  // namespace stragglar
