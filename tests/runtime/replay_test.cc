#include "runtime/replay/replay.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<Trace> Parse(const std::string& text) {
  std::istringstream in(text);
  return ParseTrace(in, "t.csv");
}

// A trace of `calls` calls on `ranks` ranks: every rank arrives at call*10ms plus up to 0.2 ms of
// noise; `late(call)` names the rank that is `lag_s` late in that call (-1: nobody).
template <typename Late>
std::vector<std::string> TraceRows(int ranks, int calls, double lag_s, Late late,
                                   int64_t bytes = 16 << 20, uint64_t seed = 1) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> noise(0, 200e-6);
  std::vector<std::string> rows;
  for (int call = 0; call < calls; ++call) {
    for (int rank = 0; rank < ranks; ++rank) {
      const double arrival = call * 0.010 + noise(random) + (late(call) == rank ? lag_s : 0);
      rows.push_back(absl::StrFormat("%d,%d,%.9f,%.9f,%d,ring", call, rank, arrival, 0.001, bytes));
    }
  }
  return rows;
}

std::string Csv(const std::vector<std::string>& rows) {
  std::string text = "call,rank,arrival_s,duration_s,bytes,algorithm\n";
  for (const std::string& row : rows) absl::StrAppend(&text, row, "\n");
  return text;
}

nlohmann::json Replay(const std::string& csv, int epoch_calls = 32) {
  absl::StatusOr<Trace> trace = Parse(csv);
  EXPECT_TRUE(trace.ok()) << trace.status();
  if (!trace.ok()) return {};
  ReplayOptions options{.link = {.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1 << 30)}};
  options.config.epoch_calls = epoch_calls;
  absl::StatusOr<nlohmann::json> report = ReplayTrace(*trace, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *report : nlohmann::json();
}

TEST(ParseTraceTest, RowsInAnyOrderAndExactDuplicates) {
  const absl::StatusOr<Trace> trace = Parse(
      "rank,extra,call,arrival_s\n"
      "1,x,7,0.5\n"
      "\n"
      "0,x,3,0.25\r\n"
      "1,x,3,0.375\n"
      "0,x,7,0.125\n"
      "0,x,7,0.125\n");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->num_ranks, 2);
  EXPECT_EQ(trace->rows, 5);
  EXPECT_EQ(trace->duplicate_rows, 1);
  ASSERT_EQ(trace->calls.size(), 2u);
  EXPECT_EQ(trace->calls[0].call, 3);
  EXPECT_EQ(trace->calls[1].call, 7);
  EXPECT_EQ(trace->calls[0].rank[1]->arrival_s, 0.375);
  EXPECT_EQ(trace->calls[1].rank[0]->arrival_s, 0.125);
  EXPECT_EQ(trace->calls[1].bytes, 0);  // no bytes column
}

