#include "runtime/replay.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <istream>
#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace stragglar {
namespace {

// Rank indices above this are typos, not machines; refusing them bounds the memory a bad line
// can ask for.
constexpr int kMaxRanks = 1 << 16;
// Incomplete calls listed one by one in the report; the rest are counted.
constexpr size_t kMaxListedIncompleteCalls = 100;

struct Columns {
  int call = -1, rank = -1, arrival = -1, duration = -1, bytes = -1, algorithm = -1;
  size_t required_fields = 0;  // 1 + the largest index among the columns used
};

absl::StatusOr<Columns> ParseHeader(absl::string_view line, absl::string_view where) {
  Columns columns;
  int index = 0;
  for (absl::string_view name : absl::StrSplit(line, ',')) {
    name = absl::StripAsciiWhitespace(name);
    int* slot = name == "call"         ? &columns.call
                : name == "rank"       ? &columns.rank
                : name == "arrival_s"  ? &columns.arrival
                : name == "duration_s" ? &columns.duration
                : name == "bytes"      ? &columns.bytes
                : name == "algorithm"  ? &columns.algorithm
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
                     absl::StrJoin(missing, ", "), " in \"", line, "\""));
  }
  return columns;
}

struct ParsedRow {
  int64_t call = 0;
  int rank = 0;
  CallTiming timing;
  std::optional<int64_t> bytes;
  std::string algorithm;  // empty: not given
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
        where, ": call must be a non-negative integer, got \"", field(columns.call), "\""));
  }
  if (!absl::SimpleAtoi(field(columns.rank), &row.rank) || row.rank < 0 || row.rank >= kMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": rank must be an integer in [0, ",
                                                   kMaxRanks, "), got \"", field(columns.rank),
                                                   "\""));
  }
  if (!absl::SimpleAtod(field(columns.arrival), &row.timing.arrival_s) ||
      !std::isfinite(row.timing.arrival_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": arrival_s must be a finite number, got \"", field(columns.arrival), "\""));
  }
  if (columns.duration >= 0 && !field(columns.duration).empty() &&
      (!absl::SimpleAtod(field(columns.duration), &row.timing.duration_s) ||
       !std::isfinite(row.timing.duration_s) || row.timing.duration_s < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": duration_s must be a non-negative number, got \"",
                     field(columns.duration), "\""));
  }
  if (columns.bytes >= 0 && !field(columns.bytes).empty()) {
    int64_t bytes = 0;
    if (!absl::SimpleAtoi(field(columns.bytes), &bytes) || bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": bytes must be a non-negative integer, got \"", field(columns.bytes), "\""));
    }
    row.bytes = bytes;
  }
  if (columns.algorithm >= 0) row.algorithm = std::string(field(columns.algorithm));
  return row;
}

}  // namespace

nlohmann::json StragglersJson(absl::Span<const DetectionEvent> detections) {
  nlohmann::json stragglers = nlohmann::json::array();
  for (const DetectionEvent& event : detections) {
    if (event.straggler.has_value()) {
      stragglers.push_back({{"rank", *event.straggler},
                            {"detected_at_call", event.call},
                            {"persistence", event.persistence},
                            {"mean_lag_s", event.mean_lag_s}});
    } else if (!stragglers.empty()) {
      stragglers.back()["cleared_at_call"] = event.call;
    }
  }
  return stragglers;
}

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
    if (static_cast<int>(call.rank.size()) <= row->rank) call.rank.resize(row->rank + 1);
    std::optional<CallTiming>& slot = call.rank[row->rank];
    if (slot.has_value()) {
      const int64_t first_line = row_line[{row->call, row->rank}];
      if (slot->arrival_s != row->timing.arrival_s || slot->duration_s != row->timing.duration_s) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": call ", row->call, " rank ", row->rank,
                         " appears again with different values (first on line ", first_line, ")"));
      }
      ++trace.duplicate_rows;
    } else {
      slot = row->timing;
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
  for (Trace::Call& call : trace.calls) call.rank.resize(trace.num_ranks);
  return trace;
}

// Gathers from the timings the replay was given: the epoch's calls, every rank's timing of each.
class PolicyReplayer::Backend final : public CommBackend {
 public:
  Backend(int num_ranks, bool deferred) : num_ranks_(num_ranks), deferred_(deferred) {}

