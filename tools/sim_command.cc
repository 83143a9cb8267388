#include "tools/sim_command.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/units.h"
#include "kernels/synth/synthesizers.h"
#include "nlohmann/json.hpp"
#include "policy/hierarchical_rails.h"
#include "policy/model/nccl_models.h"
#include "policy/model/queue_simulator.h"
#include "policy/model/simulator.h"
#include "policy/plan_cache.h"
#include "policy/stragglar_shape.h"
#include "tools/plan_size_limit.h"
#include "tools/progress.h"

namespace stragglar {
namespace {

// A plan family (kernels/plan/plan.h), simulated transfer by transfer, or one of NCCL's
// algorithms in closed form.
using Candidate = std::variant<PlanFamily, NcclModel>;

std::string CandidateName(const Candidate& candidate) {
  if (const PlanFamily* family = std::get_if<PlanFamily>(&candidate)) {
    return std::string(PlanFamilyName(*family));
  }
  return std::string(NcclModelName(std::get<NcclModel>(candidate)));
}

absl::StatusOr<Candidate> ParseCandidate(absl::string_view name) {
  if (std::optional<PlanFamily> family = FindPlanFamily(name)) return *family;
  if (absl::StatusOr<NcclModel> model = ParseNcclModel(name); model.ok()) return *model;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown algorithm \"", name,
                   "\" (expected ring, halving-doubling, stragglar, stragglar-hierarchical, "
                   "stragglar-log-depth, ring-hierarchical, nccl-ring or nccl-tree)"));
}

// By default, flat StragglAR only up to the ranks the policy builds it for: above, its plan has
// tens of millions of transfers (25 million, 1.5 GB to synthesize, at 4096 ranks), and log-depth
// StragglAR, listed too, is faster after arrival there. --algorithms stragglar still prices it.
bool FlatStragglarByDefault(const Topology& topology) {
  return topology.num_ranks() <= PlanCache::kMaxFlatStragglarRanks;
}

absl::StatusOr<std::vector<Candidate>> ParseCandidates(absl::string_view names,
                                                       const Topology& topology) {
  const bool defaults = names.empty();
  if (defaults) {
    names = topology.multi_node() ? "ring,halving-doubling,stragglar,stragglar-hierarchical,"
                                    "nccl-ring,nccl-tree,stragglar-log-depth,ring-hierarchical"
                                  : "ring,halving-doubling,stragglar,stragglar-log-depth";
  }
  std::vector<Candidate> candidates;
  for (absl::string_view name : absl::StrSplit(names, ',')) {
    absl::StatusOr<Candidate> candidate = ParseCandidate(name);
    if (!candidate.ok()) return candidate.status();
    if (defaults && *candidate == Candidate(PlanFamily{.algorithm = Algorithm::kStragglar}) &&
        !FlatStragglarByDefault(topology)) {
      continue;
    }
    for (const Candidate& seen : candidates) {
      if (seen == *candidate) {
        return absl::InvalidArgumentError(absl::StrCat("algorithm \"", name, "\" listed twice"));
      }
    }
    candidates.push_back(*candidate);
  }
  return candidates;
}

struct SimRow {
  Candidate candidate;
  int rounds = 0;  // a plan's rounds, a closed form's steps
  // Log-depth StragglAR's block count, or hierarchical StragglAR's rails' (0: flat rails); 0 for
  // the others.
  int blocks = 0;
  // Hierarchical StragglAR's pieces per shard inside nodes (> 1 only with --queues per-class).
  int pieces = 1;
  // Hierarchical StragglAR's flat rails' pieces per chunk.
  int rail_pieces = 1;
  // Hierarchical StragglAR timed for per-class queues at calls of this size (0: not timed).
  int64_t queue_timed_bytes = 0;
  std::optional<Plan> plan;               // simulated with its transfers
  std::optional<PlanHeader> ring_header;  // Ring simulated by its ring run, without its transfers
  bool simulated() const { return plan.has_value() || ring_header.has_value(); }
  double completion_s = 0;
  double after_last_arrival_s = 0;
  // StragglAR's family: the break-even delay against each baseline (kNever: never wins), in the
  // order of the rows.
  std::vector<std::pair<std::string, double>> break_even_delay_s;