TEST(ParseTraceTest, BadInputNamesTheLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "t.csv: empty trace (no header line)"},
      {"call,arrival_s\n0,1\n",
       "t.csv:1: the header must name the columns call, rank and "
       "arrival_s; missing rank"},
      {"call,rank,rank,arrival_s\n", "t.csv:1: column \"rank\" appears twice"},
      {"call,rank,arrival_s\n0,0,0.1\nhello world\n", "t.csv:3: expected at least 3 fields"},
      {"call,rank,arrival_s\n0,0,0.1\n1,0,soon\n", "t.csv:3: arrival_s must be a finite number"},
      {"call,rank,arrival_s\n-1,0,0.1\n", "t.csv:2: call must be a non-negative integer"},
      {"call,rank,arrival_s\n0,70000,0.1\n", "t.csv:2: rank must be an integer in [0, 65536)"},
      {"call,rank,arrival_s,duration_s\n0,0,0.1,-2\n", "t.csv:2: duration_s must be a non-neg"},
      {"\n\ncall,arrival_s\n", "t.csv:3: the header must name the columns"},
      {"call,rank,arrival_s\n0,0,0.1\n0,1,0.1\n0,60000,0.1\n",
       "t.csv:4: rank 60000 is far beyond the other ranks (3 distinct ranks in the trace)"},
      {"call,rank,arrival_s\n0,0,0.1\n0,1,0.1\n0,0,0.2\n",
       "t.csv:4: call 0 rank 0 appears again with different values (first on line 2)"},
      {"call,rank,arrival_s,bytes\n0,0,0.1,64\n0,1,0.1,128\n",
       "t.csv:3: call 0 has 128 bytes here but 64 on line 2"},
      {"call,rank,arrival_s,link_bytes_per_s\n0,0,0.1,3e9\n0,1,0.1,0\n",
       "t.csv:3: link_bytes_per_s must be a positive number, got \"0\""},
      {"call,rank,arrival_s,link_bytes_per_s\n0,0,0.1,fast\n",
       "t.csv:2: link_bytes_per_s must be a positive number, got \"fast\""},
      {"call,rank,arrival_s,link_bytes_per_s\n0,0,0.1,3e9\n0,0,0.1,1e9\n",
       "t.csv:3: call 0 rank 0 appears again with different values (first on line 2)"},
      // A file cut inside a number: strtod alone reads "0." as 0.
      {"call,rank,arrival_s\n0,0,0.1\n1,1,0.\n",
       "t.csv:3: arrival_s must be a finite number, got \"0.\""},
      {"call,rank,arrival_s,duration_s\n0,0,0.1,2.\n",
       "t.csv:2: duration_s must be a non-negative number, got \"2.\""},
      // A binary file's first line is escaped, and cut, never echoed raw.
      {std::string("\x89PNG\r\x1a\x00\x01\x02\x1b[31m", 14) + std::string(100, 'x') + "\n",
       "missing call, rank, arrival_s in \"\\x89PNG\\r\\x1a\\x00\\x01\\x02\\x1b[31mxxxx"},
  };
  for (const auto& [text, message] : cases) {
    const absl::StatusOr<Trace> trace = Parse(text);
    ASSERT_FALSE(trace.ok()) << text;
    EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(trace.status().message(), HasSubstr(message))
        << absl::CHexEscape(trace.status().message());
    EXPECT_LT(trace.status().message().size(), 200u) << "one short line";
  }
}

TEST(ParseTraceTest, AcceptsAByteOrderMark) {
  const absl::StatusOr<Trace> trace = Parse(
      "\xEF\xBB\xBF"
      "call,rank,arrival_s\n0,0,0.5\n0,1,0.5\n");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->num_ranks, 2);
}

// A trace from before the link column, and one with the column where some rows leave it empty.
TEST(ParseTraceTest, TheLinkColumnIsOptionalAndPerRank) {
  const absl::StatusOr<Trace> old = Parse("call,rank,arrival_s\n0,0,0.5\n0,1,0.5\n");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->has_link_column);
  EXPECT_EQ(old->calls[0].link_bytes_per_s, std::vector<double>({0, 0}));
  const absl::StatusOr<Trace> trace = Parse(
      "call,rank,arrival_s,link_bytes_per_s\n"
      "0,1,0.5,6e8\n0,0,0.5,3e9\n1,0,0.7,\n1,1,0.7,3e9\n1,1,0.7,3e9\n");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_TRUE(trace->has_link_column);
  EXPECT_EQ(trace->duplicate_rows, 1);
  EXPECT_EQ(trace->calls[0].link_bytes_per_s, std::vector<double>({3e9, 6e8}));
  EXPECT_EQ(trace->calls[1].link_bytes_per_s, std::vector<double>({0, 3e9}));
}