  // Timings are given, never measured.
  double Now() override { return 0; }
  // Exactly what the online backends hand to AbsorbEpoch: every rank's [arrival, duration] per
  // call of the gathered epoch (the oldest calls not gathered yet: deferred, later calls are
  // already in), rank after rank.
  absl::Status StartGather(absl::Span<const double> mine) override {
    const size_t calls = mine.size() / 2;
    if (calls > epoch_.size()) return absl::InternalError("replay: gathering calls not given");
    gathered_.clear();
    gathered_.reserve(2 * calls * num_ranks_);
    for (int rank = 0; rank < num_ranks_; ++rank) {
      for (size_t call = 0; call < calls; ++call) {
        gathered_.push_back(epoch_[call][rank].arrival_s);
        gathered_.push_back(epoch_[call][rank].duration_s);
      }
    }
    epoch_.erase(epoch_.begin(), epoch_.begin() + calls);
    return absl::OkStatus();
  }
  bool DefersExchange() const override { return deferred_; }
  absl::StatusOr<std::vector<double>> FinishGather() override { return std::move(gathered_); }
  // One process plays every rank: rank 0's text is everyone's.
  absl::Status BroadcastFromRankZero(std::string& text) override { return absl::OkStatus(); }

  void Add(std::vector<CallTiming> call) { epoch_.push_back(std::move(call)); }

 private:
  int num_ranks_;
  bool deferred_;
  std::deque<std::vector<CallTiming>> epoch_;  // [call not gathered yet][rank]
  std::vector<double> gathered_;
};

namespace {

// A replayed call's work: nothing runs; its timings are the ones given for the decision.
class ReplayedCall final : public CallWork {
 public:
  ReplayedCall(int num_ranks,
               absl::FunctionRef<absl::StatusOr<ReplayedTimings>(const CallDecision&)> timings,
               absl::FunctionRef<void(std::vector<CallTiming>)> gather)
      : num_ranks_(num_ranks), timings_(timings), gather_(gather) {}

  CallOutcome Run(const CallDecision& decision, const RankProgram* program) override {
    absl::StatusOr<ReplayedTimings> timings = timings_(decision);
    if (!timings.ok()) return {.status = timings.status()};
    if (static_cast<int>(timings->by_rank.size()) != num_ranks_) {
      return {.status = absl::InvalidArgumentError(absl::StrCat(
                  "replay: ", timings->by_rank.size(), " timings for ", num_ranks_, " ranks"))};
    }
    const CallTiming mine = timings->by_rank[0];
    gather_(std::move(timings->by_rank));
    return {.timing = mine, .measured = timings->measured};
  }

 private:
  int num_ranks_;
  absl::FunctionRef<absl::StatusOr<ReplayedTimings>(const CallDecision&)> timings_;
  absl::FunctionRef<void(std::vector<CallTiming>)> gather_;
};

}  // namespace

absl::StatusOr<PolicyReplayer> PolicyReplayer::Create(RuntimeConfig config, int num_ranks,
                                                      LinkModel link, bool deferred_exchange) {
  config.mode = RuntimeMode::kAdapt;
  auto backend = std::make_unique<Backend>(num_ranks, deferred_exchange);
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(
      /*rank=*/0, num_ranks, {.runtime = std::move(config), .name = "replay", .link = link},
      *backend);
  if (!comm.ok()) return comm.status();
  return PolicyReplayer(std::move(backend), *std::move(comm));
}

PolicyReplayer::PolicyReplayer(std::unique_ptr<Backend> backend, std::unique_ptr<Communicator> comm)
    : backend_(std::move(backend)), comm_(std::move(comm)) {}
PolicyReplayer::PolicyReplayer(PolicyReplayer&&) = default;
PolicyReplayer& PolicyReplayer::operator=(PolicyReplayer&&) = default;
PolicyReplayer::~PolicyReplayer() = default;

const RuntimeCore& PolicyReplayer::core() const { return comm_->core(); }

absl::StatusOr<CallDecision> PolicyReplayer::Call(
    int64_t bytes,
    absl::FunctionRef<absl::StatusOr<ReplayedTimings>(const CallDecision&)> timings) {
  ReplayedCall work(core().num_ranks(), timings,
                    [this](std::vector<CallTiming> call) { backend_->Add(std::move(call)); });
  return comm_->AllReduce(bytes, /*in_place=*/true, work);
}

absl::StatusOr<SimulationResult> PolicyReplayer::Price(const CallDecision& decision, int64_t bytes,
                                                       absl::Span<const double> arrival_s) {
  absl::StatusOr<const Plan*> plan = comm_->PlanFor(decision, bytes);
  if (!plan.ok()) return plan.status();
  return SimulatePlan(**plan, static_cast<double>(bytes), core().link(), arrival_s);
}

