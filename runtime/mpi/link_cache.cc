#include "runtime/mpi/link_cache.h"

#include <array>

namespace stragglar {
namespace {

// A ProbedLinks as doubles, for one broadcast: the link inside nodes, whether there is one
// between them, and that one.
using Wire = std::array<double, 7>;

Wire ToWire(const ProbedLinks& links) {
  const LinkModel inter = links.inter_node.value_or(LinkModel{});
  return {links.intra_node.alpha_s,
          links.intra_node.bandwidth_bytes_per_s,
          links.intra_node.shared_lanes,
          links.inter_node.has_value() ? 1.0 : 0.0,
          inter.alpha_s,
          inter.bandwidth_bytes_per_s,
          inter.shared_lanes};
}

ProbedLinks FromWire(const Wire& wire) {
  ProbedLinks links{.intra_node = {.alpha_s = wire[0],
                                   .bandwidth_bytes_per_s = wire[1],
                                   .shared_lanes = wire[2]}};
  if (wire[3] != 0) {
    links.inter_node =
        LinkModel{.alpha_s = wire[4], .bandwidth_bytes_per_s = wire[5], .shared_lanes = wire[6]};
  }
  return links;
}

}  // namespace

std::optional<ProbedLinks> LinkCache::Agreed(MPI_Comm comm, const LinkShape& shape) {
  Wire wire{};
  int have = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = links_.find(shape);
    if (it != links_.end()) {
      wire = ToWire(it->second);
      have = 1;
    }
  }
  int everyone = 0;
  if (PMPI_Allreduce(&have, &everyone, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || everyone == 0) {
    return std::nullopt;
  }
  if (PMPI_Bcast(wire.data(), static_cast<int>(wire.size()), MPI_DOUBLE, 0, comm) != MPI_SUCCESS) {
    return std::nullopt;  // then every rank's broadcast failed: each probes, alike
  }
  return FromWire(wire);
}

void LinkCache::Keep(const LinkShape& shape, const ProbedLinks& links) {
  std::lock_guard<std::mutex> lock(mutex_);
  links_.emplace(shape, links);
}

}  // namespace stragglar