TEST(SlowLinkFromTraceTest, TheSlowestRankAtTheProbesBarOfTheMedian) {
  const LinkModel base{.alpha_s = 7e-6, .bandwidth_bytes_per_s = 1e9};
  const auto slow = [&](std::vector<double> speeds) -> std::pair<int, double> {
    const std::optional<LinkModel> link = SlowLinkFromTrace(base, speeds);
    if (!link.has_value()) return {-2, 0};
    EXPECT_EQ(link->alpha_s, base.alpha_s);  // the replay's own link, but for the slow rank
    EXPECT_EQ(link->bandwidth_bytes_per_s, base.bandwidth_bytes_per_s);
    return {link->slow_rank, link->slow_factor};
  };
  EXPECT_EQ(slow({3e9, 3e9, 6e8, 3e9}), std::pair(2, 5.0));
  EXPECT_EQ(slow({3e9, 3e9, 3e9, 3e9}), std::pair(-1, 1.0));
  // At the bar (1.7x): exactly, and as a trace's 9 digits write a link the run priced at exactly
  // the bar, which reads back a hair below it. Well under it: not slow.
  EXPECT_EQ(slow({1.7e9, 1e9, 1.7e9, 1.7e9}), std::pair(1, 1.7));
  EXPECT_EQ(slow({1.70000001e9, 1.70000001e9, 1.70000001e9, 1.00000001e9}).first, 3);
  EXPECT_EQ(slow({3e9, 3e9, 3e9, 1.8e9}), std::pair(-1, 1.0));
  // The median of 5, not their mean: two fast outliers do not make the others slow.
  EXPECT_EQ(slow({1e9, 1e9, 1e9, 9e9, 9e9}), std::pair(-1, 1.0));
  // A rank with no link recorded: the call says nothing.
  EXPECT_EQ(slow({3e9, 0, 3e9, 3e9}).first, -2);
  EXPECT_EQ(slow({}).first, -2);
}

// A trace of `calls` calls on `ranks` ranks, nobody late, with the link column: rank `slow_rank`'s
// link 5x slower in the calls [from, to).
std::string SlowLinkCsv(int ranks, int calls, int slow_rank, int from, int to) {
  std::string text = "call,rank,arrival_s,duration_s,bytes,algorithm,link_bytes_per_s\n";
  const std::vector<std::string> rows = TraceRows(ranks, calls, 0, [](int) { return -1; });
  for (size_t i = 0; i < rows.size(); ++i) {
    const int call = static_cast<int>(i) / ranks, rank = static_cast<int>(i) % ranks;
    const bool slow = rank == slow_rank && call >= from && call < to;
    absl::StrAppend(&text, rows[i], ",", slow ? "6e8" : "3e9", "\n");
  }
  return text;
}

