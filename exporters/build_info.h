// stragglar_build_info: which stragglar, over which collective library, each rank of a
// communicator runs. The Prometheus convention for versions (as node_exporter_build_info): a gauge
// that is always 1, its labels carrying the facts, so dashboards and alerts can join on them
// ("which jobs still run 0.1.0", "which NCCL did this slow job use"). Like every stragglar metric
// it carries comm and rank, so it joins on (comm, rank) with any of them.
#pragma once

#include <string>
#include <vector>

#include "prometheus/registry.h"

namespace stragglar {

struct BuildInfo {
  std::string version;          // stragglar's (StragglarVersion())
  std::string backend;          // "nccl", "mpi" or "host" (ranks as threads)
  std::string backend_version;  // the library found at run time, e.g. "2.28.9", "Open MPI v4.1.4"
};

// Adds stragglar_build_info{comm, rank, version, backend, backend_version} = 1 to `registry`, for
// each of `ranks` of communicator `comm`.
void ExportBuildInfo(prometheus::Registry& registry, const BuildInfo& info, const std::string& comm,
                     const std::vector<int>& ranks);

}  // namespace stragglar
