// `stragglar replay`: feeds an arrival trace (runtime/replay/trace_reader.h) through the same
// communicator protocol that runs online (the same epoch exchange, detector and chooser) to report
// who was a persistent straggler, when the runtime would have named them, and what the policy
// would have chosen and saved. The scenario suite drives the same replayer with generated calls.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "policy/model/simulator.h"
#include "profiler/arrival.h"
#include "runtime/communicator.h"
#include "runtime/replay/trace_reader.h"
#include "runtime/runtime_core.h"

namespace stragglar {

// The contract's "stragglers" list from detection events: one entry per rank named, with
// "cleared_at_call" when the verdict was later withdrawn. `stragglar run` reports its online
// detections in the same form, so the two can be compared.
nlohmann::json StragglersJson(absl::Span<const DetectionEvent> detections);

// Every rank's timing of one call, as a replay knows it: from a trace, or from a scenario's model
// of the plan the policy chose.
struct ReplayedTimings {
  std::vector<CallTiming> by_rank;
  // Whether the timings are of the decision's plan (see RuntimeCore::Record).
  bool measured = true;
};

// Drives a communicator's protocol (runtime/communicator.h) from every rank's timings of each call
// (a trace, or a generated scenario), as rank 0 of the job would have: the same decisions, the
// same recording, the same epoch exchange (every rank's payload, rank after rank), over a backend
// that gathers from the given timings instead of a network.
class PolicyReplayer {
 public:
  // config.mode is forced to kAdapt: a replay asks what the policy would do. `deferred_exchange`:
  // exchange epochs as a backend whose calls only enqueue work does (the NCCL preload: sealed,
  // gathered half an epoch later, absorbed an epoch later), so that its decisions are replayed
  // at the calls it took them.
  // `replayed_link`: the replayed run's link after each epoch (CommOptions::replayed_link); empty:
  // `link` throughout.
  static absl::StatusOr<PolicyReplayer> Create(
      RuntimeConfig config, int num_ranks, LinkModel link, bool deferred_exchange = false,
      std::function<std::optional<LinkModel>(const EpochReport&)> replayed_link = nullptr);
  PolicyReplayer(PolicyReplayer&&);
  PolicyReplayer& operator=(PolicyReplayer&&);
  ~PolicyReplayer();

  // One call of `bytes`: the decision the policy takes for it (from earlier epochs only), and
  // every rank's timing of it from `timings` given that decision. InvalidArgument when `timings`
  // does not give one per rank.
  absl::StatusOr<CallDecision> Call(
      int64_t bytes,
      absl::FunctionRef<absl::StatusOr<ReplayedTimings>(const CallDecision&)> timings);
  // Prices `decision`'s plan on `arrival_s` (per rank) with the replay's link.
  absl::StatusOr<SimulationResult> Price(const CallDecision& decision, int64_t bytes,
                                         absl::Span<const double> arrival_s);

  // What the policy would choose for `bytes` now (see Communicator::Preview).
  absl::StatusOr<CallDecision> Preview(int64_t bytes) { return comm_->Preview(bytes); }

  const RuntimeCore& core() const;

 private:
  class Backend;
  PolicyReplayer(std::unique_ptr<Backend> backend, std::unique_ptr<Communicator> comm);

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> comm_;  // after `backend_`, which it uses
};

// `base` with the slow link a trace's link column shows for one call (`link_bytes_per_s`, by rank:
// each rank's own link, as the run priced it): the slowest rank's, when the median rank's link is
// at least kSlowRankRatio times as fast (the probe's bar), slow by that ratio; else no slow rank.
// nullopt when some rank's speed is not given (0). The replay keeps its own alpha and bandwidth
// (--alpha, --bandwidth): only which rank is slow, and by how much, comes from the trace.
std::optional<LinkModel> SlowLinkFromTrace(const LinkModel& base,
                                           absl::Span<const double> link_bytes_per_s);

struct ReplayOptions {
  // mode is forced to kAdapt: replay asks what the policy would do. config.lag_source says how
  // the run took lags: the NCCL preload's from durations (its ranks' arrivals are host times,
  // while a rank may be late on its GPU stream), the others' from arrivals.
  RuntimeConfig config;
  LinkModel link;
  bool deferred_exchange = false;  // see PolicyReplayer::Create
};

// Replays `trace` through the communicator protocol (PolicyReplayer). Calls where some rank has no
// row are reported and left out of the replay (the detector needs every rank's arrival). The JSON
// is the contract's
// {"ranks", "calls", "stragglers": [{"rank", "detected_at_call", "persistence", "mean_lag_s"}],
// "decisions": {...}} plus "incomplete_calls", "rows", "duplicate_rows", "exchange", "lags" and
// "predicted". Predicted times are the model's time after each call's last arrival (the latency
// `stragglar run` reports), summed over calls, for the policy's choice, always-Ring and
// always-Halving-Doubling, priced on each call's real lags (config.lag_source) with `link`. Where
// the trace has a link column, and every link is of one class (Policy::SetLink), the replay follows
// its slow link (SlowLinkFromTrace) from the epoch whose exchange recorded it, as the run did, and
// "slow_links" names it:
// [{"rank", "detected_at_call", "slow_factor", "cleared_at_call" once cleared}], each call the
// last of the epoch whose rows first show the change; "link_column" says whether there was one.
absl::StatusOr<nlohmann::json> ReplayTrace(const Trace& trace, const ReplayOptions& options);

}  // namespace stragglar
