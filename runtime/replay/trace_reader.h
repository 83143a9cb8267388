// Reads an arrival trace: the contract's CSV, as `stragglar run --trace` and the preload
// libraries' STRAGGLAR_TRACE_FILE write it, for `stragglar replay`.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/plan/plan.h"
#include "profiler/arrival.h"

namespace stragglar {

// A parsed trace: one entry per distinct call index, in increasing order.
struct Trace {
  struct Call {
    int64_t call = 0;
    int64_t bytes = 0;                   // 0 when the trace has no bytes column
    std::optional<Algorithm> algorithm;  // what ran, when the trace says so and it is one of ours
    std::vector<std::optional<CallTiming>> rank;  // [rank]; nullopt: the rank has no row
    // [rank]: the rank's own link as the runtime priced it (exporters/trace.h); 0: not given.
    std::vector<double> link_bytes_per_s;
  };
  int num_ranks = 0;             // the largest rank index + 1
  bool has_link_column = false;  // the header names link_bytes_per_s
  std::vector<Call> calls;
  int64_t rows = 0;            // data rows read
  int64_t duplicate_rows = 0;  // rows identical to an earlier one, ignored
};

// Reads the CSV: a header line naming at least call, rank and arrival_s (optional duration_s,
// bytes, algorithm, link_bytes_per_s; other columns are ignored), then one row per (call, rank)
// in any order.
// Errors name the line: a malformed number, a missing field, a negative call or rank, the same
// (call, rank) twice with different values, two sizes or algorithms for one call, or a rank index
// far beyond the others (a typo). An algorithm name this library does not know (e.g. "nccl")
// leaves Call::algorithm empty. `source` names the input in messages.
absl::StatusOr<Trace> ParseTrace(std::istream& in, absl::string_view source);

}  // namespace stragglar
