#include "exporters/trace.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stragglar {
namespace {

constexpr double kMicrosPerSecond = 1e6;

// The contract's CSV has no quoting: a separator inside a field would shift every later column.
std::string CsvField(absl::string_view text) {
  std::string field(text);
  for (char& c : field) {
    if (c == ',' || c == '"' || c == '\n' || c == '\r') c = '_';
  }
  return field;
}

// A negative rank names no track and a non-finite arrival has no place on the timeline; the
// contract's reader rejects both.
bool Placeable(const TraceRow& row) { return row.rank >= 0 && std::isfinite(row.arrival_s); }

nlohmann::json Metadata(absl::string_view name, int tid, nlohmann::json args) {
  return {{"ph", "M"},
          {"pid", 0},
          {"tid", tid},
          {"name", std::string(name)},
          {"args", std::move(args)}};
}

}  // namespace

void WriteCsvTrace(absl::Span<const TraceRow> rows, std::ostream& out) {
  out << "call,rank,arrival_s,duration_s,bytes,algorithm,link_bytes_per_s,link_send_bytes_per_s,"
         "link_receive_bytes_per_s\n";
  const auto speed = [](double bytes_per_s) {
    return bytes_per_s > 0 ? absl::StrFormat("%.9g", bytes_per_s) : "";
  };
  for (const TraceRow& row : rows) {
    out << absl::StrFormat("%d,%d,%.9f,%.9f,%d,%s,%s,%s,%s\n", row.call, row.rank, row.arrival_s,
                           row.duration_s, row.bytes, CsvField(row.algorithm),
                           speed(row.link_bytes_per_s), speed(row.link_send_bytes_per_s),
                           speed(row.link_receive_bytes_per_s));
  }
}

nlohmann::json PerfettoTrace(absl::Span<const TraceRow> rows, absl::string_view process_name) {
  std::vector<const TraceRow*> placed;
  placed.reserve(rows.size());
  for (const TraceRow& row : rows) {
    if (Placeable(row)) placed.push_back(&row);
  }
  // Sorted by (call, rank) so each call's rows are contiguous and the output does not depend on
  // the input order; stable so duplicates keep theirs.
  std::stable_sort(placed.begin(), placed.end(), [](const TraceRow* a, const TraceRow* b) {
    return a->call != b->call ? a->call < b->call : a->rank < b->rank;
  });

  // ts 0 is the earliest arrival, so the numbers stay small whatever clock the trace used.
  double origin_s = placed.empty() ? 0.0 : placed.front()->arrival_s;
  std::vector<int> ranks;
  for (const TraceRow* row : placed) {
    origin_s = std::min(origin_s, row->arrival_s);
    ranks.push_back(row->rank);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());

  nlohmann::json events = nlohmann::json::array();
  events.push_back(Metadata("process_name", 0, {{"name", std::string(process_name)}}));
  for (int rank : ranks) {
    events.push_back(Metadata("thread_name", rank, {{"name", absl::StrCat("rank ", rank)}}));
    events.push_back(Metadata("thread_sort_index", rank, {{"sort_index", rank}}));
  }

  int64_t calls = 0;
  for (size_t begin = 0; begin < placed.size();) {
    const int64_t call = placed[begin]->call;
    size_t end = begin;
    double earliest = placed[begin]->arrival_s;
    double latest = earliest;
    int last_rank = placed[begin]->rank;
    for (; end < placed.size() && placed[end]->call == call; ++end) {
      earliest = std::min(earliest, placed[end]->arrival_s);
      // Strictly later only: on a tie the lowest rank (seen first) is named.
      if (placed[end]->arrival_s > latest) {
        latest = placed[end]->arrival_s;
        last_rank = placed[end]->rank;
      }
    }
    ++calls;
    for (size_t i = begin; i < end; ++i) {
      const TraceRow& row = *placed[i];
      const double lag_s = row.arrival_s - earliest;
      const double wait_s = latest - row.arrival_s;
      const double ts_us = (row.arrival_s - origin_s) * kMicrosPerSecond;
      // A bogus duration is drawn as an instant rather than making the slice invalid.
      const double dur_us = std::isfinite(row.duration_s) && row.duration_s > 0
                                ? row.duration_s * kMicrosPerSecond
                                : 0.0;
      const std::string name =
          row.algorithm.empty() ? "allreduce" : absl::StrCat("allreduce ", row.algorithm);
      nlohmann::json args = {{"call", row.call},
                             {"algorithm", row.algorithm},
                             {"bytes", row.bytes},
                             {"lag_s", lag_s},
                             {"wait_s", wait_s}};
      if (row.link_bytes_per_s > 0) args["link_bytes_per_s"] = row.link_bytes_per_s;
      if (row.link_send_bytes_per_s > 0) args["link_send_bytes_per_s"] = row.link_send_bytes_per_s;
      if (row.link_receive_bytes_per_s > 0) {
        args["link_receive_bytes_per_s"] = row.link_receive_bytes_per_s;
      }
      events.push_back({{"ph", "X"},
                        {"pid", 0},
                        {"tid", row.rank},
                        {"name", name},
                        {"cat", "collective"},
                        {"ts", ts_us},
                        {"dur", dur_us},
                        {"args", std::move(args)}});
      if (wait_s > 0) {
        // Same start, and min() of the already-scaled values, so the child never pokes out of
        // its parent through rounding; it follows the parent so viewers nest it on equal ts.
        events.push_back(
            {{"ph", "X"},
             {"pid", 0},
             {"tid", row.rank},
             {"name", absl::StrCat("wait for rank ", last_rank)},
             {"cat", "wait"},
             {"ts", ts_us},
             {"dur", std::min(wait_s * kMicrosPerSecond, dur_us)},
             {"args", {{"call", row.call}, {"late_rank", last_rank}, {"wait_s", wait_s}}}});
      }
    }
    begin = end;
  }

  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"source", "stragglar"},
            {"time_origin_s", origin_s},
            {"rows", placed.size()},
            {"calls", calls},
            {"ranks", ranks.size()}}}};
}

}  // namespace stragglar
