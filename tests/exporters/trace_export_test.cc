#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "exporters/run_summary.h"
#include "exporters/trace.h"
#include "exporters/trace_recorder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace stragglar {
namespace {

const std::string kCsvHeader =
    "call,rank,arrival_s,duration_s,bytes,algorithm,link_bytes_per_s,link_send_bytes_per_s,"
    "link_receive_bytes_per_s\n";

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Times are multiples of 1/1024 s on top of whole seconds, so every difference the exporters take
// is exact and the tests can compare bit for bit.
constexpr double kTick = 1.0 / 1024;

TraceRow Row(int64_t call, int rank, double arrival_s, double duration_s = 0,
             std::string algorithm = "ring", int64_t bytes = 1 << 20) {
  TraceRow row;
  row.call = call;
  row.rank = rank;
  row.arrival_s = arrival_s;
  row.duration_s = duration_s;
  row.bytes = bytes;
  row.algorithm = std::move(algorithm);
  return row;
}

// ---------------------------------------------------------------------------------------------
// CSV

TEST(CsvTraceTest, WritesTheContractHeaderAndOneLinePerRowInOrder) {
  const std::vector<TraceRow> rows = {
      Row(0, 0, 1.5, 0.25, "ring", 1024),
      Row(0, 1, 1.75, 0.0078125, "ring", 1024),
      Row(1, 1, 2.0, 0.125, "stragglar", 4096),
      Row(1, 0, 2.000000001, 0.5, "stragglar", 4096),
  };
  std::ostringstream out;
  WriteCsvTrace(rows, out);
  EXPECT_EQ(out.str(), kCsvHeader +
                           "0,0,1.500000000,0.250000000,1024,ring,,,\n"
                           "0,1,1.750000000,0.007812500,1024,ring,,,\n"
                           "1,1,2.000000000,0.125000000,4096,stragglar,,,\n"
                           "1,0,2.000000001,0.500000000,4096,stragglar,,,\n");
}

TEST(CsvTraceTest, EmptyInputIsJustTheHeader) {
  std::ostringstream out;
  WriteCsvTrace({}, out);
  EXPECT_EQ(out.str(), kCsvHeader);
}

TEST(CsvTraceTest, SeparatorsInTheAlgorithmCannotShiftColumns) {
  std::ostringstream out;
  WriteCsvTrace({Row(3, 2, 0, 0, "a,b\"c\nd", 8)}, out);
  EXPECT_EQ(out.str(), kCsvHeader + "3,2,0.000000000,0.000000000,8,a_b_c_d,,,\n");
}

// Nine significant digits: a slow link's factor reads back within a part in 10^8.
TEST(CsvTraceTest, TheLinkHasNineDigitsAndAnEmptyFieldWhenNotKnown) {
  TraceRow fast = Row(5, 0, 1, 0, "ring", 64);
  fast.link_bytes_per_s = 3.0e9;
  TraceRow slow = Row(5, 1, 1, 0, "ring", 64);
  slow.link_bytes_per_s = 3.0e9 / 7;
  slow.link_send_bytes_per_s = 3.0e9 / 7;  // measured slow one way only
  slow.link_receive_bytes_per_s = 2.9e9;
  std::ostringstream out;
  WriteCsvTrace({fast, slow, Row(6, 0, 2, 0, "ring", 64)}, out);
  EXPECT_EQ(out.str(), kCsvHeader +
                           "5,0,1.000000000,0.000000000,64,ring,3e+09,,\n"
                           "5,1,1.000000000,0.000000000,64,ring,428571429,428571429,2.9e+09\n"
                           "6,0,2.000000000,0.000000000,64,ring,,,\n");
}

// ---------------------------------------------------------------------------------------------
// TraceRecorder

// Rows come from the epoch reports the recording rank absorbs, each with its rank's own link: the
// rank behind the slow link at its lower speed.
TEST(TraceRecorderTest, RowsCarryEachRanksOwnLink) {
  EpochReport report{.epoch = 3, .first_call = 96};
  report.link = {.alpha_s = 5e-6, .bandwidth_bytes_per_s = 4e9, .slow_rank = 1, .slow_factor = 4};
  for (int call = 0; call < 2; ++call) {
    report.calls.push_back({.bytes = 1 << 20,
                            .decision = {.algorithm = Algorithm::kStragglar, .straggler = 1},
                            .timing = {{.arrival_s = 1.0 + call}, {.arrival_s = 1.5 + call}, {}}});
  }
  // Rank 1's measured link, each way; the others' measured alike.
  report.link_speeds.assign(3, {.send_bytes_per_s = 4e9, .receive_bytes_per_s = 4.1e9});
  report.link_speeds[1] = {.send_bytes_per_s = 1e9, .receive_bytes_per_s = 3.9e9};
  TraceRecorder recorder(/*recording_rank=*/2);
  recorder.OnEpoch(/*rank=*/0, report);  // another rank's copy: not recorded twice
  EXPECT_THAT(recorder.rows(), IsEmpty());
  recorder.OnEpoch(/*rank=*/2, report);
  std::vector<std::tuple<int64_t, int, double, double>> rows;
  for (const TraceRow& row : recorder.rows()) {
    EXPECT_EQ(row.algorithm, "stragglar");
    rows.emplace_back(row.call, row.rank, row.arrival_s, row.link_bytes_per_s);
    EXPECT_EQ(row.link_send_bytes_per_s, row.rank == 1 ? 1e9 : 4e9);
    EXPECT_EQ(row.link_receive_bytes_per_s, row.rank == 1 ? 3.9e9 : 4.1e9);
  }
  EXPECT_THAT(rows, ElementsAre(std::tuple(96, 0, 1.0, 4e9), std::tuple(96, 1, 1.5, 1e9),
                                std::tuple(96, 2, 0.0, 4e9), std::tuple(97, 0, 2.0, 4e9),
                                std::tuple(97, 1, 2.5, 1e9), std::tuple(97, 2, 0.0, 4e9)));
}

// ---------------------------------------------------------------------------------------------
// Perfetto / Chrome trace-event JSON

// Two calls, three ranks; rank 2 is last in both. Call 1: rank 1's duration is shorter than its
// wait, so its wait slice is clipped to the collective.
std::vector<TraceRow> CraftedPerfettoRows() {
  return {
      Row(0, 0, 10.0, 8 * kTick),
      Row(0, 1, 10.0 + 1 * kTick, 8 * kTick),
      Row(0, 2, 10.0 + 4 * kTick, 4 * kTick),
      Row(1, 0, 11.0, 8 * kTick, "stragglar"),
      Row(1, 1, 11.0, 1 * kTick, "stragglar"),
      Row(1, 2, 11.0 + 2 * kTick, 6 * kTick, "stragglar"),
  };
}

// Through text and back, as a viewer would read it.
nlohmann::json RoundTrip(const nlohmann::json& trace) {
  return nlohmann::json::parse(trace.dump());
}

std::vector<nlohmann::json> EventsOf(const nlohmann::json& trace, const std::string& ph) {
  std::vector<nlohmann::json> events;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") == ph) events.push_back(event);
  }
  return events;
}