// Rank 2's link is slow in the rows of calls 64..191: the run named it at the exchange after call
// 95 and cleared it at the one after call 223 (the first epochs whose rows show each). The replay
// names it at those calls, prices StragglAR around rank 2 in between (calls 96..223), and the
// bulk-synchronous algorithms once it recovered, as the run did.
TEST(ReplayTest, FollowsTheTracesSlowLinkAndClearsIt) {
  const nlohmann::json report = Replay(SlowLinkCsv(8, 288, 2, 64, 192), /*epoch_calls=*/32);
  EXPECT_EQ(report["link_column"], true);
  EXPECT_TRUE(report["stragglers"].empty()) << report.dump(2);
  ASSERT_EQ(report["slow_links"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["slow_links"][0]["rank"], 2);
  EXPECT_EQ(report["slow_links"][0]["detected_at_call"], 95);
  EXPECT_EQ(report["slow_links"][0]["slow_factor"], 5.0);
  EXPECT_EQ(report["slow_links"][0]["cleared_at_call"], 223);
  // StragglAR in calls 96..223 (an exploration call among them may run another), and only to
  // explore outside them; the final decision is a bulk-synchronous one again.
  const nlohmann::json& decision = report["decisions"][std::to_string(16 << 20)];
  const int explored = decision["explored"].get<int>();
  EXPECT_GE(decision["mix"].value("stragglar", 0), 128 - explored) << decision;
  EXPECT_LE(decision["mix"].value("stragglar", 0), 128 + explored) << decision;
  EXPECT_NE(decision["algorithm"], "stragglar") << decision;

  // Still slow at the end: the policy's final choice is StragglAR around the rank behind it.
  const nlohmann::json still = Replay(SlowLinkCsv(8, 288, 2, 64, 288), /*epoch_calls=*/32);
  ASSERT_EQ(still["slow_links"].size(), 1u);
  EXPECT_FALSE(still["slow_links"][0].contains("cleared_at_call"));
  EXPECT_EQ(still["decisions"][std::to_string(16 << 20)]["algorithm"], "stragglar");
  EXPECT_EQ(still["decisions"][std::to_string(16 << 20)]["straggler"], 2);
}

// Without the column (a trace from an older run) the same arrivals name no slow link and never
// choose StragglAR but to explore.
TEST(ReplayTest, WithoutTheLinkColumnNoSlowLinkIsNamed) {
  std::string csv = SlowLinkCsv(8, 288, 2, 64, 288);
  std::string stripped;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&stripped, line.substr(0, line.rfind(',')), "\n");
  }
  const nlohmann::json report = Replay(stripped, /*epoch_calls=*/32);
  EXPECT_EQ(report["link_column"], false);
  EXPECT_TRUE(report["slow_links"].empty());
  const nlohmann::json& decision = report["decisions"][std::to_string(16 << 20)];
  EXPECT_LE(decision["mix"].value("stragglar", 0), decision["explored"].get<int>()) << decision;
}

// Detections are reported at the trace's own call indices, whatever they start at.
TEST(ReplayTest, DetectionsUseTheTracesCallNumbers) {
  std::vector<std::string> rows = TraceRows(8, 96, 5e-3, [](int) { return 3; });
  for (std::string& row : rows) {
    const size_t comma = row.find(',');
    row = absl::StrCat(std::stoi(row.substr(0, comma)) + 1000, row.substr(comma));
  }
  const nlohmann::json report = Replay(Csv(rows));
  ASSERT_EQ(report["stragglers"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["stragglers"][0]["detected_at_call"], 1031);
  // 96 calls replayed: the next call index would be an exploration call, but the reported
  // decision is the policy's own choice.
  EXPECT_EQ(report["decisions"][std::to_string(16 << 20)]["algorithm"], "stragglar");
}

TEST(ReplayTest, NamesAPersistentStragglerAtTheFirstEpochThatHasEnoughCalls) {
  const nlohmann::json report =
      Replay(Csv(TraceRows(8, 256, 5e-3, [](int) { return 3; })), /*epoch_calls=*/32);
  EXPECT_EQ(report["ranks"], 8);
  EXPECT_EQ(report["calls"], 256);
  ASSERT_EQ(report["stragglers"].size(), 1u) << report.dump(2);
  const nlohmann::json& straggler = report["stragglers"][0];
  EXPECT_EQ(straggler["rank"], 3);
  // The detector needs min_calls = 32 calls, which the first exchange (after call 31) provides.
  EXPECT_EQ(straggler["detected_at_call"], 31);
  EXPECT_EQ(straggler["persistence"], 1.0);
  EXPECT_NEAR(straggler["mean_lag_s"].get<double>(), 5e-3, 3e-4);
  EXPECT_FALSE(straggler.contains("cleared_at_call"));
  // The first epoch runs Ring (nothing exchanged yet), the rest StragglAR around rank 3, which
  // the model prices below always-Ring on these arrivals, except one exploration call in 64.
  const nlohmann::json& decision = report["decisions"][std::to_string(16 << 20)];
  EXPECT_EQ(decision["algorithm"], "stragglar");
  EXPECT_EQ(decision["straggler"], 3);
  EXPECT_EQ(decision["explored"], 4);  // calls 32, 96, 160, 224
  EXPECT_EQ(decision["mix"]["stragglar"], 224 - 4);
  EXPECT_GT(decision["saved_vs_ring_s"].get<double>(), 0);
  EXPECT_EQ(report["predicted"]["saved_vs_ring_s"], decision["saved_vs_ring_s"]);
}

// Replayed as a GPU backend exchanges epochs (deferred: absorbed an epoch after they end), the
// detector sees the same epochs and names the straggler at the same call, while the decisions that
// follow from it start one epoch later.
TEST(ReplayTest, DeferredExchangeNamesAtTheSameCallAndDecidesAnEpochLater) {
  const std::string csv = Csv(TraceRows(8, 256, 5e-3, [](int) { return 3; }));
  const nlohmann::json immediate = Replay(csv, /*epoch_calls=*/32);
  absl::StatusOr<Trace> trace = Parse(csv);
  ASSERT_TRUE(trace.ok());
  ReplayOptions options{.link = {.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1 << 30)},
                        .deferred_exchange = true};
  options.config.epoch_calls = 32;
  const nlohmann::json deferred = *ReplayTrace(*trace, options);
  EXPECT_EQ(deferred["exchange"], "deferred");
  EXPECT_EQ(deferred["stragglers"], immediate["stragglers"]);
  const nlohmann::json& now = immediate["decisions"][std::to_string(16 << 20)]["mix"];
  const nlohmann::json& later = deferred["decisions"][std::to_string(16 << 20)]["mix"];
  // StragglAR from call 32 (immediate) or 64 (deferred), less one exploration call in 64 each.
  EXPECT_EQ(now["stragglar"], 224 - 4);
  EXPECT_EQ(later["stragglar"], 192 - 3);
}

