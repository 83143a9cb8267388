// The backend-agnostic runtime core: one per rank per communicator. The host runtime drives it
// from threads today; the NCCL and MPI preload libraries drive the same class.
//
// Every call: Decide() (identical on every rank), run the plan, Record() this rank's timing. Every
// `epoch_calls` calls the backend gathers every rank's EpochPayload() at the same call index and
// hands the concatenation to AbsorbEpoch() on every rank. Decisions change only there, from data
// all ranks share, so every rank runs the same algorithm for the same call. A wrong prediction
// may cost time; it can never desynchronise the ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/plan.h"
#include "policy/calibration.h"
#include "policy/chooser.h"
#include "policy/detector.h"
#include "policy/simulator.h"
#include "profiler/arrival.h"
#include "runtime/state_file.h"

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
  // fixes it (STRAGGLAR_PIECES; capped as Chooser does).
  int stragglar_pieces = 0;
  DetectorConfig detector;
  LagSource lag_source = LagSource::kArrivalClock;
  // STRAGGLAR_STATE_FILE: where the backend keeps what the policy learned across restarts (see
  // runtime/state_file.h); empty: nowhere.
  std::string state_file;
};

struct CallDecision {
  int64_t call = 0;  // 0-based call index on this communicator
  Algorithm algorithm = Algorithm::kRing;
  std::optional<int> straggler;    // StragglAR's straggler
  double predicted_s = 0;          // model: completion of the chosen plan (0 when not modelled)
  double default_predicted_s = 0;  // model: completion of the default algorithm
  bool explored = false;           // an exploration call, not the policy's best guess
};

// One call as the epoch exchange revealed it: the same on every rank.
struct EpochCallReport {
  int64_t bytes = 0;
  CallDecision decision;           // what ran
  std::vector<CallTiming> timing;  // by rank
  std::vector<double> lag_s;       // by rank: arrival behind the earliest rank's
  // Estimated time this call saved against the default algorithm: the model's time for the
  // default on this call's lags (calibrated) minus the measured time, both the shortest duration
  // over the ranks (the time after the last arrival, as Calibrate compares them). Negative when
  // the choice was slower; 0 when the default ran or nothing could be measured.
  double saved_s = 0;
};

// What an epoch exchange revealed, for observers (exporters, traces): every call of the epoch and
// the detector's verdict after it.
struct EpochReport {
  int64_t epoch = 0;       // 0-based
  int64_t first_call = 0;  // call index of calls[0]
  std::vector<EpochCallReport> calls;
  std::optional<int> straggler;
  std::vector<double> persistence;  // by rank: share of the detector's window it lagged
};

// A change of the detector's verdict, taken at an epoch exchange.
struct DetectionEvent {
  int64_t call = 0;              // the last call of the epoch whose data led to it
  std::optional<int> straggler;  // the newly named rank; nullopt when it was cleared
  double persistence = 0;        // of the named (or cleared) rank, at that moment
  double mean_lag_s = 0;         // likewise
};

class RuntimeCore {
 public:
  // InvalidArgument for num_ranks < 2, rank outside [0, num_ranks), epoch_calls < 1, or no
  // candidates.
  static absl::StatusOr<RuntimeCore> Create(RuntimeConfig config, int rank, int num_ranks,
                                            LinkModel link);

  // The algorithm for the next call of `bytes` bytes.
  absl::StatusOr<CallDecision> Decide(int64_t bytes);
  // What the policy would choose for `bytes` now, without exploration and without counting a
  // call (replay's per-size summary).
  absl::StatusOr<CallDecision> Preview(int64_t bytes);
  // The plan to execute for `decision` on a call of `bytes` (shared with the chooser's cache;
  // StragglAR's is pipelined as the model prefers for that size).
  absl::StatusOr<const Plan*> PlanFor(const CallDecision& decision, int64_t bytes) {
    return chooser_.PlanFor(decision.algorithm, decision.straggler, static_cast<double>(bytes),
                            link_);
  }
  // This rank's timing of the call Decide() last returned.
  // `ran_decision` false: the timing is not of the decision's plan (a replayed trace in which
  // something else ran), so the calibration does not credit it to the decision's algorithm.
  void Record(const CallTiming& timing, bool ran_decision = true);
  // The call ran `ran` instead of what Decide() returned (a backend's forced algorithm): the
  // epoch report and the calibration credit `ran`.
  void Record(const CallTiming& timing, const CallDecision& ran);