// The one X event of category `cat` for (call, rank); null when there is none.
nlohmann::json FindSlice(const nlohmann::json& trace, const std::string& cat, int64_t call,
                         int rank) {
  nlohmann::json found;
  int matches = 0;
  for (const nlohmann::json& event : EventsOf(trace, "X")) {
    if (event.at("cat") == cat && event.at("args").at("call") == call && event.at("tid") == rank) {
      found = event;
      ++matches;
    }
  }
  EXPECT_LE(matches, 1) << cat << " call " << call << " rank " << rank;
  return found;
}

TEST(PerfettoTraceTest, TopLevelShapeAndEveryEventHasTheRequiredFields) {
  const nlohmann::json trace = RoundTrip(PerfettoTrace(CraftedPerfettoRows(), "job 7"));
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  ASSERT_TRUE(trace.at("otherData").is_object());
  EXPECT_EQ(trace.at("otherData").at("time_origin_s"), 10.0);
  EXPECT_EQ(trace.at("otherData").at("calls"), 2);
  EXPECT_EQ(trace.at("otherData").at("ranks"), 3);
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    for (const char* field : {"ph", "pid", "tid", "name"}) {
      EXPECT_TRUE(event.contains(field)) << field << " missing in " << event.dump();
    }
    EXPECT_EQ(event.at("pid"), 0);
  }
  // 6 collective slices, and wait slices for every rank but the last: 2 per call.
  EXPECT_EQ(EventsOf(trace, "X").size(), 6u + 4u);
}

