#include "exporters/run_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/units.h"

namespace stragglar {
namespace {

// Nearest-rank percentile of sorted, non-empty values: v[ceil(percent * n / 100) - 1], in integers
// so that e.g. p90 of 10 values is exactly v[8] with no floating-point ceil to get wrong.
double NearestRank(const std::vector<double>& sorted, int64_t percent) {
  const int64_t n = static_cast<int64_t>(sorted.size());
  const int64_t index = (percent * n + 99) / 100 - 1;
  return sorted[static_cast<size_t>(std::clamp<int64_t>(index, 0, n - 1))];
}

}  // namespace

LagSummary SummarizeLags(absl::Span<const TraceRow> rows, int top_k) {
  std::vector<const TraceRow*> kept;
  kept.reserve(rows.size());
  for (const TraceRow& row : rows) {
    if (row.rank >= 0 && row.rank < kMaxSummaryRanks && std::isfinite(row.arrival_s)) {
      kept.push_back(&row);
    }
  }
  // Grouping by call in (call, rank) order makes the sums independent of the input order; stable
  // so that, of duplicate (call, rank) rows, the first one given is the one kept.
  std::stable_sort(kept.begin(), kept.end(), [](const TraceRow* a, const TraceRow* b) {
    return a->call != b->call ? a->call < b->call : a->rank < b->rank;
  });
  kept.erase(std::unique(kept.begin(), kept.end(),
                         [](const TraceRow* a, const TraceRow* b) {
                           return a->call == b->call && a->rank == b->rank;
                         }),
             kept.end());

  LagSummary summary;
  if (kept.empty()) return summary;
  for (const TraceRow* row : kept) summary.ranks = std::max(summary.ranks, row->rank + 1);

  std::vector<std::vector<double>> lags(summary.ranks);
  std::vector<int64_t> times_last(summary.ranks, 0);
  summary.per_rank.resize(summary.ranks);
  for (int rank = 0; rank < summary.ranks; ++rank) summary.per_rank[rank].rank = rank;

  for (size_t begin = 0; begin < kept.size();) {
    const int64_t call = kept[begin]->call;
    size_t end = begin;
    double earliest = kept[begin]->arrival_s;
    double latest = earliest;
    int at_latest = 0;
    for (; end < kept.size() && kept[end]->call == call; ++end) {
      const double arrival = kept[end]->arrival_s;
      earliest = std::min(earliest, arrival);
      if (arrival > latest) {
        latest = arrival;
        at_latest = 1;
      } else if (arrival == latest) {
        ++at_latest;
      }
    }
    ++summary.calls;
    // With one rank present nobody waited, so nobody was last.
    const bool has_last = end - begin >= 2 && at_latest == 1;
    for (size_t i = begin; i < end; ++i) {
      const TraceRow& row = *kept[i];
      lags[row.rank].push_back(row.arrival_s - earliest);
      summary.per_rank[row.rank].waited_s += latest - row.arrival_s;
      if (has_last && row.arrival_s == latest) ++times_last[row.rank];
    }
    begin = end;
  }

  for (int rank = 0; rank < summary.ranks; ++rank) {
    RankLagStats& stats = summary.per_rank[rank];
    std::vector<double>& values = lags[rank];
    stats.calls = static_cast<int64_t>(values.size());
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    stats.min_s = values.front();
    stats.median_s = NearestRank(values, 50);
    stats.p90_s = NearestRank(values, 90);
    stats.max_s = values.back();
    stats.mean_s = std::accumulate(values.begin(), values.end(), 0.0) / values.size();
    stats.last_fraction = static_cast<double>(times_last[rank]) / stats.calls;
  }

  for (const RankLagStats& stats : summary.per_rank) {
    if (stats.calls > 0) summary.top_late.push_back(stats.rank);
  }
  std::sort(summary.top_late.begin(), summary.top_late.end(), [&](int a, int b) {
    const double median_a = summary.per_rank[a].median_s;
    const double median_b = summary.per_rank[b].median_s;
    return median_a != median_b ? median_a > median_b : a < b;
  });
  summary.top_late.resize(
      std::min(summary.top_late.size(), static_cast<size_t>(std::max(top_k, 0))));
  return summary;
}

nlohmann::json LagSummaryJson(const LagSummary& summary) {
  nlohmann::json per_rank = nlohmann::json::array();
  for (const RankLagStats& stats : summary.per_rank) {
    per_rank.push_back({{"rank", stats.rank},
                        {"calls", stats.calls},
                        {"lag_s",
                         {{"min", stats.min_s},
                          {"median", stats.median_s},
                          {"p90", stats.p90_s},
                          {"max", stats.max_s},
                          {"mean", stats.mean_s}}},
                        {"waited_s", stats.waited_s},
                        {"last_fraction", stats.last_fraction}});
  }
  return {{"ranks", summary.ranks},
          {"calls", summary.calls},
          {"top_late_ranks", summary.top_late},
          {"per_rank", std::move(per_rank)}};
}

std::string FormatLagSummary(const LagSummary& summary) {
  std::string text = absl::StrFormat(
      "lag summary: %d ranks, %d calls (lag = arrival - earliest arrival of the call)\n",
      summary.ranks, summary.calls);
  if (!summary.per_rank.empty()) {
    absl::StrAppendFormat(&text, "%4s  %6s  %10s  %10s  %10s  %10s  %6s\n", "rank", "calls",
                          "median", "p90", "max", "waited", "last %");
  }
  for (const RankLagStats& stats : summary.per_rank) {
    if (stats.calls == 0) {
      absl::StrAppendFormat(&text, "%4d  %6d  %10s  %10s  %10s  %10s  %6s\n", stats.rank, 0, "-",
                            "-", "-", "-", "-");
      continue;
    }
    absl::StrAppendFormat(&text, "%4d  %6d  %10s  %10s  %10s  %10s  %5.1f%%\n", stats.rank,
                          stats.calls, FormatSeconds(stats.median_s), FormatSeconds(stats.p90_s),
                          FormatSeconds(stats.max_s), FormatSeconds(stats.waited_s),
                          100 * stats.last_fraction);
  }
  // A rank whose median lag is zero is on time half the time or more: not worth naming as late.
  std::vector<std::string> late;
  for (int rank : summary.top_late) {
    const double median_s = summary.per_rank[rank].median_s;
    if (median_s > 0) late.push_back(absl::StrCat(rank, " (median ", FormatSeconds(median_s), ")"));
  }
  absl::StrAppend(&text, "late ranks: ", late.empty() ? "none" : absl::StrJoin(late, ", "), "\n");
  return text;
}

}  // namespace stragglar
