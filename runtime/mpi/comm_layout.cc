#include "runtime/mpi/comm_layout.h"

#include <numeric>

namespace stragglar {
namespace {

CommLayout LayoutOfNodes(MPI_Comm comm, std::vector<int64_t> node_of_rank) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  CommLayout layout{.node_of_rank = std::move(node_of_rank)};
  for (size_t r = 0; r < layout.node_of_rank.size(); ++r) {
    if (layout.node_of_rank[r] == layout.node_of_rank[rank]) {
      layout.host_ranks.push_back(static_cast<int>(r));
    }
  }
  return layout;
}

}  // namespace

std::vector<int> GatherWorldNodes() {
  int rank = 0, size = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node = MPI_COMM_NULL;
  int node_name = rank;
  if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
      MPI_SUCCESS) {
    return {};
  }
  PMPI_Allreduce(&rank, &node_name, 1, MPI_INT, MPI_MIN, node);
  PMPI_Comm_free(&node);
  std::vector<int> nodes(size);
  if (PMPI_Allgather(&node_name, 1, MPI_INT, nodes.data(), 1, MPI_INT, MPI_COMM_WORLD) !=
      MPI_SUCCESS) {
    return {};
  }
  return nodes;
}

std::optional<CommLayout> LayoutFromWorld(MPI_Comm comm, const std::vector<int>& world_nodes) {
  if (world_nodes.empty()) return std::nullopt;
  int size = 0;
  PMPI_Comm_size(comm, &size);
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  PMPI_Comm_group(comm, &group);
  PMPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(size), in_world(size);
  std::iota(ranks.begin(), ranks.end(), 0);
  const int translated =
      PMPI_Group_translate_ranks(group, size, ranks.data(), world, in_world.data());
  PMPI_Group_free(&group);
  PMPI_Group_free(&world);
  if (translated != MPI_SUCCESS) return std::nullopt;
  std::vector<int64_t> node_of_rank(size);
  for (int r = 0; r < size; ++r) {
    if (in_world[r] == MPI_UNDEFINED) return std::nullopt;
    node_of_rank[r] = world_nodes[in_world[r]];
  }
  return LayoutOfNodes(comm, std::move(node_of_rank));
}

CommLayout GatheredLayout(MPI_Comm comm, int64_t node_id) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  std::vector<int64_t> node_of_rank(size);
  PMPI_Allgather(&node_id, 1, MPI_INT64_T, node_of_rank.data(), 1, MPI_INT64_T, comm);
  return LayoutOfNodes(comm, std::move(node_of_rank));
}

}  // namespace stragglar