TEST(PerfettoTraceTest, MetadataNamesTheProcessAndEveryRank) {
  const nlohmann::json trace = RoundTrip(PerfettoTrace(CraftedPerfettoRows(), "job 7"));
  std::vector<std::string> process_names;
  std::set<std::tuple<int, std::string>> thread_names;
  std::set<std::tuple<int, int>> sort_indices;
  for (const nlohmann::json& event : EventsOf(trace, "M")) {
    const std::string name = event.at("name");
    if (name == "process_name") {
      process_names.push_back(event.at("args").at("name"));
    } else if (name == "thread_name") {
      thread_names.emplace(event.at("tid"), event.at("args").at("name"));
    } else if (name == "thread_sort_index") {
      sort_indices.emplace(event.at("tid"), event.at("args").at("sort_index"));
    } else {
      ADD_FAILURE() << "unexpected metadata " << event.dump();
    }
  }
  EXPECT_THAT(process_names, ElementsAre("job 7"));
  EXPECT_THAT(thread_names, ElementsAre(std::make_tuple(0, "rank 0"), std::make_tuple(1, "rank 1"),
                                        std::make_tuple(2, "rank 2")));
  EXPECT_THAT(sort_indices,
              ElementsAre(std::make_tuple(0, 0), std::make_tuple(1, 1), std::make_tuple(2, 2)));
}

TEST(PerfettoTraceTest, SlicesStartAtZeroAndCarryExactLagAndWait) {
  const nlohmann::json trace = RoundTrip(PerfettoTrace(CraftedPerfettoRows(), "job"));
  double earliest_ts = 1e300;
  for (const nlohmann::json& event : EventsOf(trace, "X")) {
    EXPECT_GE(event.at("ts").get<double>(), 0) << event.dump();
    EXPECT_GE(event.at("dur").get<double>(), 0) << event.dump();
    earliest_ts = std::min(earliest_ts, event.at("ts").get<double>());
  }
  EXPECT_EQ(earliest_ts, 0);

  const nlohmann::json late = FindSlice(trace, "collective", 0, 2);
  ASSERT_FALSE(late.is_null());
  EXPECT_EQ(late.at("name"), "allreduce ring");
  EXPECT_EQ(late.at("ts"), 4 * kTick * 1e6);
  EXPECT_EQ(late.at("dur"), 4 * kTick * 1e6);
  EXPECT_EQ(late.at("args").at("algorithm"), "ring");
  EXPECT_EQ(late.at("args").at("bytes"), 1 << 20);
  EXPECT_EQ(late.at("args").at("lag_s"), 4 * kTick);
  EXPECT_EQ(late.at("args").at("wait_s"), 0.0);
  EXPECT_FALSE(late.at("args").contains("link_bytes_per_s"));  // not known: not made up

  const nlohmann::json middle = FindSlice(trace, "collective", 0, 1);
  EXPECT_EQ(middle.at("ts"), 1 * kTick * 1e6);
  EXPECT_EQ(middle.at("args").at("lag_s"), 1 * kTick);
  EXPECT_EQ(middle.at("args").at("wait_s"), 3 * kTick);

  const nlohmann::json second = FindSlice(trace, "collective", 1, 1);
  EXPECT_EQ(second.at("name"), "allreduce stragglar");
  EXPECT_EQ(second.at("ts"), 1e6);  // one second after the earliest arrival of the trace
  EXPECT_EQ(second.at("args").at("lag_s"), 0.0);
  EXPECT_EQ(second.at("args").at("wait_s"), 2 * kTick);
}

TEST(PerfettoTraceTest, WaitSlicesNameTheLateRankAndNestInsideTheirCollective) {
  const nlohmann::json trace = RoundTrip(PerfettoTrace(CraftedPerfettoRows(), "job"));
  int waits = 0;
  for (const nlohmann::json& wait : EventsOf(trace, "X")) {
    if (wait.at("cat") != "wait") continue;
    ++waits;
    EXPECT_EQ(wait.at("name"), "wait for rank 2");
    const nlohmann::json parent =
        FindSlice(trace, "collective", wait.at("args").at("call"), wait.at("tid"));
    ASSERT_FALSE(parent.is_null()) << wait.dump();
    const double ts = wait.at("ts"), dur = wait.at("dur");
    const double parent_ts = parent.at("ts"), parent_dur = parent.at("dur");
    EXPECT_GE(ts, parent_ts);
    EXPECT_LE(ts + dur, parent_ts + parent_dur);
  }
  EXPECT_EQ(waits, 4);

  // Rank 0 in call 0 waited 4 ticks inside an 8-tick collective; rank 1 in call 1 waited 2 ticks
  // but its collective took 1, so the slice is clipped to 1.
  const nlohmann::json full = FindSlice(trace, "wait", 0, 0);
  EXPECT_EQ(full.at("ts"), 0.0);
  EXPECT_EQ(full.at("dur"), 4 * kTick * 1e6);
  EXPECT_EQ(full.at("args").at("wait_s"), 4 * kTick);
  const nlohmann::json clipped = FindSlice(trace, "wait", 1, 1);
  EXPECT_EQ(clipped.at("dur"), 1 * kTick * 1e6);
  EXPECT_EQ(clipped.at("args").at("wait_s"), 2 * kTick);
  // The last rank waited for nobody.
  EXPECT_TRUE(FindSlice(trace, "wait", 0, 2).is_null());
  EXPECT_TRUE(FindSlice(trace, "wait", 1, 2).is_null());
}

