#include "tools/text_reports.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/units.h"
#include "kernels/synth/stragglar_schedule.h"

namespace stragglar {

void PrintReplayReport(const nlohmann::json& report, const std::string& path, const LinkModel& link,
                       std::ostream& out) {
  const nlohmann::json& r = report;
  out << absl::StrFormat(
      "trace %s: %d ranks, %d calls replayed (%d rows, %d duplicates ignored), epochs of %d "
      "calls\n",
      path, r["ranks"].get<int>(), r["calls"].get<int64_t>(), r["rows"].get<int64_t>(),
      r["duplicate_rows"].get<int64_t>(), r["epoch_calls"].get<int>());
  if (r["incomplete_calls_total"].get<int64_t>() > 0) {
    out << absl::StrFormat(
        "%d calls where some rank never arrived (left out; a hang looks like this):\n",
        r["incomplete_calls_total"].get<int64_t>());
    for (const nlohmann::json& call : r["incomplete_calls"]) {
      out << absl::StrFormat("  call %d: missing ranks %s\n", call["call"].get<int64_t>(),
                             absl::StrJoin(call["missing_ranks"].get<std::vector<int>>(), ", "));
    }
  }
  if (r["stragglers"].empty()) out << "persistent stragglers: none\n";
  for (const nlohmann::json& each : r["stragglers"]) {
    out << absl::StrFormat(
        "persistent straggler: rank %d, named at call %d (persistence %.0f%%, mean lag %s)%s\n",
        each["rank"].get<int>(), each["detected_at_call"].get<int64_t>(),
        100 * each["persistence"].get<double>(), FormatSeconds(each["mean_lag_s"].get<double>()),
        each.contains("cleared_at_call")
            ? absl::StrCat(", cleared at call ", each["cleared_at_call"].get<int64_t>())
            : "");
  }
  // Traces written before the link column cannot say.
  if (r.value("link_column", false)) {
    if (r["slow_links"].empty()) out << "slow links: none\n";
    for (const nlohmann::json& each : r["slow_links"]) {
      out << absl::StrFormat(
          "slow link: rank %d's, %.2fx slower than the median rank's, named at call %d%s\n",
          each["rank"].get<int>(), each["slow_factor"].get<double>(),
          each["detected_at_call"].get<int64_t>(),
          each.contains("cleared_at_call")
              ? absl::StrCat(", cleared at call ", each["cleared_at_call"].get<int64_t>())
              : "");
    }
  }
  out << absl::StrFormat(
      "\npredicted with alpha %s, bandwidth %s (--alpha, --bandwidth):\n%-10s %-14s %6s %12s "
      "%12s %12s %12s %12s\n",
      FormatSeconds(link.alpha_s), FormatBandwidth(link.bandwidth_bytes_per_s), "size", "decision",
      "calls", "policy", "always ring", "saved", "always h-d", "saved");
  for (const auto& [bytes, entry] : r["decisions"].items()) {
    std::string decision(entry["algorithm"].get<std::string>());
    if (!entry["straggler"].is_null()) {
      absl::StrAppend(&decision, " (", entry["straggler"].get<int>(), ")");
    }
    const nlohmann::json& predicted = entry["predicted_s"];
    out << absl::StrFormat("%-10s %-14s %6d %12s %12s %12s %12s %12s\n",
                           FormatBytes(std::stoll(bytes)), decision, entry["calls"].get<int64_t>(),
                           FormatSeconds(predicted["policy"].get<double>()),
                           FormatSeconds(predicted["ring"].get<double>()),
                           FormatSeconds(entry["saved_vs_ring_s"].get<double>()),
                           FormatSeconds(predicted["halving_doubling"].get<double>()),
                           FormatSeconds(entry["saved_vs_halving_doubling_s"].get<double>()));
  }
}

void PrintScenarioReport(const nlohmann::json& report, const SuiteConfig& config,
                         std::ostream& out) {
  out << absl::StrFormat(
      "%d ranks, %s per call, alpha %s, bandwidth %s, T_RS %s, noise sd %s, epochs of %d "
      "calls, seed %d\n\n%-24s %7s %-22s %8s %8s %8s  %-14s %8s\n",
      config.num_ranks, FormatBytes(config.bytes), FormatSeconds(config.link.alpha_s),
      FormatBandwidth(config.link.bandwidth_bytes_per_s),
      FormatSeconds(report["t_rs_s"].get<double>()), FormatSeconds(config.noise_s),
      config.runtime.epoch_calls, config.seed, "scenario", "calls", "named (rank@call)", "latency",
      "FP/100k", "regret", "best fixed", "vs fixed");
  for (const nlohmann::json& each : report["scenarios"]) {
    std::string named, latency;
    for (const nlohmann::json& detection : each["detections"]) {
      absl::StrAppend(&named, named.empty() ? "" : " ", detection["rank"].get<int>(), "@",
                      detection["detected_at_call"].get<int64_t>());
    }
    int64_t worst = 0;
    bool missed = false;
    for (const nlohmann::json& value : each["detection_latency_calls"]) {
      if (value.is_null()) {
        missed = true;
      } else {
        worst = std::max(worst, value.get<int64_t>());
      }
    }
    latency = missed                                    ? "missed"
              : each["detection_latency_calls"].empty() ? "-"
                                                        : absl::StrCat(worst);
    if (named.size() > 22) named = named.substr(0, 19) + "...";
    out << absl::StrFormat(
        "%-24s %7d %-22s %8s %8.1f %7.2f%%  %-14s %7.2f%%\n", each["name"].get<std::string>(),
        each["calls"].get<int64_t>(), named.empty() ? "-" : named, latency,
        each["false_positives_per_100k"].get<double>(), 100 * each["regret"].get<double>(),
        each["best_fixed"].get<std::string>(), 100 * each["vs_best_fixed"].get<double>());
  }
  out << absl::StrFormat("\nmean regret %.2f%%; targets %s\n",
                         100 * report["mean_regret"].get<double>(),
                         report["targets_met"].get<bool>() ? "met" : "NOT met:");
  for (const nlohmann::json& failure : report["failures"]) {
    out << "  " << failure.get<std::string>() << "\n";
  }
}

namespace {

// Runs of three chunks or more as "first-last": a transfer of Halving-Doubling's first round at
// 4096 ranks is "c2048-4095", not 2048 numbers.
std::string DescribeChunks(const ChunkList& chunks) {
  return absl::StrJoin(chunks.runs(), ",", [](std::string* out, const ChunkList::Run& run) {
    if (run.size() >= 3) {
      absl::StrAppend(out, run.begin, "-", run.end - 1);
    } else {
      absl::StrAppend(out, run.begin, run.size() == 2 ? absl::StrCat(",", run.begin + 1) : "");
    }
  });
}

std::string DescribeTransfer(const Transfer& transfer) {
  return absl::StrCat(transfer.src, "->", transfer.dst, " ",
                      transfer.op == TransferOp::kReduce ? "+" : "", "c",
                      DescribeChunks(transfer.chunks));
}

}  // namespace

void PrintPlanTable(const Plan& plan, std::ostream& out, const PlanTableNote& note) {
  out << absl::StrFormat("%s plan: %d ranks, %d chunks", AlgorithmName(plan.algorithm),
                         plan.num_ranks, plan.num_chunks);
  if (plan.straggler.has_value()) {
    out << absl::StrFormat(", straggler %d%s\nrounds: %d (%d pre-arrival, %d post-arrival",
                           *plan.straggler, note.family.empty() ? "" : ", " + note.family,
                           plan.num_rounds(), plan.pre_arrival_rounds, plan.post_arrival_rounds());
    // The flat schedule's bound on post-arrival rounds says nothing about the other families.
    const std::optional<int> bound =
        note.family.empty() ? std::optional<int>(StragglarRoundLowerBound(plan.num_ranks))
                            : note.post_arrival_bound;
    out << (bound.has_value() ? absl::StrFormat("; lower bound %d)\n", *bound) : ")\n");
  } else {
    out << absl::StrFormat("\nrounds: %d\n", plan.num_rounds());
  }
  out << "notation: a->b +cK adds chunk K of rank a into rank b; a->b cK copies it; cK-L is "
         "chunks K to L\n\n";
  out << absl::StrFormat("%5s  %-5s  %s\n", "round", "phase", "transfers");
  for (int r = 0; r < plan.num_rounds(); ++r) {
    std::vector<std::string> transfers;
    for (const Transfer& transfer : plan.rounds[r].transfers) {
      transfers.push_back(DescribeTransfer(transfer));
    }
    out << absl::StrFormat("%5d  %-5s  %s\n", r,
                           !plan.straggler.has_value()   ? ""
                           : r < plan.pre_arrival_rounds ? "pre"
                                                         : "post",
                           absl::StrJoin(transfers, "  "));
  }
}

}  // namespace stragglar
