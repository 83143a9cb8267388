#include "runtime/replay/scenarios.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/plan/plan.h"
#include "profiler/arrival.h"
#include "runtime/replay/replay.h"

namespace stragglar {
namespace {

// Seconds between consecutive calls: the arrival clock of a training step.
constexpr double kStepSeconds = 0.1;
// Heavy tail: per rank and call, this share of arrivals gets a Pareto-distributed extra delay.
constexpr double kTailShare = 0.02;
constexpr double kTailShape = 1.5;
// Stalls: a random rank stalls in this share of calls.
constexpr double kStallShare = 0.002;

bool Contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// FNV-1a: the same seed for a scenario on every platform (std::hash is not specified).
uint64_t NameHash(const std::string& name) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : name) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

// Who is late, by how much, in one call, and what the ground truth says about it.
struct GeneratedCall {
  std::vector<double> arrival_s;
  std::vector<int> persistent;  // ranks that are persistent stragglers (with lag >= 2 noise)
  std::vector<int> ambiguous;   // ranks whose detection is neither required nor a false positive
};

class Generator {
 public:
  Generator(const Scenario& scenario, const SuiteConfig& config, double t_rs, int64_t calls)
      : scenario_(scenario),
        config_(config),
        lag_s_(scenario.lag_in_t_rs * t_rs),
        calls_(calls),
        random_(config.seed * 1000003 + NameHash(scenario.name)) {}

  GeneratedCall Next(int64_t call) {
    const int n = config_.num_ranks;
    GeneratedCall out;
    out.arrival_s.resize(n);
    std::normal_distribution<double> noise(0, config_.noise_s);
    std::uniform_real_distribution<double> uniform(0, 1);
    for (int rank = 0; rank < n; ++rank) {
      out.arrival_s[rank] = call * kStepSeconds + noise(random_);
      if (scenario_.kind == ScenarioKind::kHeavyTail && uniform(random_) < kTailShare) {
        // Pareto with scale = the noise: rare, unbounded, and on a random rank every time.
        out.arrival_s[rank] += config_.noise_s * std::pow(1 - uniform(random_), -1.0 / kTailShape);
      }
    }
    const bool clear = lag_s_ >= 2 * config_.noise_s;
    auto late = [&](int rank, double lag_s, bool persistent) {
      out.arrival_s[rank] += lag_s;
      if (persistent && clear) out.persistent.push_back(rank);
      if (persistent && !clear) out.ambiguous.push_back(rank);
    };
    switch (scenario_.kind) {
      case ScenarioKind::kNoise:
      case ScenarioKind::kHeavyTail:
        break;
      case ScenarioKind::kPersistent:
        late(PersistentRank(), lag_s_, true);
        break;
      case ScenarioKind::kSwitching: {
        // A fixed tour over the ranks: consecutive stragglers differ for every n >= 2, and the
        // odd step makes the tour jump (3, 0, 5, 2, ... for 8 ranks) where n allows.
        const int64_t phase = call / std::max<int64_t>(1, scenario_.period);
        const int64_t step = std::gcd(int64_t{5}, int64_t{n}) == 1 ? 5 : 1;
        late(static_cast<int>((3 + step * phase) % n), lag_s_, true);
        break;
      }
      case ScenarioKind::kIntermittent:
        if (uniform(random_) < scenario_.presence) out.arrival_s[PersistentRank()] += lag_s_;
        out.ambiguous.push_back(PersistentRank());
        break;
      case ScenarioKind::kSeveralLate: {
        // Ranks 2, 5, 6 (for 8 ranks), moved to the next free rank where n is small.
        const double share[] = {1.0, 0.75, 0.5};
        std::vector<int> chosen;
        for (int preferred : {2, 5, 6}) {
          if (static_cast<int>(chosen.size()) == std::min(scenario_.late_ranks, n - 1)) break;
          int rank = preferred % n;
          while (Contains(chosen, rank)) rank = (rank + 1) % n;
          chosen.push_back(rank);
        }
        for (size_t i = 0; i < chosen.size(); ++i) late(chosen[i], share[i] * lag_s_, true);
        break;
      }
      case ScenarioKind::kDrift: {
        const double lag_s = lag_s_ * static_cast<double>(call) / calls_;
        out.arrival_s[n - 2] += lag_s;
        // Persistent once the lag is clear of the noise; just below that, either verdict is fine.
        if (lag_s >= 2 * config_.noise_s) {
          out.persistent.push_back(n - 2);
        } else if (lag_s >= config_.noise_s) {
          out.ambiguous.push_back(n - 2);
        }
        break;
      }
      case ScenarioKind::kStalls:
        if (uniform(random_) < kStallShare) {
          const int rank = std::uniform_int_distribution<int>(0, n - 1)(random_);
          out.arrival_s[rank] += lag_s_;
        }
        break;
    }
    return out;
  }

 private:
  int PersistentRank() const { return (config_.num_ranks / 2 - 1) % config_.num_ranks; }

