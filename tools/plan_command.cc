#include "tools/plan_command.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/synthesizers.h"
#include "nlohmann/json.hpp"
#include "tools/text_reports.h"

namespace stragglar {
namespace {

absl::Status Usage(absl::string_view message) { return absl::InvalidArgumentError(message); }

void Print(const Plan& plan, nlohmann::json extra, const PlanTableNote& note, bool json,
           std::ostream& out) {
  if (json) {
    nlohmann::json document = PlanToJson(plan);
    document.update(extra);
    out << document.dump(2) << "\n";
  } else {
    PrintPlanTable(plan, out, note);
  }
}

// Hierarchical StragglAR, or the hierarchical ring, on the --topology machine.
absl::Status RunHierarchical(const PlanArgs& args, Algorithm algorithm, std::ostream& out) {
  const Topology& topology = *args.topology;
  if (args.pieces != 1) {
    return Usage("--pieces does not apply with --topology: the hierarchical plan is not pipelined");
  }
  absl::StatusOr<Plan> plan =
      algorithm == Algorithm::kRing
          ? SynthesizeHierarchicalRing(topology.nodes, topology.ranks_per_node)
          : SynthesizeHierarchicalStragglar(topology.nodes, topology.ranks_per_node,
                                            args.straggler.value_or(args.num_ranks - 1));
  if (!plan.ok()) return plan.status();
  Print(*plan,
        {{"topology", {{"nodes", topology.nodes}, {"ranks_per_node", topology.ranks_per_node}}}},
        {.family = absl::StrCat("hierarchical on ", TopologyName(topology))}, args.json, out);
  return absl::OkStatus();
}

// Log-depth StragglAR with --pieces blocks.
absl::Status RunLogDepth(const PlanArgs& args, std::ostream& out) {
  absl::StatusOr<Plan> plan = SynthesizeLogDepthStragglar(
      args.num_ranks, args.straggler.value_or(args.num_ranks - 1), args.pieces);
  if (!plan.ok()) return Usage(absl::StrCat("--pieces: ", plan.status().message()));
  Print(*plan, {{"blocks", args.pieces}},
        {.family = absl::StrFormat("log-depth, %d blocks", args.pieces),
         .post_arrival_bound = LogDepthRoundLowerBound(args.num_ranks, args.pieces)},
        args.json, out);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunPlanCommand(const PlanArgs& args, std::ostream& out) {
  if (args.algorithm == kLogDepthStragglarName) {
    if (args.topology.has_value()) {
      return Usage("--topology does not apply to stragglar-log-depth, a plan for flat machines");
    }
    return RunLogDepth(args, out);
  }
  absl::StatusOr<Algorithm> algorithm = ParseAlgorithm(args.algorithm);
  if (!algorithm.ok()) {
    return Usage(absl::StrCat(algorithm.status().message(), " (or ", kLogDepthStragglarName, ")"));
  }
  const bool stragglar = *algorithm == Algorithm::kStragglar;
  if (args.topology.has_value() && *algorithm == Algorithm::kHalvingDoubling) {
    return Usage(
        "--topology applies to --algorithm stragglar and ring only (Halving-Doubling does not "
        "depend on the machine)");
  }
  if (args.straggler.has_value() && !stragglar) {
    return Usage("--straggler applies to --algorithm stragglar only");
  }
  if (args.pieces != 1 && !stragglar) {
    return Usage("--pieces applies to --algorithm stragglar only");
  }
  if (args.topology.has_value()) return RunHierarchical(args, *algorithm, out);
  absl::StatusOr<Plan> plan =
      stragglar ? SynthesizeStragglar(args.num_ranks, args.straggler.value_or(args.num_ranks - 1),
                                      args.pieces)
                : SynthesizePlan(*algorithm, args.num_ranks, std::nullopt);
  if (!plan.ok()) return plan.status();
  Print(*plan, nlohmann::json::object(), {}, args.json, out);
  return absl::OkStatus();
}

}  // namespace stragglar
