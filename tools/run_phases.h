// The two phases of `stragglar run`, step by step and interleaved: in each step every rank (a
// thread) computes and joins the baseline's collective (Ring only, the runtime observing), then
// computes again (the same time) and joins the adaptive one. Both see the same delays and the same
// machine conditions, so their ratio is not skewed by drift between two back-to-back runs.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "exporters/trace_recorder.h"
#include "nlohmann/json.hpp"
#include "policy/model/simulator.h"
#include "policy/policy_config.h"
#include "policy/reports.h"
#include "prometheus/registry.h"
#include "runtime/link_probe.h"
#include "tools/run_job.h"

namespace stragglar {

// What one phase measured, indexed [step][rank] or [step].
struct Phase {
  std::string name;
  RuntimeMode mode;
  std::vector<std::vector<double>> arrival_s;
  std::vector<std::vector<double>> duration_s;
  std::vector<std::vector<Algorithm>> algorithm;
  // last completion - last arrival: what the collective adds once every rank is there, the time
  // an algorithm can change (the paper's measure)
  std::vector<double> latency_s;
  std::vector<double> span_s;  // last completion - first arrival: includes waiting for the last
  // The detector's and the calibration's state after the last step (rank 0's; every rank's is
  // the same).
  std::optional<int> detected;
  std::vector<DetectionEvent> detections;
  nlohmann::json calibration;
  int64_t first_stragglar_call = -1;
  double persistence = 0;
  bool correct = true;
};

// What every step computes and reduces: compute_s[step][rank], every rank's input, and the exact
// result every rank must get.
struct PhaseData {
  std::vector<std::vector<double>> compute_s;
  std::vector<std::vector<std::byte>> inputs;
  std::vector<std::byte> expected;
};

// Runs both phases and fills them, the policy pricing with `links` (measured; between nodes,
// options.inter_node_link when not measured, which is always what the emulated NICs do);
// `recorder` (when given) records the adaptive phase's trace,
// every call of it included. Prints a progress line per phase at every epoch's end. `metrics`
// (when given) exports both phases (comm="baseline" and comm="adaptive"). The runtime's error when
// a collective fails; Internal when the ranks ran different algorithms for a step.
absl::Status RunPhases(const RunOptions& options, const ProbedLinks& links,
                       prometheus::Registry* metrics, const PhaseData& data,
                       std::shared_ptr<TraceRecorder> recorder, Phase& baseline, Phase& adaptive,
                       std::ostream& progress);

// Mean of values[0, end), 0 when empty.
double Mean(const std::vector<double>& values, size_t end);
// The phase's algorithms in steps [0, end), e.g. "ring 32 stragglar 16".
std::string DescribeMix(const Phase& phase, int end);

}  // namespace stragglar
