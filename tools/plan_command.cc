#include "tools/plan_command.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/synth/synthesizers.h"
#include "nlohmann/json.hpp"
#include "tools/plan_size_limit.h"
#include "tools/text_reports.h"

namespace stragglar {
namespace {

absl::Status Usage(absl::string_view message) { return absl::InvalidArgumentError(message); }

void Print(const Plan& plan, nlohmann::json extra, const PlanTableNote& note, bool json,
           std::ostream& out) {
  if (json) {
    WritePlanJson(plan, extra, out);
    out << "\n";
  } else {
    PrintPlanTable(plan, out, note);
  }
}

// Hierarchical StragglAR (its rails log-depth in `rail_blocks` blocks, or flat for 0, pipelined
// in --pieces), or the hierarchical ring, on the --topology machine.
absl::Status RunHierarchical(const PlanArgs& args, Algorithm algorithm, int rail_blocks,
                             std::ostream& out) {
  const Topology& topology = *args.topology;
  const int rail_pieces = rail_blocks == 0 ? args.pieces : 1;
  if (rail_blocks == 0) {
    if (absl::Status fits =
            HierarchicalPlanFits(topology, algorithm == Algorithm::kStragglar, rail_pieces);
        !fits.ok()) {
      return fits;
    }
  }
  absl::StatusOr<Plan> plan =
      algorithm == Algorithm::kRing
          ? SynthesizeHierarchicalRing(topology.nodes, topology.ranks_per_node)
          : SynthesizeHierarchicalStragglar(topology.nodes, topology.ranks_per_node,
                                            args.straggler.value_or(args.num_ranks - 1),
                                            rail_blocks, /*pieces=*/1, rail_pieces);
  if (!plan.ok() && plan.status().code() == absl::StatusCode::kInvalidArgument &&
      (rail_blocks > 0 || rail_pieces > 1)) {
    return Usage(absl::StrCat("--pieces: ", plan.status().message()));
  }
  if (!plan.ok()) return plan.status();
  nlohmann::json extra = {
      {"topology", {{"nodes", topology.nodes}, {"ranks_per_node", topology.ranks_per_node}}}};
  // One node, or one rank per node, has one level: the plan is that level's own, and says so.
  if (plan->variant != PlanVariant::kHierarchical) {
    Print(*plan, extra,
          {.family = absl::StrCat("one level on ", TopologyName(topology), ": the ",
                                  PlanVariantName(plan->variant), " plan")},
          args.json, out);
    return absl::OkStatus();
  }
  std::string family = absl::StrCat("hierarchical on ", TopologyName(topology));
  if (rail_blocks > 0) {
    extra["blocks"] = rail_blocks;
    absl::StrAppend(&family, ", log-depth rails of ", rail_blocks, " blocks");
  } else if (rail_pieces > 1) {
    extra["pieces"] = rail_pieces;
    absl::StrAppend(&family, ", flat rails in ", rail_pieces, " pieces per chunk");
  }
  Print(*plan, extra, {.family = family}, args.json, out);
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
  if (args.algorithm == PlanFamilyName(kStragglarLogDepthFamily)) {
    // On nodes: hierarchical StragglAR whose rails are log-depth in --pieces blocks.
    if (args.topology.has_value()) {
      return RunHierarchical(args, Algorithm::kStragglar, args.pieces, out);
    }
    return RunLogDepth(args, out);
  }
  absl::StatusOr<Algorithm> algorithm = ParsePlanAlgorithm(args.algorithm);
  if (!algorithm.ok()) {
    return Usage(absl::StrCat(algorithm.status().message(), " (or ",
                              PlanFamilyName(kStragglarLogDepthFamily), ")"));
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
  if (args.topology.has_value()) return RunHierarchical(args, *algorithm, 0, out);
  if (absl::Status fits = stragglar ? FlatStragglarPlanFits(args.num_ranks, args.pieces)
                          : *algorithm == Algorithm::kRing ? RingPlanFits(args.num_ranks)
                                                           : absl::OkStatus();
      !fits.ok()) {
    return fits;
  }
  absl::StatusOr<Plan> plan =
      stragglar ? SynthesizeStragglar(args.num_ranks, args.straggler.value_or(args.num_ranks - 1),
                                      args.pieces)
                : SynthesizePlan(*algorithm, args.num_ranks, std::nullopt);
  if (!plan.ok()) return plan.status();
  Print(*plan, nlohmann::json::object(), {}, args.json, out);
  return absl::OkStatus();
}

}  // namespace stragglar