// A trace as the NCCL preload writes one: every rank's host reaches the call together, and rank 3's
// work starts 5 ms late on its GPU stream (behind a kernel of its own), so its call is 5 ms
// shorter than the others'. Replayed with lags from durations, as that preload takes them, rank 3
// is named; from the arrivals nobody is.
TEST(ReplayTest, LagsFromDurationsNameTheRankLateOnItsStream) {
  std::mt19937_64 random(4);
  std::uniform_real_distribution<double> noise(0, 200e-6);
  std::vector<std::string> rows;
  for (int call = 0; call < 128; ++call) {
    for (int rank = 0; rank < 8; ++rank) {
      const double duration = 0.008 + noise(random) - (rank == 3 ? 5e-3 : 0);
      rows.push_back(absl::StrFormat("%d,%d,%.9f,%.9f,%d,native", call, rank,
                                     call * 0.010 + noise(random), duration, 16 << 20));
    }
  }
  absl::StatusOr<Trace> trace = Parse(Csv(rows));
  ASSERT_TRUE(trace.ok()) << trace.status();
  ReplayOptions options{.link = {.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1 << 30)},
                        .deferred_exchange = true};
  options.config.epoch_calls = 32;
  options.config.lag_source = LagSource::kDuration;
  absl::StatusOr<nlohmann::json> durations = ReplayTrace(*trace, options);
  ASSERT_TRUE(durations.ok()) << durations.status();
  EXPECT_EQ((*durations)["lags"], "duration");
  ASSERT_EQ((*durations)["stragglers"].size(), 1u) << durations->dump(2);
  EXPECT_EQ((*durations)["stragglers"][0]["rank"], 3);
  EXPECT_NEAR((*durations)["stragglers"][0]["mean_lag_s"].get<double>(), 5e-3, 3e-4);
  options.config.lag_source = LagSource::kArrivalClock;
  absl::StatusOr<nlohmann::json> arrivals = ReplayTrace(*trace, options);
  ASSERT_TRUE(arrivals.ok()) << arrivals.status();
  EXPECT_EQ((*arrivals)["lags"], "arrival");
  EXPECT_TRUE((*arrivals)["stragglers"].empty()) << arrivals->dump(2);
}

