// The end-of-run lag summary users ask for: per-rank arrival lag (min/median/p90/max/mean), the
// time each rank wasted waiting for the others, how often it was the last to arrive, and the
// top-k latest ranks. Computed from trace rows, so the same numbers come out of a live run and a
// replayed trace file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "exporters/trace.h"
#include "nlohmann/json.hpp"

namespace stragglar {

struct RankLagStats {
  int rank = 0;
  int64_t calls = 0;  // calls with this rank present
  // Lag = arrival - earliest arrival of the call. Percentiles are nearest-rank over the sorted
  // lags v[0..n-1]: the q-th percentile is v[ceil(q * n / 100) - 1] (computed in integers), so the
  // median (q = 50) is the lower middle value for even n and p90 of 10 values is v[8]. The mean is
  // the sum of the sorted lags divided by n. All zero when calls == 0.
  double min_s = 0, median_s = 0, p90_s = 0, max_s = 0, mean_s = 0;
  // Sum over calls, in call order, of (last arrival of the call - own arrival): time spent
  // waiting for others.
  double waited_s = 0;
  // Fraction of its calls in which this rank arrived strictly after every other rank present (a
  // tie for last counts for nobody; a call with one rank present has no last).
  double last_fraction = 0;
};

struct LagSummary {
  int ranks = 0;                       // 1 + highest rank seen
  int64_t calls = 0;                   // distinct calls
  std::vector<RankLagStats> per_rank;  // index = rank; ranks absent from the trace have calls 0
  // The top_k ranks by median lag, latest first (ties: lower rank first). Only ranks with at
  // least one call; fewer than top_k when there are fewer such ranks.
  std::vector<int> top_late;
};

// per_rank is dense (one entry per rank index); rows with a rank at or above this are skipped so
// that a corrupt rank cannot ask for unbounded memory.
inline constexpr int kMaxSummaryRanks = 1 << 20;

// Rows may come in any order. Each (call, rank) counts once (the first row given); rows with a
// negative rank, a rank >= kMaxSummaryRanks or a non-finite arrival are skipped. Empty input gives
// ranks 0 and empty vectors.
LagSummary SummarizeLags(absl::Span<const TraceRow> rows, int top_k = 3);

// {"ranks", "calls", "top_late_ranks": [...], "per_rank": [{"rank", "calls", "lag_s": {"min",
// "median", "p90", "max", "mean"}, "waited_s", "last_fraction"}]}.
nlohmann::json LagSummaryJson(const LagSummary& summary);

// A fixed-width table for logs, one line per rank (rank | calls | median | p90 | max | waited |
// last %), then "late ranks: 5 (median 20.1 ms), 3 (median 1.02 ms)" listing the top_late ranks
// whose median lag is above zero ("late ranks: none" otherwise). Times via FormatSeconds.
std::string FormatLagSummary(const LagSummary& summary);

}  // namespace stragglar
