// The policy's scenario suite: generated arrival traces with ground truth (who is a persistent
// straggler, when), run through the same runtime core as online (PolicyReplayer) and scored
// against an oracle that knows every arrival in advance and picks the best algorithm and straggler
// for each call. Answers the reviewers' objections with numbers: delays are a distribution,
// several ranks can be late, the straggler moves, and StragglAR loses below the break-even delay.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "policy/model/simulator.h"
#include "runtime/runtime_core.h"

namespace stragglar {

enum class ScenarioKind {
  kNoise,         // every rank jitters around the same arrival (normal)
  kHeavyTail,     // jitter with a heavy tail: now and then a random rank is very late
  kPersistent,    // one rank late by `lag` in every call
  kSwitching,     // the late rank changes every `period` calls
  kIntermittent,  // one rank late by `lag` in a `presence` share of calls
  kSeveralLate,   // `late_ranks` ranks late together, by lag, 0.75 lag, 0.5 lag
  kDrift,         // one rank's lag grows linearly from 0 to `lag` over the run
  kStalls,        // noise plus one-off stalls (a random rank, `lag` late, in 0.2% of calls)
};

struct Scenario {
  std::string name;
  ScenarioKind kind = ScenarioKind::kNoise;
  double lag_in_t_rs = 0;  // the lag, as a multiple of the pre-arrival ReduceScatter's time
  int64_t period = 0;      // kSwitching
  double presence = 1;     // kIntermittent
  int late_ranks = 1;      // kSeveralLate
};

// The suite: noise (normal, heavy-tailed), a persistent straggler at 0.5, 1, 2 and 4 times T_RS,
// a switching straggler, intermittent stragglers (30% and 70%), two and three late ranks, drift,
// and one-off stalls.
std::vector<Scenario> ScenarioSuite();

struct SuiteConfig {
  int num_ranks = 8;
  int64_t bytes = int64_t{256} << 20;
  // NVLink-class defaults, as `stragglar sim`'s.
  LinkModel link{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (int64_t{1} << 30)};
  int64_t calls = 20000;
  int64_t noise_calls = 100000;  // the noise-only scenarios run longer: the false-positive target
  double noise_s = 50e-6;        // standard deviation of every rank's arrival jitter
  uint64_t seed = 1;
  RuntimeConfig runtime;  // epoch_calls etc.; mode is forced to kAdapt
};

struct ScenarioResult {
  std::string name;
  int64_t calls = 0;
  // Detection: one entry per ground-truth onset (a rank becoming a persistent straggler with lag
  // at least twice the noise), the calls until the runtime named it (nullopt: never).
  std::vector<std::optional<int64_t>> detection_latency_calls;
  int64_t false_positives = 0;  // detections of a rank that was not a persistent straggler then
  std::vector<DetectionEvent> detections;
  // Modelled time from the first arrival to completion, summed over calls.
  double policy_s = 0;
  double oracle_s = 0;
  double best_fixed_s = 0;     // the best single algorithm (and straggler) for the whole run
  int64_t explored_calls = 0;  // calls the policy spent exploring (counted in the regret)
  std::map<std::string, int64_t> mix;  // calls per algorithm the policy ran
  std::string best_fixed;
  double regret() const { return policy_s / oracle_s - 1; }
  double vs_best_fixed() const { return policy_s / best_fixed_s - 1; }
  bool no_straggler = false;  // a noise-only or stalls scenario: the 1% target applies
};

// Generates the scenario's arrivals and runs them through the policy. Deterministic for a seed.
absl::StatusOr<ScenarioResult> RunScenario(const Scenario& scenario, const SuiteConfig& config);

// The targets of the policy issue, checked on a suite's results: detection within 2 epochs,
// no false positives, regret <= 2% on average, no-straggler runs within 1% of the best fixed
// algorithm. Returns one line per failed target (empty: all met).
std::vector<std::string> CheckTargets(const std::vector<ScenarioResult>& results,
                                      const SuiteConfig& config);

nlohmann::json ScenarioResultsJson(const std::vector<ScenarioResult>& results,
                                   const SuiteConfig& config);

}  // namespace stragglar