  bool is_stragglar() const { return plan.has_value() && plan->straggler.has_value(); }
  std::string family() const { return is_stragglar() ? "stragglar" : "baseline"; }
};

absl::StatusOr<SimRow> SimulatePlanRow(const Candidate& candidate, Plan plan, const SimArgs& args) {
  const std::vector<double> arrival_s =
      OneLateRank(args.network.topology.num_ranks(), args.straggler, args.delay_s);
  const double bytes = static_cast<double>(args.bytes);
  absl::StatusOr<SimulationResult> result =
      args.per_class_queues ? SimulatePlanWithQueues(plan, bytes, args.network, arrival_s)
                            : SimulatePlan(plan, bytes, args.network, arrival_s);
  if (!result.ok()) return result.status();
  return SimRow{.candidate = candidate,
                .rounds = plan.num_rounds(),
                .plan = std::move(plan),
                .completion_s = result->completion_s,
                .after_last_arrival_s = result->after_last_arrival_s};
}

// A plan's block count and pieces, as a family's synthesizer takes them.
struct PlanShape {
  int blocks = 0;
  int pieces = 1;
  int rail_pieces = 1;
  int64_t queue_timed_bytes = 0;
};
PlanShape PlanShapeOf(const StragglarShape& shape) {
  return {.blocks = shape.log_depth_blocks,
          .pieces = shape.pieces,
          .rail_pieces = shape.rail_pieces,
          .queue_timed_bytes = shape.queue_timed_bytes};
}

// The fastest of the `shapes` plans (`synthesize(shape)`), by simulation, its shape kept.
absl::StatusOr<SimRow> FastestOf(const Candidate& candidate, const std::vector<PlanShape>& shapes,
                                 absl::FunctionRef<absl::StatusOr<Plan>(PlanShape)> synthesize,
                                 const SimArgs& args) {
  std::optional<SimRow> best;
  for (PlanShape shape : shapes) {
    absl::StatusOr<Plan> plan = synthesize(shape);
    if (!plan.ok()) return plan.status();
    absl::StatusOr<SimRow> row = SimulatePlanRow(candidate, *std::move(plan), args);
    if (!row.ok()) return row.status();
    row->blocks = shape.blocks;
    row->pieces = shape.pieces;
    row->rail_pieces = shape.rail_pieces;
    row->queue_timed_bytes = shape.queue_timed_bytes;
    if (!best.has_value() || row->completion_s < best->completion_s) best = *std::move(row);
  }
  return *std::move(best);
}

// Log-depth StragglAR with the best of LogDepthBlockChoices.
absl::StatusOr<SimRow> SimulateLogDepth(const Candidate& candidate, const SimArgs& args) {
  const int num_ranks = args.network.topology.num_ranks();
  std::vector<PlanShape> shapes;
  for (int blocks :
       LogDepthBlockChoices(num_ranks, static_cast<double>(args.bytes), args.network.intra_node)) {
    shapes.push_back({.blocks = blocks});
  }
  return FastestOf(
      candidate, shapes,
      [&](PlanShape shape) {
        return SynthesizeLogDepthStragglar(num_ranks, args.straggler, shape.blocks);
      },
      args);
}