TEST(PerfettoTraceTest, ASlicesArgsCarryItsRanksLinkWhereKnown) {
  TraceRow row = Row(0, 1, 1, kTick);
  row.link_bytes_per_s = 2.5e8;
  row.link_send_bytes_per_s = 2.5e8;
  row.link_receive_bytes_per_s = 9e8;
  const nlohmann::json trace = RoundTrip(PerfettoTrace({Row(0, 0, 1, kTick), row}, "job"));
  const nlohmann::json args = FindSlice(trace, "collective", 0, 1).at("args");
  EXPECT_EQ(args.at("link_bytes_per_s"), 2.5e8);
  EXPECT_EQ(args.at("link_send_bytes_per_s"), 2.5e8);
  EXPECT_EQ(args.at("link_receive_bytes_per_s"), 9e8);
  for (const char* unknown :
       {"link_bytes_per_s", "link_send_bytes_per_s", "link_receive_bytes_per_s"}) {
    EXPECT_FALSE(FindSlice(trace, "collective", 0, 0).at("args").contains(unknown)) << unknown;
  }
}

TEST(PerfettoTraceTest, RowOrderDoesNotMatter) {
  std::vector<TraceRow> rows = CraftedPerfettoRows();
  const nlohmann::json expected = PerfettoTrace(rows, "job");
  std::mt19937 random(12345);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(rows.begin(), rows.end(), random);
    const nlohmann::json shuffled = PerfettoTrace(rows, "job");
    // The same event set, in fact the same document.
    const auto& events = shuffled.at("traceEvents");
    EXPECT_EQ(std::multiset<nlohmann::json>(events.begin(), events.end()),
              std::multiset<nlohmann::json>(expected.at("traceEvents").begin(),
                                            expected.at("traceEvents").end()));
    EXPECT_EQ(shuffled, expected);
  }
}

TEST(PerfettoTraceTest, CallWithAMissingRankUsesTheRanksPresent) {
  // Rank 1 never joined call 1; rank 0 is late there.
  const std::vector<TraceRow> rows = {
      Row(0, 0, 5.0, 4 * kTick),
      Row(0, 1, 5.0, 4 * kTick),
      Row(0, 2, 5.0 + kTick, 4 * kTick),
      Row(1, 2, 6.0, 4 * kTick),
      Row(1, 0, 6.0 + 3 * kTick, 4 * kTick),
  };
  const nlohmann::json trace = RoundTrip(PerfettoTrace(rows, "job"));
  EXPECT_TRUE(FindSlice(trace, "collective", 1, 1).is_null());
  const nlohmann::json late = FindSlice(trace, "collective", 1, 0);
  ASSERT_FALSE(late.is_null());
  EXPECT_EQ(late.at("args").at("lag_s"), 3 * kTick);
  EXPECT_EQ(late.at("args").at("wait_s"), 0.0);
  const nlohmann::json early = FindSlice(trace, "collective", 1, 2);
  EXPECT_EQ(early.at("args").at("lag_s"), 0.0);
  EXPECT_EQ(early.at("args").at("wait_s"), 3 * kTick);
  EXPECT_EQ(FindSlice(trace, "wait", 1, 2).at("name"), "wait for rank 0");
  EXPECT_EQ(FindSlice(trace, "wait", 0, 0).at("name"), "wait for rank 2");
}

