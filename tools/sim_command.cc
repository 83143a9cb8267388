#include "tools/sim_command.h"

#include <optional>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "exporters/units.h"
#include "kernels/synthesizers.h"
#include "nlohmann/json.hpp"
#include "policy/nccl_models.h"
#include "policy/simulator.h"

namespace stragglar {
namespace {

// A plan simulated transfer by transfer, or one of NCCL's algorithms in closed form.
using Candidate = std::variant<Algorithm, NcclModel>;

std::string CandidateName(const Candidate& candidate) {
  if (const Algorithm* algorithm = std::get_if<Algorithm>(&candidate)) {
    return std::string(AlgorithmName(*algorithm));
  }
  return std::string(NcclModelName(std::get<NcclModel>(candidate)));
}

absl::StatusOr<std::vector<Candidate>> ParseCandidates(absl::string_view names,
                                                       const Topology& topology) {
  if (names.empty()) {
    names = topology.multi_node() ? "ring,halving-doubling,stragglar,nccl-ring,nccl-tree"
                                  : "ring,halving-doubling,stragglar";
  }
  std::vector<Candidate> candidates;
  for (absl::string_view name : absl::StrSplit(names, ',')) {
    absl::StatusOr<Algorithm> algorithm = ParseAlgorithm(name);
    absl::StatusOr<NcclModel> model = ParseNcclModel(name);
    if (!algorithm.ok() && !model.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown algorithm \"", name,
                       "\" (expected ring, halving-doubling, stragglar, nccl-ring or nccl-tree)"));
    }
    const Candidate candidate = algorithm.ok() ? Candidate(*algorithm) : Candidate(*model);
    for (const Candidate& seen : candidates) {
      if (seen == candidate) {
        return absl::InvalidArgumentError(absl::StrCat("algorithm \"", name, "\" listed twice"));
      }
    }
    candidates.push_back(candidate);
  }
  return candidates;
}

struct SimRow {
  Candidate candidate;
  std::string family;  // "baseline" or "stragglar"
  int rounds = 0;      // a plan's rounds, a closed form's steps
  std::optional<int> post_arrival_rounds;
  double completion_s = 0;
  double after_last_arrival_s = 0;
  std::optional<double> break_even_delay_s;  // against StragglAR's plan, for baselines
};

struct SimOutcome {
  std::vector<SimRow> rows;
  bool has_stragglar = false;
};

absl::StatusOr<SimOutcome> Simulate(const SimArgs& args, const std::vector<Candidate>& candidates) {
  const int n = args.network.topology.num_ranks();
  const double bytes = static_cast<double>(args.bytes);
  const std::vector<double> arrival = OneLateRank(n, args.straggler, args.delay_s);
  std::optional<Plan> stragglar_plan;
  SimOutcome outcome;
  for (const Candidate& candidate : candidates) {
    SimRow row{.candidate = candidate};
    if (const NcclModel* model = std::get_if<NcclModel>(&candidate)) {
      const NcclModelCost cost = NcclAllReduceCost(*model, args.network, bytes);
      row.family = "baseline";
      row.rounds = cost.steps;
      row.after_last_arrival_s = cost.seconds();
      row.completion_s = args.delay_s + cost.seconds();
    } else {
      const Algorithm algorithm = std::get<Algorithm>(candidate);
      const bool is_stragglar = algorithm == Algorithm::kStragglar;
      absl::StatusOr<Plan> plan = SynthesizePlan(
          algorithm, n, is_stragglar ? std::optional<int>(args.straggler) : std::nullopt);
      if (!plan.ok()) return plan.status();
      if (is_stragglar) stragglar_plan = *plan;
      absl::StatusOr<SimulationResult> result = SimulatePlan(*plan, bytes, args.network, arrival);
      if (!result.ok()) return result.status();
      row.family = std::string(AlgorithmFamily(algorithm));
      row.rounds = plan->num_rounds();
      if (is_stragglar) row.post_arrival_rounds = plan->post_arrival_rounds();
      row.completion_s = result->completion_s;
      row.after_last_arrival_s = result->after_last_arrival_s;
    }
    outcome.rows.push_back(std::move(row));
  }
  outcome.has_stragglar = stragglar_plan.has_value();
  if (!outcome.has_stragglar) return outcome;
  for (SimRow& row : outcome.rows) {
    if (row.family != "baseline") continue;
    absl::StatusOr<double> delay_s;
    if (const NcclModel* model = std::get_if<NcclModel>(&row.candidate)) {
      delay_s =
          BreakEvenDelay(*stragglar_plan, NcclAllReduceCost(*model, args.network, bytes).seconds(),
                         bytes, args.network);
    } else {
      absl::StatusOr<Plan> baseline =
          SynthesizePlan(std::get<Algorithm>(row.candidate), n, std::nullopt);
      if (!baseline.ok()) return baseline.status();
      delay_s = BreakEvenDelay(*stragglar_plan, *baseline, bytes, args.network);
    }
    if (!delay_s.ok()) return delay_s.status();
    row.break_even_delay_s = *delay_s;
  }
  return outcome;
}

