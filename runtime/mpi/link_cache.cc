#include "runtime/mpi/link_cache.h"

#include <array>
#include <utility>
#include <vector>

namespace stragglar {
namespace {

// A ProbedLinks as doubles, for one broadcast: the link inside nodes with its slow rank (by its
// rank in MPI_COMM_WORLD) and factor, whether there is one between nodes, and that one; last, how
// many values of speeds a second broadcast carries (0: none).
using Wire = std::array<double, 10>;
constexpr size_t kSpeedCountAt = 9;
// A RankLinkSpeed's four speeds, in the order of its fields.
constexpr size_t kValuesPerSpeed = 4;

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
          links.intra_node.slow_factor,
          0.0};
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

// `ranks` of `from` by their ranks in `to`; -1 for -1, or for a process that is not in `to`.
std::vector<int> TranslateRanks(MPI_Comm from, std::vector<int> ranks, MPI_Comm to) {
  std::vector<int> translated(ranks.size(), MPI_UNDEFINED);
  for (int& rank : ranks) {
    if (rank < 0) rank = MPI_PROC_NULL;  // translated to MPI_PROC_NULL
  }
  MPI_Group from_group = MPI_GROUP_NULL, to_group = MPI_GROUP_NULL;
  if (PMPI_Comm_group(from, &from_group) == MPI_SUCCESS &&
      PMPI_Comm_group(to, &to_group) == MPI_SUCCESS) {
    PMPI_Group_translate_ranks(from_group, static_cast<int>(ranks.size()), ranks.data(), to_group,
                               translated.data());
  }
  if (from_group != MPI_GROUP_NULL) PMPI_Group_free(&from_group);
  if (to_group != MPI_GROUP_NULL) PMPI_Group_free(&to_group);
  for (int& rank : translated) {
    if (rank == MPI_UNDEFINED || rank == MPI_PROC_NULL) rank = -1;
  }
  return translated;
}
int TranslateRank(MPI_Comm from, int rank, MPI_Comm to) {
  return TranslateRanks(from, {rank}, to).front();
}
// Every rank of `comm`, by its rank in MPI_COMM_WORLD.
std::vector<int> WorldRanks(MPI_Comm comm) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank) ranks[rank] = rank;
  return TranslateRanks(comm, std::move(ranks), MPI_COMM_WORLD);
}

// The kept speeds of every rank of `comm`, by its ranks, kValuesPerSpeed each; empty unless every
// one of its processes was measured.
std::vector<double> SpeedValues(MPI_Comm comm, const std::map<int, RankLinkSpeed>& by_world_rank) {
  std::vector<double> values;
  for (int world_rank : WorldRanks(comm)) {
    auto it = by_world_rank.find(world_rank);
    if (it == by_world_rank.end()) return {};
    const RankLinkSpeed& speed = it->second;
    values.insert(values.end(),
                  {speed.send_bytes_per_s, speed.receive_bytes_per_s,
                   speed.slowest_send_bytes_per_s, speed.slowest_receive_bytes_per_s});
  }
  return values;
}

std::vector<RankLinkSpeed> SpeedsOf(const std::vector<double>& values) {
  std::vector<RankLinkSpeed> speeds;
  for (size_t i = 0; i + kValuesPerSpeed <= values.size(); i += kValuesPerSpeed) {
    speeds.push_back({.send_bytes_per_s = values[i],
                      .receive_bytes_per_s = values[i + 1],
                      .slowest_send_bytes_per_s = values[i + 2],
                      .slowest_receive_bytes_per_s = values[i + 3]});
  }
  return speeds;
}

}  // namespace

std::optional<ProbedLinks> LinkCache::Agreed(MPI_Comm comm, const LinkShape& shape) {
  Wire wire{};
  int have = 0;
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  std::vector<double> speeds;  // rank 0's, to broadcast
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = links_.find(shape);
    if (it != links_.end()) {
      wire = ToWire(it->second.links);
      have = 1;
      if (rank == 0) speeds = SpeedValues(comm, it->second.speeds_by_world_rank);
      wire[kSpeedCountAt] = static_cast<double>(speeds.size());
    }
  }
  int everyone = 0;
  if (PMPI_Allreduce(&have, &everyone, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || everyone == 0) {
    return std::nullopt;
  }
  if (PMPI_Bcast(wire.data(), static_cast<int>(wire.size()), MPI_DOUBLE, 0, comm) != MPI_SUCCESS) {
    return std::nullopt;  // then every rank's broadcast failed: each probes, alike
  }
  speeds.resize(static_cast<size_t>(wire[kSpeedCountAt]));
  if (!speeds.empty() && PMPI_Bcast(speeds.data(), static_cast<int>(speeds.size()), MPI_DOUBLE, 0,
                                    comm) != MPI_SUCCESS) {
    return std::nullopt;
  }
  ProbedLinks links = FromWire(wire);
  links.rank_speeds = SpeedsOf(speeds);
  LinkModel& link = links.intra_node;
  link.slow_rank = TranslateRank(MPI_COMM_WORLD, link.slow_rank, comm);
  if (!link.has_slow_rank()) link.slow_factor = 1;
  return links;
}

void LinkCache::Keep(MPI_Comm comm, const LinkShape& shape, ProbedLinks links) {
  LinkModel& link = links.intra_node;
  link.slow_rank = TranslateRank(comm, link.slow_rank, MPI_COMM_WORLD);
  Kept kept;
  const std::vector<int> world_ranks = WorldRanks(comm);
  if (links.rank_speeds.size() == world_ranks.size()) {
    for (size_t rank = 0; rank < world_ranks.size(); ++rank) {
      kept.speeds_by_world_rank[world_ranks[rank]] = links.rank_speeds[rank];
    }
  }
  links.rank_speeds.clear();
  kept.links = std::move(links);
  std::lock_guard<std::mutex> lock(mutex_);
  links_.insert_or_assign(shape, std::move(kept));
}

LinkCacheUpdater::LinkCacheUpdater(LinkCache& cache, MPI_Comm comm, const LinkShape& shape,
                                   const ProbedLinks& links)
    : cache_(cache),
      comm_(comm),
      shape_(shape),
      kept_(KeyOf(0, links.intra_node)),
      kept_speeds_(links.rank_speeds) {}

void LinkCacheUpdater::OnEpoch(int rank, const EpochReport& report) {
  const bool one_class = shape_.nodes == 1 || shape_.nodes == shape_.ranks;
  if (!one_class || (KeyOf(0, report.link) == kept_ && report.link_speeds == kept_speeds_)) return;
  kept_ = KeyOf(0, report.link);
  kept_speeds_ = report.link_speeds;
  cache_.Keep(
      comm_, shape_,
      {.intra_node = report.link,
       .inter_node = shape_.nodes > 1 ? std::optional<LinkModel>(report.link) : std::nullopt,
       .rank_speeds = report.link_speeds});
}

}  // namespace stragglar