  const Scenario& scenario_;
  const SuiteConfig& config_;
  const double lag_s_;
  const int64_t calls_;
  std::mt19937_64 random_;
};

bool IsNoStragglerKind(ScenarioKind kind) {
  return kind == ScenarioKind::kNoise || kind == ScenarioKind::kHeavyTail ||
         kind == ScenarioKind::kStalls;
}

}  // namespace

std::vector<Scenario> ScenarioSuite() {
  return {
      {.name = "noise", .kind = ScenarioKind::kNoise},
      {.name = "heavy-tail noise", .kind = ScenarioKind::kHeavyTail},
      {.name = "persistent 0.5 T_RS", .kind = ScenarioKind::kPersistent, .lag_in_t_rs = 0.5},
      {.name = "persistent 1 T_RS", .kind = ScenarioKind::kPersistent, .lag_in_t_rs = 1},
      {.name = "persistent 2 T_RS", .kind = ScenarioKind::kPersistent, .lag_in_t_rs = 2},
      {.name = "persistent 4 T_RS", .kind = ScenarioKind::kPersistent, .lag_in_t_rs = 4},
      {.name = "switching every 1000",
       .kind = ScenarioKind::kSwitching,
       .lag_in_t_rs = 2,
       .period = 1000},
      {.name = "intermittent 30%",
       .kind = ScenarioKind::kIntermittent,
       .lag_in_t_rs = 2,
       .presence = 0.3},
      {.name = "intermittent 70%",
       .kind = ScenarioKind::kIntermittent,
       .lag_in_t_rs = 2,
       .presence = 0.7},
      {.name = "two late", .kind = ScenarioKind::kSeveralLate, .lag_in_t_rs = 2, .late_ranks = 2},
      {.name = "three late", .kind = ScenarioKind::kSeveralLate, .lag_in_t_rs = 2, .late_ranks = 3},
      {.name = "drift to 3 T_RS", .kind = ScenarioKind::kDrift, .lag_in_t_rs = 3},
      {.name = "one-off stalls 20 T_RS", .kind = ScenarioKind::kStalls, .lag_in_t_rs = 20},
  };
}

absl::StatusOr<ScenarioResult> RunScenario(const Scenario& scenario, const SuiteConfig& config) {
  const int n = config.num_ranks;
  const double t_rs =
      StragglarReduceScatterSeconds(n, static_cast<double>(config.bytes), config.link);
  const int64_t calls = IsNoStragglerKind(scenario.kind) && scenario.kind != ScenarioKind::kStalls
                            ? config.noise_calls
                            : config.calls;
  absl::StatusOr<PolicyReplayer> replayer = PolicyReplayer::Create(config.runtime, n, config.link);
  if (!replayer.ok()) return replayer.status();
  Generator generator(scenario, config, t_rs, calls);

  // What every fixed choice costs: Ring, Halving-Doubling, then StragglAR around each rank.
  std::vector<CallDecision> fixed = {{.algorithm = Algorithm::kRing},
                                     {.algorithm = Algorithm::kHalvingDoubling}};
  for (int rank = 0; rank < n; ++rank) {
    fixed.push_back({.algorithm = Algorithm::kStragglar, .straggler = rank});
  }
  std::vector<double> fixed_total_s(fixed.size(), 0);
  std::vector<double> seconds(fixed.size());

  ScenarioResult result{.name = scenario.name, .calls = calls};
  result.no_straggler = IsNoStragglerKind(scenario.kind);
  std::vector<int> truth;        // the current ground truth (persistent ranks)
  std::optional<int64_t> onset;  // the call where `truth` began, while still undetected
  std::vector<CallTiming> timing(n);
  size_t events_seen = 0;
  for (int64_t call = 0; call < calls; ++call) {
    const GeneratedCall generated = generator.Next(call);
    const std::vector<double> arrival = [&] {
      for (int rank = 0; rank < n; ++rank) timing[rank] = {generated.arrival_s[rank], 0};
      return LagsFromTimings(timing, LagSource::kArrivalClock);
    }();
    if (generated.persistent != truth) {
      if (onset.has_value()) result.detection_latency_calls.push_back(std::nullopt);  // missed
      truth = generated.persistent;
      onset.reset();
      if (!truth.empty()) {
        onset = call;
        // Already named (e.g. a drift that crossed the line while detected): no latency.
        const std::optional<int> named = replayer->core().detector().straggler();
        if (named.has_value() && Contains(truth, *named)) {
          result.detection_latency_calls.push_back(0);
          onset.reset();
        }
      }
    }

    size_t chosen = 0;
    absl::StatusOr<CallDecision> decision = replayer->Call(
        config.bytes, [&](const CallDecision& decided) -> absl::StatusOr<ReplayedTimings> {
          chosen = decided.algorithm == Algorithm::kRing              ? 0
                   : decided.algorithm == Algorithm::kHalvingDoubling ? 1
                                                                      : 2 + *decided.straggler;
          for (size_t i = 0; i < fixed.size(); ++i) {
            absl::StatusOr<SimulationResult> priced =
                replayer->Price(fixed[i], config.bytes, arrival);
            if (!priced.ok()) return priced.status();
            seconds[i] = priced->completion_s;
            fixed_total_s[i] += seconds[i];
            // The ranks' durations are what the chosen plan gives them: what they would measure.
            if (i == chosen) {
              for (int rank = 0; rank < n; ++rank) {
                timing[rank].duration_s = priced->finish_s[rank] - arrival[rank];
              }
            }
          }
          return ReplayedTimings{.by_rank = timing};
        });
    if (!decision.ok()) return decision.status();
    result.oracle_s += *std::min_element(seconds.begin(), seconds.end());
    result.policy_s += seconds[chosen];
    if (decision->explored) ++result.explored_calls;
    ++result.mix[std::string(AlgorithmName(decision->algorithm))];

    // Detections the exchange after this call produced.
    const std::vector<DetectionEvent>& events = replayer->core().detections();
    for (; events_seen < events.size(); ++events_seen) {
      const DetectionEvent& event = events[events_seen];
      if (!event.straggler.has_value()) continue;
      const int rank = *event.straggler;
      if (Contains(truth, rank)) {
        if (onset.has_value()) {
          result.detection_latency_calls.push_back(event.call - *onset + 1);
          onset.reset();
        }
      } else if (!Contains(generated.ambiguous, rank)) {
        ++result.false_positives;
      }
    }
  }
  if (onset.has_value()) result.detection_latency_calls.push_back(std::nullopt);
  result.detections = replayer->core().detections();
  const size_t best =
      std::min_element(fixed_total_s.begin(), fixed_total_s.end()) - fixed_total_s.begin();
  result.best_fixed_s = fixed_total_s[best];
  result.best_fixed = best < 2 ? std::string(AlgorithmName(fixed[best].algorithm))
                               : absl::StrCat("stragglar(", best - 2, ")");
  return result;
}

