// `stragglar run`: the embedded-default main job. Ranks are threads running a training-like loop
// (compute, then an AllReduce of the gradients); one rank is persistently late. Each step runs the
// baseline (Ring only, the runtime observing) and then the adaptive runtime, on the same data and
// the same delays, checks every result against the exact reference, and reports what it measured.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/plan/plan.h"
#include "kernels/reduce/reduce.h"
#include "nlohmann/json.hpp"
#include "policy/model/network_model.h"
#include "policy/model/topology.h"

namespace stragglar {

struct RunOptions {
  int ranks = 8;
  std::optional<int> straggler = 5;  // none: every rank punctual
  double delay_s = 0.020;            // mean extra compute time of the straggler
  double delay_spread_s = 0.002;     // standard deviation of the straggler's extra time
  double compute_s = 0.004;          // every rank's compute time per step
  double compute_noise_s = 0.0002;   // its standard deviation
  int64_t bytes = 16 << 20;
  // An emulated machine of nodes (`--topology NxG`): both phases run on it, messages between its
  // nodes delayed as `inter_node_link` says, and the policy prices plans per link class. nullopt:
  // one host, as it is.
  std::optional<Topology> topology;
  LinkModel inter_node_link = kTypicalInterNodeLink;
  // With a topology: every rank runs its plans (both phases) on one queue per link class
  // (`--queues per-class`, HostExecutorOptions::ranks_per_node), and the policy and the model line
  // price them that way. false: round by round.
  bool per_class_queues = false;
  // The adaptive runtime's candidates, Ring (the baseline and the default) first. Ring and
  // StragglAR by default, so the speedup is StragglAR's alone; adding Halving-Doubling lets the
  // policy also pick among the bulk-synchronous algorithms.
  std::vector<Algorithm> candidates = {Algorithm::kRing, Algorithm::kStragglar};
  int iterations = 256;
  DataType type = DataType::kFloat32;
  uint64_t seed = 1;
  // Shorter than the preload library's default (64) so the demo adapts within its first seconds.
  int epoch_calls = 32;
  // Output files, opened before the run (a bad path fails at once); empty: none.
  std::string summary_json_path;
  std::string trace_path;
  std::string trace_json_path;  // Perfetto / Chrome trace-event JSON of the adaptive phase
  // Where the adaptive runtime keeps what it learned across runs (STRAGGLAR_STATE_FILE); empty:
  // nowhere.
  std::string state_file;
  // Prometheus endpoint (address:port, port 0: any free port); nullopt: none. Both communicators
  // export, as comm="baseline" and comm="adaptive". A port that cannot be bound is logged once and
  // the run goes on without metrics.
  std::optional<int> metrics_port;
  std::string metrics_address = "127.0.0.1";
  // Keep serving this long after the last step, so a scraper sees the final values.
  double metrics_hold_s = 0;
};

// Runs both phases, printing progress to `progress`; returns the summary JSON (the contract's
// shape, "correct": false when any result differed from the reference). InvalidArgument for
// options out of range; the runtime's error when a collective fails.
absl::StatusOr<nlohmann::json> RunJob(const RunOptions& options, std::ostream& progress);

}  // namespace stragglar
