#include "runtime/replay/trace_reader.h"

#include <algorithm>
#include <cmath>
#include <istream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace stragglar {
namespace {

// Rank indices above this are typos, not machines; refusing them bounds the memory a bad line
// can ask for.
constexpr int kMaxRanks = 1 << 16;

// A decimal number as a trace writes one: what absl::SimpleAtod reads, finite, and not cut short
// after its point ("0." is what is left of "0.0125" in a truncated file; strtod reads it as 0).
bool ParseNumber(absl::string_view text, double* out) {
  return !absl::EndsWith(text, ".") && absl::SimpleAtod(text, out) && std::isfinite(*out);
}

// At most 60 characters of a line, escaped: a binary file's first line must not reach the
// terminal raw.
std::string Quoted(absl::string_view line) {
  constexpr size_t kShown = 60;
  std::string shown = absl::CHexEscape(line.substr(0, kShown));
  if (line.size() > kShown) absl::StrAppend(&shown, "...");
  return absl::StrCat("\"", shown, "\"");
}

struct Columns {
  int call = -1, rank = -1, arrival = -1, duration = -1, bytes = -1, algorithm = -1, link = -1;
  size_t required_fields = 0;  // 1 + the largest index among the columns used
};

absl::StatusOr<Columns> ParseHeader(absl::string_view line, absl::string_view where) {
  Columns columns;
  int index = 0;
  for (absl::string_view name : absl::StrSplit(line, ',')) {
    name = absl::StripAsciiWhitespace(name);
    int* slot = name == "call"               ? &columns.call
                : name == "rank"             ? &columns.rank
                : name == "arrival_s"        ? &columns.arrival
                : name == "duration_s"       ? &columns.duration
                : name == "bytes"            ? &columns.bytes
                : name == "algorithm"        ? &columns.algorithm
                : name == "link_bytes_per_s" ? &columns.link
                                             : nullptr;
    if (slot != nullptr) {
      if (*slot >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": column \"", name, "\" appears twice in the header"));
      }
      *slot = index;
      columns.required_fields = std::max(columns.required_fields, static_cast<size_t>(index) + 1);
    }
    ++index;
  }
  std::vector<absl::string_view> missing;
  if (columns.call < 0) missing.push_back("call");
  if (columns.rank < 0) missing.push_back("rank");
  if (columns.arrival < 0) missing.push_back("arrival_s");
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the header must name the columns call, rank and arrival_s; missing ",
                     absl::StrJoin(missing, ", "), " in ", Quoted(line)));
  }
  return columns;
}

struct ParsedRow {
  int64_t call = 0;
  int rank = 0;
  CallTiming timing;
  std::optional<int64_t> bytes;
  std::string algorithm;        // empty: not given
  double link_bytes_per_s = 0;  // 0: not given
};

absl::StatusOr<ParsedRow> ParseRow(const std::vector<absl::string_view>& fields,
                                   const Columns& columns, absl::string_view where) {
  if (fields.size() < columns.required_fields) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": expected at least ", columns.required_fields, " fields, got ", fields.size()));
  }
  auto field = [&](int index) { return absl::StripAsciiWhitespace(fields[index]); };
  ParsedRow row;
  if (!absl::SimpleAtoi(field(columns.call), &row.call) || row.call < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": call must be a non-negative integer, got ", Quoted(field(columns.call))));
  }
  if (!absl::SimpleAtoi(field(columns.rank), &row.rank) || row.rank < 0 || row.rank >= kMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": rank must be an integer in [0, ",
                                                   kMaxRanks, "), got ",
                                                   Quoted(field(columns.rank))));
  }
  if (!ParseNumber(field(columns.arrival), &row.timing.arrival_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": arrival_s must be a finite number, got ", Quoted(field(columns.arrival))));
  }
  if (columns.duration >= 0 && !field(columns.duration).empty() &&
      (!ParseNumber(field(columns.duration), &row.timing.duration_s) ||
       row.timing.duration_s < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": duration_s must be a non-negative number, got ",
                     Quoted(field(columns.duration))));
  }
  if (columns.bytes >= 0 && !field(columns.bytes).empty()) {
    int64_t bytes = 0;
    if (!absl::SimpleAtoi(field(columns.bytes), &bytes) || bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": bytes must be a non-negative integer, got ", Quoted(field(columns.bytes))));
    }
    row.bytes = bytes;
  }
  if (columns.algorithm >= 0) row.algorithm = std::string(field(columns.algorithm));
  if (columns.link >= 0 && !field(columns.link).empty() &&
      (!ParseNumber(field(columns.link), &row.link_bytes_per_s) || row.link_bytes_per_s <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(where,
                                                   ": link_bytes_per_s must be a positive number, "
                                                   "got ",
                                                   Quoted(field(columns.link))));
  }
  return row;
}

}  // namespace

