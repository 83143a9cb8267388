// stragglar_build_info: which stragglar, over which collective library, a process runs. The
// Prometheus convention for versions (as in node_exporter's node_exporter_build_info): a gauge
// that is always 1, its labels carrying the facts, so dashboards and alerts can join on them
// ("which jobs still run 0.1.0", "which NCCL did this slow job use").
#pragma once

#include <string>

#include "prometheus/registry.h"

namespace stragglar {

struct BuildInfo {
  std::string version;          // stragglar's (StragglarVersion())
  std::string backend;          // "nccl", "mpi" or "host" (ranks as threads)
  std::string backend_version;  // the library found at run time, e.g. "2.28.9", "Open MPI v4.1.4"
};

// Adds stragglar_build_info{version, backend, backend_version} = 1 to `registry`.
void ExportBuildInfo(prometheus::Registry& registry, const BuildInfo& info);

}  // namespace stragglar