std::vector<std::string> CheckTargets(const std::vector<ScenarioResult>& results,
                                      const SuiteConfig& config) {
  std::vector<std::string> failures;
  const int64_t two_epochs = 2 * config.runtime.epoch_calls;
  double regret_sum = 0;
  for (const ScenarioResult& result : results) {
    for (const std::optional<int64_t>& latency : result.detection_latency_calls) {
      if (!latency.has_value() || *latency > two_epochs) {
        failures.push_back(absl::StrCat(result.name, ": a persistent straggler was ",
                                        latency.has_value()
                                            ? absl::StrCat("named only after ", *latency, " calls")
                                            : std::string("never named"),
                                        " (target: within 2 epochs = ", two_epochs, " calls)"));
      }
    }
    if (result.false_positives > 0) {
      failures.push_back(absl::StrCat(result.name, ": ", result.false_positives,
                                      " false positive(s) in ", result.calls, " calls"));
    }
    if (result.no_straggler && result.vs_best_fixed() > 0.01) {
      failures.push_back(absl::StrFormat("%s: %.2f%% slower than the best fixed algorithm (%s)",
                                         result.name, 100 * result.vs_best_fixed(),
                                         result.best_fixed));
    }
    regret_sum += result.regret();
  }
  if (!results.empty() && regret_sum / results.size() > 0.02) {
    failures.push_back(absl::StrFormat("mean regret %.2f%% over the suite (target <= 2%%)",
                                       100 * regret_sum / results.size()));
  }
  return failures;
}

nlohmann::json ScenarioResultsJson(const std::vector<ScenarioResult>& results,
                                   const SuiteConfig& config) {
  nlohmann::json scenarios = nlohmann::json::array();
  double regret_sum = 0;
  for (const ScenarioResult& result : results) {
    nlohmann::json latencies = nlohmann::json::array();
    for (const std::optional<int64_t>& latency : result.detection_latency_calls) {
      latencies.push_back(latency.has_value() ? nlohmann::json(*latency) : nullptr);
    }
    scenarios.push_back({
        {"name", result.name},
        {"calls", result.calls},
        {"detection_latency_calls", latencies},
        {"false_positives", result.false_positives},
        {"false_positives_per_100k",
         1e5 * static_cast<double>(result.false_positives) / result.calls},
        {"detections", StragglersJson(result.detections)},
        {"policy_s", result.policy_s},
        {"oracle_s", result.oracle_s},
        {"regret", result.regret()},
        {"explored_calls", result.explored_calls},
        {"mix", result.mix},
        {"best_fixed", result.best_fixed},
        {"vs_best_fixed", result.vs_best_fixed()},
    });
    regret_sum += result.regret();
  }
  const std::vector<std::string> failures = CheckTargets(results, config);
  return {
      {"ranks", config.num_ranks},
      {"bytes", config.bytes},
      {"alpha_s", config.link.alpha_s},
      {"bandwidth_Bps", config.link.bandwidth_bytes_per_s},
      {"noise_s", config.noise_s},
      {"t_rs_s", StragglarReduceScatterSeconds(config.num_ranks, static_cast<double>(config.bytes),
                                               config.link)},
      {"epoch_calls", config.runtime.epoch_calls},
      {"seed", config.seed},
      {"scenarios", scenarios},
      {"mean_regret", results.empty() ? 0.0 : regret_sum / results.size()},
      {"targets_met", failures.empty()},
      {"failures", failures},
  };
}

}  // namespace stragglar