absl::StatusOr<Trace> ParseTrace(std::istream& in, absl::string_view source) {
  std::string line;
  int64_t line_number = 0;
  std::optional<Columns> columns;
  Trace trace;
  // Where each call's entry lives, and the line each (call, rank) and each call's size came from.
  absl::flat_hash_map<int64_t, size_t> call_index;
  absl::flat_hash_map<std::pair<int64_t, int>, int64_t> row_line;
  std::vector<int64_t> bytes_line;
  std::vector<std::pair<std::string, int64_t>> algorithm_line;  // per call: name, first line
  absl::flat_hash_set<int> ranks_seen;
  int64_t largest_rank_line = 0;
  while (std::getline(in, line)) {
    ++line_number;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty()) continue;
    if (!columns.has_value()) {
      // Spreadsheets like to start a CSV with a UTF-8 byte order mark.
      absl::ConsumePrefix(&text, "\xEF\xBB\xBF");
      absl::StatusOr<Columns> header = ParseHeader(text, absl::StrCat(source, ":", line_number));
      if (!header.ok()) return header.status();
      columns = *header;
      trace.has_link_column = columns->link >= 0;
      continue;
    }
    const std::string where = absl::StrCat(source, ":", line_number);
    absl::StatusOr<ParsedRow> row = ParseRow(absl::StrSplit(text, ','), *columns, where);
    if (!row.ok()) return row.status();
    ++trace.rows;
    auto [it, inserted] = call_index.try_emplace(row->call, trace.calls.size());
    if (inserted) {
      trace.calls.push_back({.call = row->call});
      bytes_line.push_back(0);
      algorithm_line.push_back({"", 0});
    }
    Trace::Call& call = trace.calls[it->second];
    if (static_cast<int>(call.rank.size()) <= row->rank) {
      call.rank.resize(row->rank + 1);
      call.link_bytes_per_s.resize(row->rank + 1);
    }
    std::optional<CallTiming>& slot = call.rank[row->rank];
    double& link = call.link_bytes_per_s[row->rank];
    if (slot.has_value()) {
      const int64_t first_line = row_line[{row->call, row->rank}];
      if (slot->arrival_s != row->timing.arrival_s || slot->duration_s != row->timing.duration_s ||
          link != row->link_bytes_per_s) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": call ", row->call, " rank ", row->rank,
                         " appears again with different values (first on line ", first_line, ")"));
      }
      ++trace.duplicate_rows;
    } else {
      slot = row->timing;
      link = row->link_bytes_per_s;
      row_line[{row->call, row->rank}] = line_number;
    }
    if (row->bytes.has_value()) {
      if (bytes_line[it->second] == 0) {
        call.bytes = *row->bytes;
        bytes_line[it->second] = line_number;
      } else if (call.bytes != *row->bytes) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": call ", row->call, " has ",
                                                       *row->bytes, " bytes here but ", call.bytes,
                                                       " on line ", bytes_line[it->second]));
      }
    }
    if (!row->algorithm.empty()) {
      auto& [name, first_line] = algorithm_line[it->second];
      if (first_line == 0) {
        name = row->algorithm;
        first_line = line_number;
        absl::StatusOr<Algorithm> algorithm = ParseAlgorithm(name);
        if (algorithm.ok()) call.algorithm = *algorithm;
      } else if (name != row->algorithm) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": call ", row->call, " ran ",
                                                       row->algorithm, " here but ", name,
                                                       " on line ", first_line));
      }
    }
    if (row->rank + 1 > trace.num_ranks) {
      trace.num_ranks = row->rank + 1;
      largest_rank_line = line_number;
    }
    ranks_seen.insert(row->rank);
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(source, ": read error"));
  if (!columns.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": empty trace (no header line)"));
  }
  // Every call holds a slot per rank up to the largest index. Ranks missing from the whole trace
  // are fine (a rank that never arrived), but an index far beyond the others is a typo that would
  // cost memory for nothing.
  if (trace.num_ranks > 2 * static_cast<int>(ranks_seen.size()) + 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":", largest_rank_line, ": rank ", trace.num_ranks - 1,
        " is far beyond the other ranks (", ranks_seen.size(), " distinct ranks in the trace)"));
  }
  std::sort(trace.calls.begin(), trace.calls.end(),
            [](const Trace::Call& a, const Trace::Call& b) { return a.call < b.call; });
  for (Trace::Call& call : trace.calls) {
    call.rank.resize(trace.num_ranks);
    call.link_bytes_per_s.resize(trace.num_ranks);
  }
  return trace;
}

}  // namespace stragglar