TEST(PerfettoTraceTest, TieForLastNamesTheLowestRankAndBogusRowsAreSkipped) {
  const std::vector<TraceRow> rows = {
      Row(0, 0, 1.0, kTick),
      Row(0, 3, 1.0 + kTick, kTick),
      Row(0, 1, 1.0 + kTick, kTick),
      Row(0, -1, 0.5, kTick),                                      // no track for it
      Row(0, 2, std::numeric_limits<double>::quiet_NaN(), kTick),  // nowhere on the timeline
      Row(1, 0, 2.0, -1.0),                                        // drawn as an instant
  };
  const nlohmann::json trace = RoundTrip(PerfettoTrace(rows, "job"));
  EXPECT_EQ(FindSlice(trace, "wait", 0, 0).at("name"), "wait for rank 1");
  EXPECT_EQ(trace.at("otherData").at("rows"), 4);
  EXPECT_EQ(trace.at("otherData").at("time_origin_s"), 1.0);
  EXPECT_EQ(FindSlice(trace, "collective", 1, 0).at("dur"), 0.0);
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    EXPECT_NE(event.at("tid"), -1);
    EXPECT_NE(event.at("tid"), 2);
  }
}

TEST(PerfettoTraceTest, EmptyInputIsAValidEmptyTrace) {
  const nlohmann::json trace = RoundTrip(PerfettoTrace({}, "idle"));
  ASSERT_EQ(trace.at("traceEvents").size(), 1u);
  EXPECT_EQ(trace.at("traceEvents")[0].at("name"), "process_name");
  EXPECT_EQ(trace.at("otherData").at("calls"), 0);
}

// ---------------------------------------------------------------------------------------------
// Lag summary

// 3 ranks x 10 calls, call c starting at 100 + c seconds. Lags in ticks:
//   rank 0: always 0 (the earliest).
//   rank 1: 7 in call 0, 1 in calls 1 and 3, else 0.
//   rank 2: {3, 1, 4, 1, 5, 9, 2, 6, 5, 3}.
// Last arrivals: call 0 rank 1 (7 > 3); calls 1 and 3 tie (1 = 1): nobody; every other call rank 2.
// Latest lag per call: {7, 1, 4, 1, 5, 9, 2, 6, 5, 3}, sum 43.
constexpr int kRank2Lag[10] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};

std::vector<TraceRow> CraftedSummaryRows() {
  std::vector<TraceRow> rows;
  for (int call = 0; call < 10; ++call) {
    const double base = 100.0 + call;
    const int rank1_lag = call == 0 ? 7 : (call == 1 || call == 3) ? 1 : 0;
    rows.push_back(Row(call, 0, base));
    rows.push_back(Row(call, 1, base + rank1_lag * kTick));
    rows.push_back(Row(call, 2, base + kRank2Lag[call] * kTick));
  }
  return rows;
}

TEST(LagSummaryTest, ExactPerRankStatistics) {
  const LagSummary summary = SummarizeLags(CraftedSummaryRows());
  EXPECT_EQ(summary.ranks, 3);
  EXPECT_EQ(summary.calls, 10);
  ASSERT_EQ(summary.per_rank.size(), 3u);

  const RankLagStats& r0 = summary.per_rank[0];
  EXPECT_EQ(r0.rank, 0);
  EXPECT_EQ(r0.calls, 10);
  EXPECT_EQ(r0.min_s, 0);
  EXPECT_EQ(r0.median_s, 0);
  EXPECT_EQ(r0.p90_s, 0);
  EXPECT_EQ(r0.max_s, 0);
  EXPECT_EQ(r0.mean_s, 0);
  EXPECT_EQ(r0.waited_s, 43 * kTick);
  EXPECT_EQ(r0.last_fraction, 0);

  // Sorted lags 0 0 0 0 0 0 0 1 1 7: median v[4] = 0, p90 v[8] = 1.
  const RankLagStats& r1 = summary.per_rank[1];
  EXPECT_EQ(r1.rank, 1);
  EXPECT_EQ(r1.calls, 10);
  EXPECT_EQ(r1.min_s, 0);
  EXPECT_EQ(r1.median_s, 0);
  EXPECT_EQ(r1.p90_s, 1 * kTick);
  EXPECT_EQ(r1.max_s, 7 * kTick);
  EXPECT_EQ(r1.mean_s, 9 * kTick / 10);
  EXPECT_EQ(r1.waited_s, (43 - 9) * kTick);
  EXPECT_EQ(r1.last_fraction, 1.0 / 10);

  // Sorted lags 1 1 2 3 3 4 5 5 6 9: nearest-rank median v[4] = 3 (not the interpolated 3.5),
  // p90 v[8] = 6 (not 6.3).
  const RankLagStats& r2 = summary.per_rank[2];
  EXPECT_EQ(r2.rank, 2);
  EXPECT_EQ(r2.calls, 10);
  EXPECT_EQ(r2.min_s, 1 * kTick);
  EXPECT_EQ(r2.median_s, 3 * kTick);
  EXPECT_EQ(r2.p90_s, 6 * kTick);
  EXPECT_EQ(r2.max_s, 9 * kTick);
  EXPECT_EQ(r2.mean_s, 39 * kTick / 10);
  EXPECT_EQ(r2.waited_s, 4 * kTick);  // only call 0, behind rank 1
  EXPECT_EQ(r2.last_fraction, 7.0 / 10);

  // Median lag 3 ticks for rank 2, then the tie at 0 in rank order.
  EXPECT_THAT(summary.top_late, ElementsAre(2, 0, 1));
}