// Hierarchical StragglAR with the better of its rails, picked as the policy picks them
// (PlanCache::BestHierarchical, policy/hierarchical_rails.h): the best flat rails unless the best
// log-depth rails win (LogDepthRailsWin). With per-class queues each rails also in the best of its
// shards' pieces. Flat rails only where their plan fits (4096x16 would hold 539 million
// transfers).
absl::StatusOr<SimRow> SimulateHierarchical(const Candidate& candidate, const SimArgs& args) {
  const Topology& topology = args.network.topology;
  HierarchicalRailShapes rails = RailShapesToPrice(
      topology, static_cast<double>(args.bytes), args.network.inter_node, [&](int rail_pieces) {
        return HierarchicalPlanFits(topology, /*stragglar=*/true, rail_pieces);
      });
  const auto synthesize = [&](PlanShape shape) {
    if (shape.queue_timed_bytes > 0) {
      return SynthesizeTimedHierarchicalStragglar(
          topology.nodes, topology.ranks_per_node, args.straggler, shape.blocks, shape.rail_pieces,
          QueueTimingFor(topology, shape.queue_timed_bytes, args.network.intra_node,
                         args.network.inter_node));
    }
    return SynthesizeHierarchicalStragglar(topology.nodes, topology.ranks_per_node, args.straggler,
                                           shape.blocks, shape.pieces, shape.rail_pieces);
  };
  const auto num_chunks = [&](const StragglarShape& shape) -> absl::StatusOr<int> {
    absl::StatusOr<Plan> whole = synthesize(PlanShapeOf(shape));
    if (!whole.ok()) return whole.status();
    return whole->num_chunks;
  };
  std::optional<SimRow> best_flat;
  std::optional<SimRow> best_log_depth;
  for (auto [shapes, best] :
       {std::pair{&rails.flat, &best_flat}, std::pair{&rails.log_depth, &best_log_depth}}) {
    if (shapes->empty()) continue;
    if (args.per_class_queues && topology.multi_node() && topology.ranks_per_node > 1) {
      if (absl::Status added =
              AddQueuePieces(topology, static_cast<double>(args.bytes), num_chunks, *shapes);
          !added.ok()) {
        return added;
      }
    }
    std::vector<PlanShape> plan_shapes;
    for (const StragglarShape& shape : *shapes) plan_shapes.push_back(PlanShapeOf(shape));
    absl::StatusOr<SimRow> fastest = FastestOf(candidate, plan_shapes, synthesize, args);
    if (!fastest.ok()) return fastest.status();
    *best = *std::move(fastest);
  }
  if (!best_flat.has_value() && !best_log_depth.has_value()) return rails.flat_refusal;
  if (!best_log_depth.has_value()) return *std::move(best_flat);
  if (!best_flat.has_value()) return *std::move(best_log_depth);
  // Each priced as the policy does, whatever the delay asked for: the policy does not know it.
  const double bytes = static_cast<double>(args.bytes);
  const std::vector<double> together(static_cast<size_t>(topology.num_ranks()), 0.0);
  const auto phase_s = [&](const Plan& plan) -> absl::StatusOr<double> {
    absl::StatusOr<SimulationResult> phase =
        SimulateRounds(plan, {}, 0, plan.pre_arrival_rounds, bytes, args.network, together);
    if (!phase.ok()) return phase.status();
    return phase->completion_s;
  };
  absl::StatusOr<double> flat_phase_s = phase_s(*best_flat->plan);
  if (!flat_phase_s.ok()) return flat_phase_s.status();
  absl::StatusOr<double> log_depth_phase_s = phase_s(*best_log_depth->plan);
  if (!log_depth_phase_s.ok()) return log_depth_phase_s.status();
  const auto rails_after_arrival = [&](const Plan& plan) -> absl::StatusOr<RailsAfterArrival> {
    RailsAfterArrival after;
    for (auto [delay_s, seconds] :
         {std::pair{std::max(*flat_phase_s, *log_depth_phase_s), &after.phase_hidden_s},
          std::pair{*flat_phase_s, &after.at_flat_phase_s}}) {
      const std::vector<double> arrival_s =
          OneLateRank(topology.num_ranks(), args.straggler, delay_s);
      absl::StatusOr<SimulationResult> result =
          args.per_class_queues ? SimulatePlanWithQueues(plan, bytes, args.network, arrival_s)
                                : SimulatePlan(plan, bytes, args.network, arrival_s);
      if (!result.ok()) return result.status();
      *seconds = result->after_last_arrival_s;
    }
    return after;
  };
  absl::StatusOr<RailsAfterArrival> flat = rails_after_arrival(*best_flat->plan);
  if (!flat.ok()) return flat.status();
  absl::StatusOr<RailsAfterArrival> log_depth = rails_after_arrival(*best_log_depth->plan);
  if (!log_depth.ok()) return log_depth.status();
  return LogDepthRailsWin(*log_depth, *flat) ? *std::move(best_log_depth) : *std::move(best_flat);
}

