// Trace files for one communicator's collective calls: the contract's CSV (what `stragglar replay`
// reads) and Chrome trace-event JSON for the Perfetto UI (ui.perfetto.dev) and chrome://tracing,
// where each rank is a track and the time a rank spent waiting for the late one is its own slice.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"

namespace stragglar {

struct TraceRow {         // one rank's view of one collective call
  int64_t call = 0;       // collective number on the communicator, 0-based
  int rank = 0;           // >= 0
  double arrival_s = 0;   // on a clock shared by the ranks of the call
  double duration_s = 0;  // arrival -> completion on this rank
  int64_t bytes = 0;
  std::string algorithm;  // "ring", "halving-doubling", "stragglar"
  // This rank's own link, bytes/s per direction, as the runtime priced it once the exchange that
  // closed this call's epoch was absorbed (a rank behind a slow link shows its own lower speed);
  // 0: not known.
  double link_bytes_per_s = 0;
  // This rank's own link as the slow-link probe last measured it, each way (its fastest batch:
  // RankLinkSpeed); 0: not measured (the probe looks only where LooksForSlowRank).
  double link_send_bytes_per_s = 0;
  double link_receive_bytes_per_s = 0;
};

// The contract's CSV: header `call,rank,arrival_s,duration_s,bytes,algorithm,link_bytes_per_s,
// link_send_bytes_per_s,link_receive_bytes_per_s`, then one line per row in the given order, times
// with 9 decimals ("%.9f"), the links with 9 significant digits ("%.9g"; empty when not known).
// Readers that do not know the last three columns may ignore them. The format has no quoting, so
// commas, quotes and line breaks in `algorithm` are written as '_' to keep the columns aligned.
void WriteCsvTrace(absl::Span<const TraceRow> rows, std::ostream& out);

// Chrome trace-event JSON: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
// One process (pid 0) named `process_name`; one track per rank (tid = rank, "thread_name" =
// "rank N", "thread_sort_index" = N). Each row is a complete event ("ph": "X", cat "collective")
// named "allreduce <algorithm>", with ts/dur in microseconds relative to the earliest arrival in
// the trace, and args {call, algorithm, bytes, lag_s, wait_s}, plus link_bytes_per_s,
// link_send_bytes_per_s and link_receive_bytes_per_s where known:
// lag_s = arrival - earliest arrival of the call, wait_s = last arrival of the call - arrival
// (over the ranks present in the call).
// When wait_s > 0 the row gets a nested child "X" event "wait for rank R" (cat "wait"; R = the
// last-arriving rank, the lowest one on a tie) from its arrival lasting min(wait, duration).
// Rows may come in any order: events are emitted sorted by (call, rank), so a permutation of the
// rows gives the same JSON. Rows with a negative rank or a non-finite arrival cannot be placed
// and are skipped; a negative or non-finite duration is drawn as 0. otherData records the
// absolute time of ts 0 ("time_origin_s") and the row/call/rank counts.
nlohmann::json PerfettoTrace(absl::Span<const TraceRow> rows, absl::string_view process_name);

}  // namespace stragglar
