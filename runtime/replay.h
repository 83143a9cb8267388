// `stragglar replay`: reads an arrival trace (the contract's CSV, as `stragglar run --trace` writes
// it) and feeds it through the same RuntimeCore that runs online — the same epoch exchange, the
// same detector and the same chooser — to report who was a persistent straggler, when the runtime
// would have named them, and what the policy would have chosen and saved.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "policy/simulator.h"
#include "profiler/arrival.h"
#include "runtime/runtime_core.h"

namespace stragglar {

// A parsed trace: one entry per distinct call index, in increasing order.
struct Trace {
  struct Call {
    int64_t call = 0;
    int64_t bytes = 0;                            // 0 when the trace has no bytes column
    std::vector<std::optional<CallTiming>> rank;  // [rank]; nullopt: the rank has no row
  };
  int num_ranks = 0;  // the largest rank index + 1
  std::vector<Call> calls;
  int64_t rows = 0;            // data rows read
  int64_t duplicate_rows = 0;  // rows identical to an earlier one, ignored
};

// Reads the CSV: a header line naming at least call, rank and arrival_s (optional duration_s,
// bytes, algorithm; other columns are ignored), then one row per (call, rank) in any order.
// Errors name the line: a malformed number, a missing field, a negative call or rank, the same
// (call, rank) twice with different values, or two sizes for one call. `source` names the input
// in messages.
absl::StatusOr<Trace> ParseTrace(std::istream& in, absl::string_view source);

// The contract's "stragglers" list from detection events: one entry per rank named, with
// "cleared_at_call" when the verdict was later withdrawn. `stragglar run` reports its online
// detections in the same form, so the two can be compared.
nlohmann::json StragglersJson(absl::Span<const DetectionEvent> detections);

struct ReplayOptions {
  RuntimeConfig config;  // mode is forced to kAdapt: replay asks what the policy would do
  LinkModel link;
};

// Replays `trace` through a RuntimeCore. Calls where some rank has no row are reported and
// left out of the replay (the detector needs every rank's arrival). The JSON is the contract's
// {"ranks", "calls", "stragglers": [{"rank", "detected_at_call", "persistence", "mean_lag_s"}],
// "decisions": {...}} plus "incomplete_calls", "rows", "duplicate_rows" and "predicted". Predicted
// times are the model's time after each call's last arrival (the latency `stragglar run`
// reports), summed over calls, for the policy's choice, always-Ring and always-Halving-Doubling,
// priced on each call's real arrivals with `link`.
absl::StatusOr<nlohmann::json> ReplayTrace(const Trace& trace, const ReplayOptions& options);

}  // namespace stragglar