absl::StatusOr<SimRow> SimulateCandidate(const Candidate& candidate, const SimArgs& args) {
  if (const NcclModel* model = std::get_if<NcclModel>(&candidate)) {
    const NcclModelCost cost =
        NcclAllReduceCost(*model, args.network, static_cast<double>(args.bytes));
    return SimRow{.candidate = candidate,
                  .rounds = cost.steps,
                  .completion_s = args.delay_s + cost.seconds(),
                  .after_last_arrival_s = cost.seconds()};
  }
  const Topology& topology = args.network.topology;
  const PlanFamily family = std::get<PlanFamily>(candidate);
  if (family == kStragglarLogDepthFamily) return SimulateLogDepth(candidate, args);
  if (family == kStragglarHierarchicalFamily) return SimulateHierarchical(candidate, args);
  // Ring without its transfers where its ring run prices it (SimulatePlan): 1.35 GB less at 4096
  // ranks. Per-class queues read every transfer.
  const bool ring_by_its_run = family == PlanFamily{} && !args.per_class_queues;
  const bool flat_stragglar = family.algorithm == Algorithm::kStragglar;
  if (absl::Status fits = family == kRingHierarchicalFamily ? HierarchicalPlanFits(topology, false)
                          : ring_by_its_run || family.algorithm == Algorithm::kHalvingDoubling
                              ? absl::OkStatus()
                          : flat_stragglar ? FlatStragglarPlanFits(topology.num_ranks(), 1)
                                           : RingPlanFits(topology.num_ranks());
      !fits.ok()) {
    return fits;
  }
  if (ring_by_its_run) {
    absl::StatusOr<PlanHeader> ring = SynthesizeRingHeader(topology.num_ranks());
    if (!ring.ok()) return ring.status();
    absl::StatusOr<SimulationResult> result =
        SimulatePlan(*ring, static_cast<double>(args.bytes), args.network,
                     OneLateRank(topology.num_ranks(), args.straggler, args.delay_s));
    if (!result.ok()) return result.status();
    return SimRow{.candidate = candidate,
                  .rounds = ring->num_rounds(),
                  .ring_header = *ring,
                  .completion_s = result->completion_s,
                  .after_last_arrival_s = result->after_last_arrival_s};
  }
  absl::StatusOr<Plan> plan =
      family == kRingHierarchicalFamily
          ? SynthesizeHierarchicalRing(topology.nodes, topology.ranks_per_node)
          : SynthesizePlan(family.algorithm, topology.num_ranks(),
                           family.algorithm == Algorithm::kStragglar
                               ? std::optional<int>(args.straggler)
                               : std::nullopt);
  if (!plan.ok()) return plan.status();
  return SimulatePlanRow(candidate, *std::move(plan), args);
}

absl::StatusOr<std::vector<SimRow>> Simulate(const SimArgs& args,
                                             const std::vector<Candidate>& candidates) {
  const double bytes = static_cast<double>(args.bytes);
  std::vector<SimRow> rows;
  Progress progress("stragglar sim", static_cast<int64_t>(candidates.size()), "candidates priced",
                    args.progress);
  for (const Candidate& candidate : candidates) {
    absl::StatusOr<SimRow> row = SimulateCandidate(candidate, args);
    if (!row.ok()) return row.status();
    rows.push_back(*std::move(row));
    progress.Done(static_cast<int64_t>(rows.size()));
  }
  for (SimRow& ours : rows) {
    if (!ours.is_stragglar() || args.per_class_queues) continue;
    for (const SimRow& baseline : rows) {
      if (baseline.is_stragglar()) continue;
      absl::StatusOr<double> delay_s =
          baseline.plan.has_value()
              ? BreakEvenDelay(*ours.plan, *baseline.plan, bytes, args.network)
          : baseline.ring_header.has_value()
              ? BreakEvenDelay(*ours.plan, *baseline.ring_header, bytes, args.network)
              : BreakEvenDelay(*ours.plan, baseline.after_last_arrival_s, bytes, args.network);
      if (!delay_s.ok()) return delay_s.status();
      ours.break_even_delay_s.emplace_back(CandidateName(baseline.candidate), *delay_s);
    }
  }
  return rows;
}

nlohmann::json BreakEvenJson(const SimRow& row) {
  nlohmann::json delays = nlohmann::json::object();
  for (const auto& [baseline, delay_s] : row.break_even_delay_s) {
    delays[baseline] = delay_s == kNever ? nlohmann::json(nullptr) : nlohmann::json(delay_s);
  }
  return delays;
}

