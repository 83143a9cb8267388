// How the policy runs on one communicator: its mode, its epoch cadence and every knob of the
// decisions it takes. The same on every rank of a communicator (the ranks must decide alike).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/plan/plan.h"
#include "policy/detector.h"
#include "policy/model/network_model.h"
#include "policy/model/topology.h"
#include "profiler/arrival.h"

namespace stragglar {

enum class RuntimeMode {
  kAdapt,    // the policy chooses per call
  kObserve,  // profile and detect, always run the default algorithm
  kOff,      // the backend passes everything through untouched
};

struct RuntimeConfig {
  RuntimeMode mode = RuntimeMode::kAdapt;
  int epoch_calls = 64;
  int64_t min_bytes = 0;  // smaller calls run the default algorithm
  Algorithm default_algorithm = Algorithm::kRing;
  std::vector<Algorithm> candidates = {Algorithm::kRing, Algorithm::kHalvingDoubling,
                                       Algorithm::kStragglar};
  // Leave the default algorithm only when the model predicts at least this fraction faster...
  double min_predicted_gain = 0.05;
  // ...or this fraction, once the calibration has measured both on this message size.
  double calibrated_min_predicted_gain = 0.01;
  // Exploration: one call in this many (the same call index on every rank, from the second epoch
  // on) runs the candidate the calibration has measured least on that size, so a mis-calibrated
  // model corrects itself. 0: never.
  int explore_every = 64;
  // A candidate the calibration has measured (Calibration::kOwnSamples in the regime the
  // predicted arrivals put it in) and prices more than this fraction slower than the chosen
  // algorithm is explored only in one exploration slot of `costly_explore_every`. Exploring
  // StragglAR with nobody late, 2.5x OpenMPI's time at 1 MiB on a 16-core host, one call in 64
  // cost 2.3% for ever. Its factor is still refreshed, more slowly; a new regime (a straggler
  // appears) has no samples and is explored at once.
  double explore_max_cost = 0.25;
  int costly_explore_every = 16;
  // Calls per epoch whose measured time feeds the calibration (spread over the epoch), which
  // bounds the simulations an exchange costs. 0: no calibration (the raw model decides).
  int calibration_calls_per_epoch = 8;
  // Pieces per chunk of StragglAR's plans: 0 lets the model choose per message size; a number
  // fixes it (STRAGGLAR_PIECES; capped as PlanCache does).
  int stragglar_pieces = 0;
  // The machine, ranks numbered node by node (STRAGGLAR_TOPOLOGY, or what the backend learned at
  // setup); nullopt or one node: flat. On several nodes the plans are priced per link class, with
  // the measured link inside a node and `inter_node_link` between nodes, and StragglAR's shapes
  // include the hierarchical plan.
  std::optional<Topology> topology;
  LinkModel inter_node_link = kTypicalInterNodeLink;
  // The library's own AllReduce (Algorithm::kNative, the NCCL preload's default) is NCCL's: on a
  // machine of nodes it is priced as the faster of NCCL's ring and tree in closed form
  // (policy/nccl_models.h), what NCCL runs there, not as our hierarchical ring plan, which the
  // model puts 1.2x to 3.7x slower. Otherwise native is priced as Ring's plan.
  bool native_is_nccl = false;
  // On a machine of nodes, the executor runs one queue per link class (the host executor's
  // HostExecutorOptions::ranks_per_node, `stragglar run --queues per-class`): plans are priced with
  // the queue simulator, and hierarchical StragglAR's shapes include the plan written for it.
  // The MPI executor does with STRAGGLAR_QUEUES=per-class (MpiExecutorOptions::ranks_per_node);
  // the NCCL executors run round by round and leave it false.
  bool per_class_queues = false;
  DetectorConfig detector;
  LagSource lag_source = LagSource::kArrivalClock;
  // STRAGGLAR_STATE_FILE: where the communicator keeps what the policy learned across restarts
  // (see runtime/state_file.h); empty: nowhere.
  std::string state_file;
};

}  // namespace stragglar