TEST(ReplayTest, RowOrderAndDuplicatesDoNotChangeTheResult) {
  std::vector<std::string> rows = TraceRows(6, 128, 4e-3, [](int) { return 2; });
  const nlohmann::json ordered = Replay(Csv(rows));
  std::vector<std::string> shuffled = rows;
  shuffled.insert(shuffled.end(), rows.begin(), rows.begin() + 50);  // exact duplicates
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(9));
  nlohmann::json replayed = Replay(Csv(shuffled));
  EXPECT_EQ(replayed["duplicate_rows"], 50);
  replayed["duplicate_rows"] = 0;
  replayed["rows"] = ordered["rows"];
  EXPECT_EQ(replayed, ordered);
}

TEST(ReplayTest, NoiseOnlyNamesNobody) {
  const nlohmann::json report = Replay(Csv(TraceRows(8, 512, 0, [](int) { return -1; })));
  EXPECT_TRUE(report["stragglers"].empty()) << report.dump(2);
  // Without a straggler the model picks a bulk-synchronous algorithm (Halving-Doubling on this
  // fast link, after the first epoch's Ring); StragglAR runs only when exploring.
  const nlohmann::json& decision = report["decisions"][std::to_string(16 << 20)];
  const nlohmann::json& mix = decision["mix"];
  EXPECT_LE(mix.value("stragglar", 0), decision["explored"].get<int>()) << decision;
  EXPECT_GE(mix["ring"].get<int>() + mix["halving-doubling"].get<int>(),
            512 - decision["explored"].get<int>())
      << decision;
}

TEST(ReplayTest, AStragglerThatMovesIsClearedAndTheNewOneNamed) {
  const nlohmann::json report =
      Replay(Csv(TraceRows(8, 512, 5e-3, [](int call) { return call < 192 ? 1 : 6; })));
  ASSERT_EQ(report["stragglers"].size(), 2u) << report.dump(2);
  EXPECT_EQ(report["stragglers"][0]["rank"], 1);
  EXPECT_EQ(report["stragglers"][0]["detected_at_call"], 31);
  EXPECT_EQ(report["stragglers"][1]["rank"], 6);
  EXPECT_GT(report["stragglers"][1]["detected_at_call"].get<int>(), 192);
}

// A rank that never shows up in some calls (a hang in the making) is reported per call, and
// those calls are left out of the replay rather than guessed.
TEST(ReplayTest, CallsWithMissingRanksAreReported) {
  std::vector<std::string> rows = TraceRows(4, 64, 3e-3, [](int) { return 0; });
  // Drop rank 2 from calls 40 and 63, and ranks 1 and 3 from call 50.
  std::erase_if(rows, [](const std::string& row) {
    return row.starts_with("40,2,") || row.starts_with("63,2,") || row.starts_with("50,1,") ||
           row.starts_with("50,3,");
  });
  const nlohmann::json report = Replay(Csv(rows));
  EXPECT_EQ(report["calls"], 61);
  EXPECT_EQ(report["incomplete_calls_total"], 3);
  EXPECT_EQ(report["incomplete_calls"],
            nlohmann::json::parse(R"([{"call": 40, "missing_ranks": [2]},
                                      {"call": 50, "missing_ranks": [1, 3]},
                                      {"call": 63, "missing_ranks": [2]}])"));
}

TEST(ReplayTest, OneRankIsRejected) {
  absl::StatusOr<Trace> trace = Parse("call,rank,arrival_s\n0,0,0.1\n1,0,0.2\n");
  ASSERT_TRUE(trace.ok());
  const absl::StatusOr<nlohmann::json> report = ReplayTrace(*trace, {});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("the trace has 1 rank(s)"));
}

}  // namespace
}  // namespace stragglar
