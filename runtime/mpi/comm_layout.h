// Where a communicator's ranks are, known without a word to them: every world rank's node is
// gathered once, at MPI_Init, and a communicator's ranks map onto world ranks through its group
// (MPI_Group_translate_ranks, local). Frameworks make communicators often (sub-groups, pipeline
// stages); each one's setup then costs no collective for this.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace stragglar {

// Every world rank's node, named by the lowest world rank that shares memory with it
// (MPI_COMM_TYPE_SHARED). Collective over MPI_COMM_WORLD; empty when a call fails.
std::vector<int> GatherWorldNodes();

struct CommLayout {
  std::vector<int64_t> node_of_rank;  // per rank of the communicator
  std::vector<int> host_ranks;        // the communicator's ranks on this rank's node, in order
  bool whole_comm_on_host() const { return host_ranks.size() == node_of_rank.size(); }
};

// The layout of `comm` from `world_nodes` (GatherWorldNodes), without communication; nullopt
// where a rank of `comm` is not of this world (spawned and merged): then none of them is of every
// member's world, so every rank of `comm` gets nullopt and can gather instead (GatheredLayout).
std::optional<CommLayout> LayoutFromWorld(MPI_Comm comm, const std::vector<int>& world_nodes);

// The layout from every rank's `node_id` (e.g. HostNodeId), gathered over `comm` (collective).
CommLayout GatheredLayout(MPI_Comm comm, int64_t node_id);

}  // namespace stragglar