TEST(LagSummaryTest, PercentilesOfOddAndTinySamples) {
  // One rank late by 1..5 ticks over 5 calls (the other on time): median v[2] = 3, p90 v[4] = 5.
  std::vector<TraceRow> rows;
  for (int call = 0; call < 5; ++call) {
    rows.push_back(Row(call, 0, call));
    rows.push_back(Row(call, 1, call + (5 - call) * kTick));
  }
  const LagSummary five = SummarizeLags(rows);
  EXPECT_EQ(five.per_rank[1].median_s, 3 * kTick);
  EXPECT_EQ(five.per_rank[1].p90_s, 5 * kTick);
  EXPECT_EQ(five.per_rank[1].mean_s, 15 * kTick / 5);

  // Two values: the median is the lower one.
  const LagSummary two =
      SummarizeLags({Row(0, 0, 0), Row(0, 1, 2 * kTick), Row(1, 0, 1), Row(1, 1, 1 + 6 * kTick)});
  EXPECT_EQ(two.per_rank[1].median_s, 2 * kTick);
  EXPECT_EQ(two.per_rank[1].p90_s, 6 * kTick);
}

TEST(LagSummaryTest, RowOrderAndDuplicatesDoNotChangeTheNumbers) {
  std::vector<TraceRow> rows = CraftedSummaryRows();
  const LagSummary expected = SummarizeLags(rows);
  std::mt19937 random(7);
  std::shuffle(rows.begin(), rows.end(), random);
  // A repeated (call, rank) counts once: the first row given wins.
  const TraceRow first = rows.front();
  TraceRow duplicate = first;
  duplicate.arrival_s += 100;
  rows.push_back(duplicate);
  const LagSummary shuffled = SummarizeLags(rows);
  EXPECT_EQ(LagSummaryJson(shuffled), LagSummaryJson(expected));
}

TEST(LagSummaryTest, TopLateOrderTiesAndLimits) {
  // One call: ranks 1 and 2 tie at 5 ticks, rank 3 is latest at 6.
  const std::vector<TraceRow> rows = {Row(0, 0, 1.0), Row(0, 2, 1.0 + 5 * kTick),
                                      Row(0, 1, 1.0 + 5 * kTick), Row(0, 3, 1.0 + 6 * kTick)};
  EXPECT_THAT(SummarizeLags(rows, 3).top_late, ElementsAre(3, 1, 2));
  EXPECT_THAT(SummarizeLags(rows, 1).top_late, ElementsAre(3));
  EXPECT_THAT(SummarizeLags(rows, 10).top_late, ElementsAre(3, 1, 2, 0));
  EXPECT_THAT(SummarizeLags(rows, 0).top_late, IsEmpty());
  EXPECT_THAT(SummarizeLags(rows, -1).top_late, IsEmpty());
  const LagSummary summary = SummarizeLags(rows);
  EXPECT_EQ(summary.per_rank[3].last_fraction, 1.0);
  EXPECT_EQ(summary.per_rank[1].last_fraction, 0.0);
}

