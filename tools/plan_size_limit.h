// The size limit of the plans a command builds whole (`stragglar plan`, `stragglar sim`): a plan
// whose transfers would outgrow memory is refused with one line before it is built, where it
// ended in std::bad_alloc (the flat StragglAR plan for 16384 ranks, or the hierarchical one on
// 4096x16). The counts are the synthesizers' closed forms (kernels/synth/synthesizers.h).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "policy/model/topology.h"

namespace stragglar {

// Ring's plan and the flat StragglAR schedule up to 4097 ranks (README, "stragglar rounds", has
// what such plans took, with the command).
inline constexpr int64_t kMaxPlanTransfers = int64_t{1} << 25;

// Whether the flat StragglAR schedule (`stragglar`, in `pieces`) or Ring's plan (`ring`) for
// `num_ranks` fits. InvalidArgument otherwise, e.g.
//   --ranks 16384: the flat StragglAR plan would hold 536805378 transfers (about 20 GiB); at most
//   4097 ranks for the flat schedule (33554432 transfers); use stragglar-log-depth
// The line starts with `given`, the flag that asked for it ("--ranks 16384" by default).
absl::Status FlatStragglarPlanFits(int num_ranks, int pieces, absl::string_view given);
absl::Status FlatStragglarPlanFits(int num_ranks, int pieces);
absl::Status RingPlanFits(int num_ranks, absl::string_view given);
absl::Status RingPlanFits(int num_ranks);
// The same for the hierarchical ring and hierarchical StragglAR with flat rails (pipelined in
// `rail_pieces`) on `topology` (one level: the flat plans above).
absl::Status HierarchicalPlanFits(const Topology& topology, bool stragglar, int rail_pieces = 1);

}  // namespace stragglar