nlohmann::json LinkJson(const LinkModel& link) {
  return {{"alpha_s", link.alpha_s}, {"bandwidth_Bps", link.bandwidth_bytes_per_s}};
}

void PrintJson(const SimArgs& args, const std::vector<SimRow>& rows, std::ostream& out) {
  nlohmann::json results = nlohmann::json::array();
  // The contract's top-level break-even is the flat plan's ("stragglar"), else the first of the
  // family's.
  const SimRow* break_even = nullptr;
  for (const SimRow& row : rows) {
    nlohmann::json entry = {{"algorithm", CandidateName(row.candidate)},
                            {"family", row.family()},
                            {"model", row.simulated() ? "simulated" : "closed-form"},
                            {"rounds", row.rounds},
                            {"completion_s", row.completion_s},
                            {"after_last_arrival_s", row.after_last_arrival_s}};
    if (row.is_stragglar()) {
      entry["post_arrival_rounds"] = row.plan->post_arrival_rounds();
      if (row.blocks > 0) entry["blocks"] = row.blocks;
      if (row.pieces > 1) entry["pieces"] = row.pieces;
      if (row.rail_pieces > 1) entry["rail_pieces"] = row.rail_pieces;
      if (row.queue_timed_bytes > 0) entry["queue_timed_bytes"] = row.queue_timed_bytes;
      if (!args.per_class_queues) entry["break_even_delay_s"] = BreakEvenJson(row);
      const bool flat = row.candidate == Candidate(PlanFamily{.algorithm = Algorithm::kStragglar});
      if (break_even == nullptr || flat) break_even = &row;
    }
    results.push_back(std::move(entry));
  }
  const Topology& topology = args.network.topology;
  nlohmann::json json = {{"ranks", topology.num_ranks()},
                         {"bytes", args.bytes},
                         {"alpha_s", args.network.intra_node.alpha_s},
                         {"bandwidth_Bps", args.network.intra_node.bandwidth_bytes_per_s},
                         {"delay_s", args.delay_s},
                         {"straggler", args.straggler},
                         {"queues", args.per_class_queues ? "per-class" : "rounds"},
                         {"results", std::move(results)}};
  if (topology.multi_node()) {
    json["topology"] = {{"nodes", topology.nodes},
                        {"ranks_per_node", topology.ranks_per_node},
                        {"intra_node", LinkJson(args.network.intra_node)},
                        {"inter_node", LinkJson(args.network.inter_node)}};
  }
  if (break_even != nullptr && !args.per_class_queues) {
    json["break_even_delay_s"] = BreakEvenJson(*break_even);
  }
  out << json.dump(2) << "\n";
}

