#include "policy/model/nccl_models.h"

#include <algorithm>
#include <bit>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

// Seconds per byte of "bus" traffic, the 2(n-1)/n S a ring moves through every rank. On one node
// it all goes over the rank's NVLink. Across nodes every rank is the exit of one ring in G, so 1/G
// of it crosses the rank's NIC and (G-1)/G its NVLink, at the same time.
double BusSecondsPerByte(const NetworkModel& network) {
  const Topology& topology = network.topology;
  if (!topology.multi_node()) return network.intra_node.beta();
  const double g = topology.ranks_per_node;
  return std::max(network.inter_node.beta() / g, network.intra_node.beta() * (g - 1) / g);
}

}  // namespace

absl::string_view NcclModelName(NcclModel model) {
  return model == NcclModel::kRing ? "nccl-ring" : "nccl-tree";
}

absl::StatusOr<NcclModel> ParseNcclModel(absl::string_view name) {
  for (NcclModel model : kAllNcclModels) {
    if (name == NcclModelName(model)) return model;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown NCCL model \"", name, "\" (expected nccl-ring or nccl-tree)"));
}

NcclModelCost NcclAllReduceCost(NcclModel model, const NetworkModel& network, double bytes) {
  const Topology& topology = network.topology;
  const int n = topology.num_ranks();
  const int nodes = topology.nodes;
  const double alpha_intra = network.intra_node.alpha_s;
  const double alpha_inter = network.inter_node.alpha_s;
  NcclModelCost cost;
  if (model == NcclModel::kRing) {
    // A piece crosses 2(n - 1) hops (ReduceScatter then AllGather); NCCL counts 2N of them as
    // network hops once there are several nodes.
    cost.steps = 2 * (n - 1);
    const int inter_steps = topology.multi_node() ? std::min(2 * nodes, cost.steps) : 0;
    cost.latency_s = (cost.steps - inter_steps) * alpha_intra + inter_steps * alpha_inter;
    cost.bandwidth_s = 2.0 * (n - 1) / n * bytes * BusSecondsPerByte(network);
    return cost;
  }
  // Up the chain and the tree to the root, then down again. NCCL's model takes floor(log2 N) for
  // the tree's depth; a double binary tree of N nodes is that deep.
  const int depth = std::bit_width(static_cast<unsigned>(nodes)) - 1;
  const int chain = topology.ranks_per_node - 1;
  cost.steps = 2 * (chain + depth);
  cost.latency_s = 2 * (chain * alpha_intra + depth * alpha_inter);
  // NCCL prices the tree at the ring's bus bandwidth for half the algorithm bandwidth: the data
  // goes up and comes down, 2 S through the busiest rank.
  cost.bandwidth_s = n > 1 ? 2.0 * bytes * BusSecondsPerByte(network) : 0;
  return cost;
}

}  // namespace stragglar