TEST(LagSummaryTest, AbsentRanksAndSingleRankCalls) {
  // Rank 1 never appears; call 1 has rank 2 alone, so nobody waited and nobody was last there.
  const std::vector<TraceRow> rows = {Row(0, 0, 3.0), Row(0, 2, 3.0 + 2 * kTick), Row(1, 2, 4.0)};
  const LagSummary summary = SummarizeLags(rows);
  EXPECT_EQ(summary.ranks, 3);
  EXPECT_EQ(summary.calls, 2);
  ASSERT_EQ(summary.per_rank.size(), 3u);
  EXPECT_EQ(summary.per_rank[1].rank, 1);
  EXPECT_EQ(summary.per_rank[1].calls, 0);
  EXPECT_EQ(summary.per_rank[1].max_s, 0);
  EXPECT_EQ(summary.per_rank[2].calls, 2);
  EXPECT_EQ(summary.per_rank[2].last_fraction, 0.5);
  EXPECT_EQ(summary.per_rank[2].median_s, 0);  // lags {0, 2 ticks}: the lower middle
  EXPECT_EQ(summary.per_rank[2].max_s, 2 * kTick);
  EXPECT_EQ(summary.per_rank[0].waited_s, 2 * kTick);
  EXPECT_THAT(summary.top_late, ElementsAre(0, 2));  // tie at median 0; rank 1 has no calls
  EXPECT_THAT(FormatLagSummary(summary), HasSubstr("   1       0           -"));
}

TEST(LagSummaryTest, EmptyInput) {
  const LagSummary summary = SummarizeLags({});
  EXPECT_EQ(summary.ranks, 0);
  EXPECT_EQ(summary.calls, 0);
  EXPECT_THAT(summary.per_rank, IsEmpty());
  EXPECT_THAT(summary.top_late, IsEmpty());
  const nlohmann::json json = LagSummaryJson(summary);
  EXPECT_EQ(json.at("calls"), 0);
  EXPECT_TRUE(json.at("per_rank").is_array() && json.at("per_rank").empty());
  EXPECT_TRUE(json.at("top_late_ranks").is_array() && json.at("top_late_ranks").empty());
  EXPECT_EQ(FormatLagSummary(summary),
            "lag summary: 0 ranks, 0 calls (lag = arrival - earliest "
            "arrival of the call)\nlate ranks: none\n");
}

TEST(LagSummaryTest, JsonFieldNames) {
  const nlohmann::json json =
      nlohmann::json::parse(LagSummaryJson(SummarizeLags(CraftedSummaryRows())).dump());
  EXPECT_EQ(json.at("ranks"), 3);
  EXPECT_EQ(json.at("calls"), 10);
  EXPECT_EQ(json.at("top_late_ranks"), nlohmann::json({2, 0, 1}));
  ASSERT_EQ(json.at("per_rank").size(), 3u);
  const nlohmann::json& r2 = json.at("per_rank")[2];
  EXPECT_EQ(r2.at("rank"), 2);
  EXPECT_EQ(r2.at("calls"), 10);
  EXPECT_EQ(r2.at("lag_s").at("min"), 1 * kTick);
  EXPECT_EQ(r2.at("lag_s").at("median"), 3 * kTick);
  EXPECT_EQ(r2.at("lag_s").at("p90"), 6 * kTick);
  EXPECT_EQ(r2.at("lag_s").at("max"), 9 * kTick);
  EXPECT_EQ(r2.at("lag_s").at("mean"), 39 * kTick / 10);
  EXPECT_EQ(r2.at("waited_s"), 4 * kTick);
  EXPECT_EQ(r2.at("last_fraction"), 0.7);
  EXPECT_EQ(r2.size(), 5u);
  EXPECT_EQ(r2.at("lag_s").size(), 5u);
}

TEST(LagSummaryTest, FormatShowsTheLateRanksLineAndTable) {
  const std::string text = FormatLagSummary(SummarizeLags(CraftedSummaryRows()));
  // 3/1024 s = 2.93 ms median, 6/1024 = 5.86 ms p90, 9/1024 = 8.79 ms max, waited 4/1024.
  EXPECT_THAT(text, HasSubstr("rank   calls      median         p90         max      waited  "
                              "last %\n"));
  EXPECT_THAT(
      text, HasSubstr("\n   2      10     2.93 ms     5.86 ms     8.79 ms     3.91 ms   70.0%\n"));
  EXPECT_THAT(
      text, HasSubstr("\n   0      10         0 s         0 s         0 s       42 ms    0.0%\n"));
  // Ranks 0 and 1 have median 0: in top_late, but not worth calling late.
  EXPECT_THAT(text, HasSubstr("\nlate ranks: 2 (median 2.93 ms)\n"));
}

}  // namespace
}  // namespace stragglar