nlohmann::json LinkJson(const LinkModel& link) {
  return {{"alpha_s", link.alpha_s}, {"bandwidth_Bps", link.bandwidth_bytes_per_s}};
}

void PrintJson(const SimArgs& args, const SimOutcome& outcome, std::ostream& out) {
  nlohmann::json results = nlohmann::json::array();
  nlohmann::json delays = nlohmann::json::object();
  for (const SimRow& row : outcome.rows) {
    nlohmann::json entry = {
        {"algorithm", CandidateName(row.candidate)},
        {"family", row.family},
        {"model", std::holds_alternative<NcclModel>(row.candidate) ? "closed-form" : "simulated"},
        {"rounds", row.rounds},
        {"completion_s", row.completion_s},
        {"after_last_arrival_s", row.after_last_arrival_s}};
    if (row.post_arrival_rounds.has_value())
      entry["post_arrival_rounds"] = *row.post_arrival_rounds;
    results.push_back(std::move(entry));
    if (row.break_even_delay_s.has_value()) {
      delays[CandidateName(row.candidate)] = *row.break_even_delay_s == kNever
                                                 ? nlohmann::json(nullptr)
                                                 : nlohmann::json(*row.break_even_delay_s);
    }
  }
  const Topology& topology = args.network.topology;
  nlohmann::json json = {{"ranks", topology.num_ranks()},
                         {"bytes", args.bytes},
                         {"alpha_s", args.network.intra_node.alpha_s},
                         {"bandwidth_Bps", args.network.intra_node.bandwidth_bytes_per_s},
                         {"delay_s", args.delay_s},
                         {"straggler", args.straggler},
                         {"results", std::move(results)}};
  if (topology.multi_node()) {
    json["topology"] = {{"nodes", topology.nodes},
                        {"ranks_per_node", topology.ranks_per_node},
                        {"intra_node", LinkJson(args.network.intra_node)},
                        {"inter_node", LinkJson(args.network.inter_node)}};
  }
  if (outcome.has_stragglar) json["break_even_delay_s"] = std::move(delays);
  out << json.dump(2) << "\n";
}

void PrintTable(const SimArgs& args, const SimOutcome& outcome, std::ostream& out) {
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
  const SimRow& first = outcome.rows.front();
  out << absl::StrFormat("%-17s %7s %12s %19s %12s\n", "algorithm", "rounds", "completion",
                         "after last arrival", absl::StrCat("vs ", CandidateName(first.candidate)));
  for (const SimRow& row : outcome.rows) {
    out << absl::StrFormat("%-17s %7d %12s %19s %11.3fx\n", CandidateName(row.candidate),
                           row.rounds, FormatSeconds(row.completion_s),
                           FormatSeconds(row.after_last_arrival_s),
                           first.completion_s / row.completion_s);
  }
  bool blank_printed = false;
  for (const SimRow& row : outcome.rows) {
    if (!row.break_even_delay_s.has_value()) continue;
    if (!blank_printed) out << "\n";
    blank_printed = true;
    if (*row.break_even_delay_s == kNever) {
      out << absl::StrFormat("break-even vs %s: stragglar never wins at this size\n",
                             CandidateName(row.candidate));
    } else {
      out << absl::StrFormat(
          "break-even vs %s: stragglar wins when the straggler is more than %s late\n",
          CandidateName(row.candidate), FormatSeconds(*row.break_even_delay_s));
    }
  }
  if (topology.multi_node()) {
    out << "\nnccl-ring and nccl-tree are NCCL's algorithms in closed form (docs/scale-model.md); "
           "the others are simulated transfer by transfer.\n";
  }
}

}  // namespace

absl::Status RunSimCommand(const SimArgs& args, std::ostream& out) {
  absl::StatusOr<std::vector<Candidate>> candidates =
      ParseCandidates(args.algorithms, args.network.topology);
  if (!candidates.ok()) return candidates.status();
  absl::StatusOr<SimOutcome> outcome = Simulate(args, *candidates);
  if (!outcome.ok()) return outcome.status();
  if (args.json) {
    PrintJson(args, *outcome, out);
  } else {
    PrintTable(args, *outcome, out);
  }
  return absl::OkStatus();
}

}  // namespace stragglar
