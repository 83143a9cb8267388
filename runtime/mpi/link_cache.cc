#include "runtime/mpi/link_cache.h"

#include <array>

namespace stragglar {
namespace {

// A ProbedLinks as doubles, for one broadcast: the link inside nodes with its slow rank (by its
// rank in MPI_COMM_WORLD) and factor, whether there is one between nodes, and that one.
using Wire = std::array<double, 9>;

Wire ToWire(const ProbedLinks& links) {
  const LinkModel inter = links.inter_node.value_or(LinkModel{});
  return {links.intra_node.alpha_s,
          links.intra_node.bandwidth_bytes_per_s,
          links.intra_node.shared_lanes,
          links.inter_node.has_value() ? 1.0 : 0.0,
          inter.alpha_s,
          inter.bandwidth_bytes_per_s,
          inter.shared_lanes,
          static_cast<double>(links.intra_node.slow_rank),
          links.intra_node.slow_factor};
}

ProbedLinks FromWire(const Wire& wire) {
  ProbedLinks links{.intra_node = {.alpha_s = wire[0],
                                   .bandwidth_bytes_per_s = wire[1],
                                   .shared_lanes = wire[2],
                                   .slow_rank = static_cast<int>(wire[7]),
                                   .slow_factor = wire[8]}};
  if (wire[3] != 0) {
    links.inter_node =
        LinkModel{.alpha_s = wire[4], .bandwidth_bytes_per_s = wire[5], .shared_lanes = wire[6]};
  }
  return links;
}

// `rank` of `from` by its rank in `to`; -1 for -1, or for a process that is not in `to`.
int TranslateRank(MPI_Comm from, int rank, MPI_Comm to) {
  if (rank < 0) return -1;
  MPI_Group from_group = MPI_GROUP_NULL, to_group = MPI_GROUP_NULL;
  int translated = MPI_UNDEFINED;
  if (PMPI_Comm_group(from, &from_group) == MPI_SUCCESS &&
      PMPI_Comm_group(to, &to_group) == MPI_SUCCESS) {
    PMPI_Group_translate_ranks(from_group, 1, &rank, to_group, &translated);
  }
  if (from_group != MPI_GROUP_NULL) PMPI_Group_free(&from_group);
  if (to_group != MPI_GROUP_NULL) PMPI_Group_free(&to_group);
  return translated == MPI_UNDEFINED ? -1 : translated;
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
  ProbedLinks links = FromWire(wire);
  LinkModel& link = links.intra_node;
  link.slow_rank = TranslateRank(MPI_COMM_WORLD, link.slow_rank, comm);
  if (!link.has_slow_rank()) link.slow_factor = 1;
  return links;
}

void LinkCache::Keep(MPI_Comm comm, const LinkShape& shape, ProbedLinks links) {
  LinkModel& link = links.intra_node;
  link.slow_rank = TranslateRank(comm, link.slow_rank, MPI_COMM_WORLD);
  std::lock_guard<std::mutex> lock(mutex_);
  links_.insert_or_assign(shape, links);
}

LinkCacheUpdater::LinkCacheUpdater(LinkCache& cache, MPI_Comm comm, const LinkShape& shape,
                                   const ProbedLinks& links)
    : cache_(cache), comm_(comm), shape_(shape), kept_(KeyOf(0, links.intra_node)) {}

void LinkCacheUpdater::OnEpoch(int rank, const EpochReport& report) {
  const bool one_class = shape_.nodes == 1 || shape_.nodes == shape_.ranks;
  if (!one_class || KeyOf(0, report.link) == kept_) return;
  kept_ = KeyOf(0, report.link);
  cache_.Keep(
      comm_, shape_,
      {.intra_node = report.link,
       .inter_node = shape_.nodes > 1 ? std::optional<LinkModel>(report.link) : std::nullopt});
}

}  // namespace stragglar
