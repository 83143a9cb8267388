#include "tools/plan_size_limit.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "base/units.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

constexpr double kBytesPerTransfer = 40;  // measured: README, "stragglar rounds"
constexpr int kMostRanks = 65536;

// The largest x in [lowest, kMostRanks] whose plan fits (transfers(x) grows with x); lowest - 1
// when none does.
int LargestFitting(int lowest, const std::function<int64_t(int)>& transfers) {
  int fits = lowest - 1, too_big = kMostRanks + 1;
  while (too_big - fits > 1) {
    const int middle = fits + (too_big - fits) / 2;
    (transfers(middle) <= kMaxPlanTransfers ? fits : too_big) = middle;
  }
  return fits;
}

absl::Status TooLarge(absl::string_view given, absl::string_view plan, int64_t transfers,
                      absl::string_view largest, absl::string_view instead) {
  return absl::InvalidArgumentError(
      absl::StrCat(given, ": the ", plan, " would hold ", transfers, " transfers (about ",
                   FormatBytes(static_cast<double>(transfers) * kBytesPerTransfer), "); at most ",
                   largest, " (", kMaxPlanTransfers, " transfers); use ", instead));
}

}  // namespace

absl::Status FlatStragglarPlanFits(int num_ranks, int pieces, absl::string_view given) {
  const int64_t transfers = FlatStragglarTransfersBound(num_ranks, pieces);
  if (transfers <= kMaxPlanTransfers) return absl::OkStatus();
  const int largest =
      LargestFitting(2, [pieces](int n) { return FlatStragglarTransfersBound(n, pieces); });
  return TooLarge(given, "flat StragglAR plan", transfers,
                  absl::StrCat(largest, " ranks for the flat schedule"), "stragglar-log-depth");
}

absl::Status RingPlanFits(int num_ranks, absl::string_view given) {
  const int64_t transfers = RingTransfers(num_ranks);
  if (transfers <= kMaxPlanTransfers) return absl::OkStatus();
  return TooLarge(given, "Ring plan", transfers,
                  absl::StrCat(LargestFitting(2, RingTransfers), " ranks for Ring's plan"),
                  "halving-doubling, or a --topology for the hierarchical ring");
}

absl::Status FlatStragglarPlanFits(int num_ranks, int pieces) {
  return FlatStragglarPlanFits(num_ranks, pieces, absl::StrCat("--ranks ", num_ranks));
}

absl::Status RingPlanFits(int num_ranks) {
  return RingPlanFits(num_ranks, absl::StrCat("--ranks ", num_ranks));
}

absl::Status HierarchicalPlanFits(const Topology& topology, bool stragglar, int rail_pieces) {
  const std::string given = absl::StrCat("--topology ", TopologyName(topology));
  if (!topology.multi_node() || topology.ranks_per_node == 1) {
    return stragglar ? FlatStragglarPlanFits(topology.num_ranks(), rail_pieces, given)
                     : RingPlanFits(topology.num_ranks(), given);
  }
  const int per_node = topology.ranks_per_node;
  const int64_t transfers = HierarchicalTransfersBound(topology.nodes, per_node, rail_pieces);
  if (transfers <= kMaxPlanTransfers) return absl::OkStatus();
  const int largest = LargestFitting(1, [per_node, rail_pieces](int nodes) {
    return HierarchicalTransfersBound(nodes, per_node, rail_pieces);
  });
  return TooLarge(given, "hierarchical plan", transfers,
                  absl::StrCat(largest, " nodes of ", per_node, " ranks"),
                  stragglar ? "stragglar-log-depth (its rails log-depth)" : "fewer nodes");
}

}  // namespace stragglar