  // True when the epoch is full: the backend must exchange payloads before the next Decide().
  bool ExchangeDue() const { return static_cast<int>(epoch_.size()) >= config_.epoch_calls; }
  // [arrival_s, duration_s] per call of the epoch, in call order.
  std::vector<double> EpochPayload() const;
  // Every rank's EpochPayload(), rank after rank: the same values on every rank. Feeds the
  // detector and prepares the next epoch's decisions. Absorbs the sealed epoch when there is one
  // (see SealEpoch), else the current one. InvalidArgument on a size mismatch.
  absl::Status AbsorbEpoch(absl::Span<const double> all_payloads);

  // Deferred exchange, for backends whose timings arrive after the call has returned (the GPU's:
  // a call is only enqueued on a stream). SealEpoch() closes the full epoch so that calls go on
  // into the next one while the backend gathers the sealed epoch's timings, which it measured
  // itself (PayloadFromTimings); AbsorbEpoch() later absorbs it, at the same call index on every
  // rank. Decisions meanwhile come from the epochs absorbed before: they lag by one epoch, and
  // stay identical on every rank. FailedPrecondition when the current epoch is not full or an
  // epoch is already sealed.
  absl::Status SealEpoch();
  bool HasSealedEpoch() const { return sealed_.has_value(); }
  // Calls in the sealed epoch (0 when none), and the index of its first call.
  int sealed_calls() const { return sealed_ ? static_cast<int>(sealed_->calls.size()) : 0; }
  int64_t sealed_first_call() const { return sealed_ ? sealed_->first_call : 0; }
  // The payload EpochPayload() would give for calls with these timings, in call order.
  static std::vector<double> PayloadFromTimings(absl::Span<const CallTiming> timings);

  int rank() const { return rank_; }
  int num_ranks() const { return num_ranks_; }
  int64_t calls() const { return next_call_; }
  int64_t epochs() const { return epochs_; }
  const RuntimeConfig& config() const { return config_; }
  const LinkModel& link() const { return link_; }
  const StragglerDetector& detector() const { return detector_; }
  // Every change of the detector's verdict so far, in order.
  const std::vector<DetectionEvent>& detections() const { return detections_; }
  const Calibration& calibration() const { return calibration_; }
  // The last AbsorbEpoch()'s report (empty before the first).
  const EpochReport& last_epoch() const { return last_epoch_; }

  // What this core has learned, for the state file (machine left empty for the caller).
  LearnedState ExportState() const;
  // Whether there is anything worth saving: an exchange happened or a state was imported.
  bool HasLearned() const { return epochs_ > 0 || warm_; }
  // Starts from a saved state (the same on every rank): calibration, predicted lags and the
  // named straggler, and adapts from the first call. InvalidArgument, changing nothing, when the
  // state is for another world size.
  absl::Status ImportState(const LearnedState& state);

 private:
  RuntimeCore(RuntimeConfig config, int rank, int num_ranks, LinkModel link);
  struct EpochCall;
  bool Adapting(int64_t bytes) const;
  absl::StatusOr<CallDecision> Choose(int64_t bytes);
  CallDecision Explore(const CallDecision& chosen, int64_t bytes) const;
  void Calibrate(const EpochCall& call, absl::Span<const CallTiming> timing,
                 absl::Span<const double> lag_s);
  // EpochCallReport::saved_s of `call`; `baseline_by_bytes` caches the model's default-algorithm
  // time per message size within the epoch (it hardly depends on the lags: the default is
  // bulk-synchronous), so an epoch costs one simulation per size, not one per call.
  double EstimateSaved(const EpochCall& call, absl::Span<const CallTiming> timing,
                       absl::Span<const double> lag_s,
                       absl::flat_hash_map<int64_t, double>& baseline_by_bytes);

  RuntimeConfig config_;
  int rank_;
  int num_ranks_;
  LinkModel link_;
  StragglerDetector detector_;
  Chooser chooser_;
  int64_t next_call_ = 0;
  int64_t epochs_ = 0;
  bool warm_ = false;  // started from a saved state: adapt before the first exchange
  struct EpochCall {
    CallTiming timing;
    CallDecision decision;
    int64_t bytes = 0;
    bool measured = true;  // the timing belongs to the decision's plan
  };
  std::vector<EpochCall> epoch_;
  struct SealedEpoch {
    std::vector<EpochCall> calls;
    int64_t first_call = 0;
  };
  std::optional<SealedEpoch> sealed_;
  std::optional<std::pair<CallDecision, int64_t>> pending_;  // Decide() awaiting its Record()
  Calibration calibration_;
  std::vector<double> predicted_arrival_s_;
  absl::flat_hash_map<int64_t, CallDecision> decisions_by_bytes_;              // reset every epoch
  absl::flat_hash_map<int64_t, std::vector<CandidatePrice>> priced_by_bytes_;  // likewise
  std::vector<DetectionEvent> detections_;
  EpochReport last_epoch_;
};

}  // namespace stragglar