absl::StatusOr<nlohmann::json> ReplayTrace(const Trace& trace, const ReplayOptions& options) {
  const int n = trace.num_ranks;
  if (n < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("the trace has ", n, " rank(s); replay needs at least 2"));
  }
  absl::StatusOr<PolicyReplayer> replayer =
      PolicyReplayer::Create(options.config, n, options.link, options.deferred_exchange);
  if (!replayer.ok()) return replayer.status();

  nlohmann::json incomplete = nlohmann::json::array();
  int64_t incomplete_total = 0;
  // Per message size: how often each algorithm was chosen and the modelled time of the policy's
  // choice, of always-Ring and of always-Halving-Doubling on each call's real arrivals.
  struct SizeTotals {
    int64_t calls = 0;
    int64_t explored = 0;  // calls that ran an exploration candidate (included in `mix`)
    std::map<std::string, int64_t> mix;
    double policy_s = 0, ring_s = 0, halving_doubling_s = 0;
  };
  std::map<int64_t, SizeTotals> sizes;
  int64_t replayed = 0;
  std::vector<int64_t> replayed_calls;  // the trace's call index of every replayed call
  std::vector<CallTiming> timing(n);

  for (const Trace::Call& call : trace.calls) {
    std::vector<int> missing;
    for (int rank = 0; rank < n; ++rank) {
      if (!call.rank[rank].has_value()) missing.push_back(rank);
    }
    if (!missing.empty()) {
      if (incomplete.size() < kMaxListedIncompleteCalls) {
        incomplete.push_back({{"call", call.call}, {"missing_ranks", missing}});
      }
      ++incomplete_total;
      continue;
    }
    ++replayed;
    replayed_calls.push_back(call.call);
    for (int rank = 0; rank < n; ++rank) timing[rank] = *call.rank[rank];
    absl::StatusOr<CallDecision> decision =
        replayer->Call(call.bytes, [&](const CallDecision& decided) {
          // The trace's durations measure what ran online; the calibration may credit them to
          // this replay's choice only when that is what ran (not another policy's choice, or
          // native NCCL).
          return ReplayedTimings{
              .by_rank = timing,
              .measured = call.algorithm.has_value() && *call.algorithm == decided.algorithm};
        });
    if (!decision.ok()) return decision.status();

    const std::vector<double> arrival = LagsFromTimings(timing, LagSource::kArrivalClock);
    double seconds[3];
    const CallDecision priced[3] = {
        *decision, {.algorithm = Algorithm::kRing}, {.algorithm = Algorithm::kHalvingDoubling}};
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<SimulationResult> result = replayer->Price(priced[i], call.bytes, arrival);
      if (!result.ok()) return result.status();
      seconds[i] = result->after_last_arrival_s;
    }
    SizeTotals& totals = sizes[call.bytes];
    ++totals.calls;
    ++totals.mix[std::string(AlgorithmName(decision->algorithm))];
    if (decision->explored) ++totals.explored;
    totals.policy_s += seconds[0];
    totals.ring_s += seconds[1];
    totals.halving_doubling_s += seconds[2];
  }
  const RuntimeCore* core = &replayer->core();

  // The core counts the calls it saw; report the trace's own call indices (it may start anywhere,
  // have gaps, or have skipped incomplete calls).
  std::vector<DetectionEvent> detections = core->detections();
  for (DetectionEvent& event : detections) event.call = replayed_calls[event.call];
  nlohmann::json decisions = nlohmann::json::object();
  double policy_total = 0, ring_total = 0, hd_total = 0;
  for (const auto& [bytes, totals] : sizes) {
    // What the policy decides for this size now that it has seen the whole trace.
    absl::StatusOr<CallDecision> final_decision = replayer->Preview(bytes);
    if (!final_decision.ok()) return final_decision.status();
    nlohmann::json entry = {
        {"algorithm", AlgorithmName(final_decision->algorithm)},
        {"straggler", final_decision->straggler.has_value()
                          ? nlohmann::json(*final_decision->straggler)
                          : nlohmann::json(nullptr)},
        {"calls", totals.calls},
        {"mix", totals.mix},
        {"explored", totals.explored},
        {"predicted_s",
         {{"policy", totals.policy_s},
          {"ring", totals.ring_s},
          {"halving_doubling", totals.halving_doubling_s}}},
        {"saved_vs_ring_s", totals.ring_s - totals.policy_s},
        {"saved_vs_halving_doubling_s", totals.halving_doubling_s - totals.policy_s},
    };
    decisions[std::to_string(bytes)] = entry;
    policy_total += totals.policy_s;
    ring_total += totals.ring_s;
    hd_total += totals.halving_doubling_s;
  }
  return nlohmann::json{
      {"ranks", n},
      {"calls", replayed},
      {"rows", trace.rows},
      {"duplicate_rows", trace.duplicate_rows},
      {"incomplete_calls", incomplete},
      {"incomplete_calls_total", incomplete_total},
      {"epoch_calls", options.config.epoch_calls},
      {"exchange", options.deferred_exchange ? "deferred" : "immediate"},
      {"stragglers", StragglersJson(detections)},
      {"calibration", core->calibration().ToJson()},
      {"decisions", decisions},
      {"predicted",
       {{"link",
         {{"alpha_s", options.link.alpha_s},
          {"bandwidth_Bps", options.link.bandwidth_bytes_per_s}}},
        {"policy_s", policy_total},
        {"ring_s", ring_total},
        {"halving_doubling_s", hd_total},
        {"saved_vs_ring_s", ring_total - policy_total},
        {"saved_vs_halving_doubling_s", hd_total - policy_total}}},
  };
}

}  // namespace stragglar
