#include "tools/run_report.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/units.h"
#include "runtime/replay/replay.h"

namespace stragglar {
namespace {

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index =
      std::min(values.size() - 1, static_cast<size_t>(fraction * (values.size() - 1) + 0.5));
  return values[index];
}

std::map<std::string, int> AlgorithmCounts(const Phase& phase) {
  std::map<std::string, int> counts;
  for (Algorithm algorithm : kPlanAlgorithms) counts[std::string(AlgorithmName(algorithm))] = 0;
  for (const std::vector<Algorithm>& per_rank : phase.algorithm) {
    ++counts[std::string(AlgorithmName(per_rank[0]))];
  }
  return counts;
}

nlohmann::json Timings(const std::vector<double>& latency_s) {
  return {{"mean_s", Mean(latency_s, latency_s.size())},
          {"p50_s", Percentile(latency_s, 0.5)},
          {"p99_s", Percentile(latency_s, 0.99)}};
}

}  // namespace

nlohmann::json RunSummaryJson(const RunOptions& options, const LinkModel& link,
                              const Phase& baseline, const Phase& adaptive,
                              const LagSummary& lags) {
  const double speedup =
      Mean(baseline.latency_s, options.iterations) / Mean(adaptive.latency_s, options.iterations);
  const double span_speedup =
      Mean(baseline.span_s, options.iterations) / Mean(adaptive.span_s, options.iterations);
  std::vector<std::string> candidates;
  for (Algorithm algorithm : options.candidates) candidates.emplace_back(AlgorithmName(algorithm));
  nlohmann::json summary = {
      {"ranks", options.ranks},
      {"injected_straggler", options.straggler.has_value() ? nlohmann::json(*options.straggler)
                                                           : nlohmann::json(nullptr)},
      {"detected_straggler", adaptive.detected.has_value() ? nlohmann::json(*adaptive.detected)
                                                           : nlohmann::json(nullptr)},
      {"iterations", options.iterations},
      {"bytes", options.bytes},
      {"dtype", DataTypeName(options.type)},
      {"candidates", candidates},
      {"correct", baseline.correct && adaptive.correct},
      {"algorithm_counts", AlgorithmCounts(adaptive)},
      {"adaptive", Timings(adaptive.latency_s)},
      {"baseline", Timings(baseline.latency_s)},
      {"speedup", speedup},
      {"latency", "last completion - last arrival"},
      // The whole wait as a step sees it, including the straggler's delay (no algorithm removes
      // that part, so this ratio is smaller).
      {"span",
       {{"definition", "last completion - first arrival"},
        {"baseline_mean_s", Mean(baseline.span_s, options.iterations)},
        {"adaptive_mean_s", Mean(adaptive.span_s, options.iterations)},
        {"speedup", span_speedup}}},
      {"first_stragglar_call", adaptive.first_stragglar_call},
      {"stragglers", StragglersJson(adaptive.detections)},
      // measured / modelled time after the last arrival, per algorithm and size bucket
      {"calibration", adaptive.calibration},
      // Per-rank arrival lag and time spent waiting for the others, in the adaptive phase.
      {"lags", LagSummaryJson(lags)},
      {"persistence", adaptive.persistence},
      {"delay_s", options.delay_s},
      {"seed", options.seed},
      {"link",
       {{"alpha_s", link.alpha_s},
        {"bandwidth_Bps", link.bandwidth_bytes_per_s},
        {"shared_lanes", link.shared_lanes}}},
  };
  summary["baseline"]["algorithm"] = "ring";
  return summary;
}

void PrintRunSummary(const RunOptions& options, const Phase& baseline, const Phase& adaptive,
                     const LagSummary& lags, const nlohmann::json& summary,
                     std::ostream& progress) {
  progress << "\nadaptive phase, " << FormatLagSummary(lags);
  progress << absl::StrFormat(
      "\nlatency = last completion - last arrival; span = last completion - "
      "first arrival\n%-9s %10s %10s %10s %12s\n",
      "", "mean", "p50", "p99", "span mean");
  for (const Phase* phase : {&baseline, &adaptive}) {
    progress << absl::StrFormat("%-9s %10s %10s %10s %12s\n", phase->name,
                                FormatSeconds(Mean(phase->latency_s, options.iterations)),
                                FormatSeconds(Percentile(phase->latency_s, 0.5)),
                                FormatSeconds(Percentile(phase->latency_s, 0.99)),
                                FormatSeconds(Mean(phase->span_s, options.iterations)));
  }
  progress << absl::StrFormat(
      "speedup %.2fx (span %.2fx); results %s; straggler detected: %s; algorithms: %s\n",
      summary["speedup"].get<double>(), summary["span"]["speedup"].get<double>(),
      summary["correct"].get<bool>() ? "correct on every rank and step" : "WRONG",
      adaptive.detected.has_value() ? absl::StrCat("rank ", *adaptive.detected) : "none",
      DescribeMix(adaptive, options.iterations));
}

}  // namespace stragglar