void PrintTable(const SimArgs& args, const std::vector<SimRow>& rows, std::ostream& out) {
  const Topology& topology = args.network.topology;
  const LinkModel& intra = args.network.intra_node;
  if (topology.multi_node()) {
    const LinkModel& inter = args.network.inter_node;
    out << absl::StrFormat(
        "sim: %s (%d nodes of %d ranks), %s; inside a node alpha %s, bandwidth %s; between "
        "nodes alpha %s, bandwidth %s; rank %d arrives %s late\n\n",
        TopologyName(topology), topology.nodes, topology.ranks_per_node,
        FormatBytes(static_cast<double>(args.bytes)), FormatSeconds(intra.alpha_s),
        FormatBandwidth(intra.bandwidth_bytes_per_s), FormatSeconds(inter.alpha_s),
        FormatBandwidth(inter.bandwidth_bytes_per_s), args.straggler, FormatSeconds(args.delay_s));
  } else {
    out << absl::StrFormat("sim: %d ranks, %s, alpha %s, bandwidth %s; rank %d arrives %s late\n\n",
                           topology.num_ranks(), FormatBytes(static_cast<double>(args.bytes)),
                           FormatSeconds(intra.alpha_s),
                           FormatBandwidth(intra.bandwidth_bytes_per_s), args.straggler,
                           FormatSeconds(args.delay_s));
  }
  const SimRow& first = rows.front();
  out << absl::StrFormat("%-22s %7s %12s %19s %12s\n", "algorithm", "rounds", "completion",
                         "after last arrival", absl::StrCat("vs ", CandidateName(first.candidate)));
  for (const SimRow& row : rows) {
    out << absl::StrFormat("%-22s %7d %12s %19s %11.3fx\n", CandidateName(row.candidate),
                           row.rounds, FormatSeconds(row.completion_s),
                           FormatSeconds(row.after_last_arrival_s),
                           first.completion_s / row.completion_s);
  }
  for (const SimRow& row : rows) {
    if (!row.break_even_delay_s.empty()) out << "\n";
    for (const auto& [baseline, delay_s] : row.break_even_delay_s) {
      const std::string name = CandidateName(row.candidate);
      if (delay_s == kNever) {
        out << absl::StrFormat("break-even vs %s: %s never wins at this size\n", baseline, name);
      } else {
        out << absl::StrFormat(
            "break-even vs %s: %s wins when the straggler is more than %s late\n", baseline, name,
            FormatSeconds(delay_s));
      }
    }
  }
  for (const SimRow& row : rows) {
    if (row.blocks > 0 && row.candidate == Candidate(kStragglarHierarchicalFamily)) {
      out << absl::StrFormat(
          "\n%s: log-depth rails, a shard in %d blocks (faster than the flat rails by more than "
          "%.0f%% with their phase hidden, and by more than they lose with the straggler as "
          "late as the flat rails' phase)\n",
          CandidateName(row.candidate), row.blocks, 100 * kLogDepthRailsMinGain);
    } else if (row.rail_pieces > 1) {
      out << absl::StrFormat("\n%s: flat rails, pipelined in %d pieces per chunk\n",
                             CandidateName(row.candidate), row.rail_pieces);
    } else if (row.blocks > 0) {
      out << absl::StrFormat(
          "\n%s: the straggler's buffer in %d blocks (the better power of two around the "
          "optimum)\n",
          PlanFamilyName(kStragglarLogDepthFamily), row.blocks);
    }
    if (row.queue_timed_bytes > 0) {
      out << absl::StrFormat(
          "%s%s: each shard handed out and gathered inside nodes chunk by chunk, in the order the "
          "transfers can start on per-class queues for calls of %s (the plan timed for them)\n",
          row.blocks > 0 || row.rail_pieces > 1 ? "" : "\n", CandidateName(row.candidate),
          FormatBytes(row.queue_timed_bytes));
    } else if (row.pieces > 1) {
      out << absl::StrFormat(
          "%s%s: each shard handed out and gathered inside nodes in %d pieces, overlapping the "
          "rails (the plan written for per-class queues)\n",
          row.blocks > 0 || row.rail_pieces > 1 ? "" : "\n", CandidateName(row.candidate),
          row.pieces);
    }
  }
  if (args.algorithms.empty() && !FlatStragglarByDefault(topology)) {
    out << absl::StrFormat(
        "\nflat stragglar is left out above %d ranks (its plan grows as n^2; log-depth is faster "
        "after arrival there): --algorithms stragglar prices it.\n",
        PlanCache::kMaxFlatStragglarRanks);
  }
  if (topology.multi_node()) {
    out << "\nnccl-ring and nccl-tree are NCCL's algorithms in closed form (docs/scale-model.md); "
           "the others are simulated transfer by transfer.\n";
  }
  if (args.per_class_queues) {
    out << "\nPlans priced with a send and a receive queue per link class on every rank "
           "(--queues per-class): what the host executor takes running them that way (stragglar "
           "run "
           "--queues per-class); the NCCL and MPI executors run rounds. No break-even delays in "
           "this model.\n";
  }
}

}  // namespace

absl::Status RunSimCommand(const SimArgs& args, std::ostream& out) {
  absl::StatusOr<std::vector<Candidate>> candidates =
      ParseCandidates(args.algorithms, args.network.topology);
  if (!candidates.ok()) return candidates.status();
  absl::StatusOr<std::vector<SimRow>> rows = Simulate(args, *candidates);
  if (!rows.ok()) return rows.status();
  if (args.json) {
    PrintJson(args, *rows, out);
  } else {
    PrintTable(args, *rows, out);
  }
  return absl::OkStatus();
}

}  // namespace stragglar
