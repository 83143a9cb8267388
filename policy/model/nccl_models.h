// What NCCL itself would run for an AllReduce on a machine of nodes, in closed form, so that a
// StragglAR plan is compared with NCCL's real algorithms and not with a strawman. Both follow the
// structure of NCCL's own tuning model (latency + bytes / bus bandwidth) with the network's link
// classes, and both leave out NCCL's correction factors, so they are NCCL's best case.
// docs/scale-model.md says what is assumed and where it differs from NCCL.
#pragma once

#include <array>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/model/network_model.h"

namespace stragglar {

enum class NcclModel : uint8_t {
  // Rings through every GPU, node after node, one per rail: each ring leaves a node through a
  // different GPU's NIC, so the NICs share the inter-node traffic and NVLink carries the rest.
  // Pipelined: each step costs its latency once, not once per chunk.
  kRing,
  // NCCL's double binary tree over the nodes with a chain inside each node: log-depth latency,
  // and per NCCL's model the ring's bus bandwidth for half the algorithm bandwidth.
  kTree,
};

inline constexpr std::array<NcclModel, 2> kAllNcclModels = {NcclModel::kRing, NcclModel::kTree};

// "nccl-ring", "nccl-tree".
absl::string_view NcclModelName(NcclModel model);
absl::StatusOr<NcclModel> ParseNcclModel(absl::string_view name);

struct NcclModelCost {
  double latency_s = 0;    // the steps' latencies, each paid once (pipelined)
  double bandwidth_s = 0;  // the busiest link's bytes over its bandwidth
  int steps = 0;           // hops a piece of data takes from start to finish
  double seconds() const { return latency_s + bandwidth_s; }
};

// The time of an AllReduce of `bytes` after every rank has arrived. On one node the ring model is
// exactly RingSeconds (2(n-1) alpha + 2(n-1)/n S beta), the tree a chain of the node's ranks.
NcclModelCost NcclAllReduceCost(NcclModel model, const NetworkModel& network, double bytes);

}  // namespace stragglar
