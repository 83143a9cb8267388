// Runs the real `stragglar` binary: contract output formats and one-line errors for bad input.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/plan.h"
#include "kernels/plan/verifier.h"
#include "kernels/synth/synthesizers.h"
#include "nlohmann/json.hpp"
#include "runtime/agreed_settings.h"
#include "tests/cli_runner.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(CliTest, PlanJsonFollowsTheContractAndVerifies) {
  for (const char* args : {"plan --algorithm stragglar --ranks 8 --json",
                           "plan --algorithm stragglar --ranks 6 --straggler 2 --json",
                           "plan --algorithm ring --ranks 5 --json",
                           "plan --algorithm halving-doubling --ranks 7 --json"}) {
    CliResult result = RunCli(args);
    ASSERT_EQ(result.exit_code, 0) << args << ": " << result.err;
    const nlohmann::json json = nlohmann::json::parse(result.out);
    for (const char* key : {"algorithm", "ranks", "straggler", "chunks", "rounds"}) {
      EXPECT_TRUE(json.contains(key)) << args << " lacks " << key;
    }
    absl::StatusOr<Plan> plan = PlanFromJson(json);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(VerifyPlan(*plan).ok()) << args;
  }
  const nlohmann::json json =
      nlohmann::json::parse(RunCli("plan --algorithm stragglar --ranks 8 --json").out);
  EXPECT_EQ(json["straggler"], 7);
  EXPECT_EQ(json["chunks"], 7);
  EXPECT_TRUE(
      nlohmann::json::parse(RunCli("plan --algorithm ring --ranks 5 --json").out)["straggler"]
          .is_null());
}

TEST(CliTest, PlanTableShowsPhasesAndTheLowerBound) {
  CliResult result = RunCli("plan --algorithm stragglar --ranks 8 --straggler 3");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("rounds: 15 (6 pre-arrival, 9 post-arrival; lower bound 9)"));
  EXPECT_THAT(result.out, HasSubstr("post"));
}

TEST(CliTest, SimJsonFollowsTheContract) {
  CliResult result = RunCli(
      "sim --ranks 8 --bytes 1GiB --alpha 3us --bandwidth 450GiB/s --delay 20ms --straggler 5 "
      "--json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["ranks"], 8);
  EXPECT_EQ(json["bytes"], 1 << 30);
  EXPECT_DOUBLE_EQ(json["alpha_s"].get<double>(), 3e-6);
  EXPECT_DOUBLE_EQ(json["bandwidth_Bps"].get<double>(), 450.0 * (1LL << 30));
  EXPECT_DOUBLE_EQ(json["delay_s"].get<double>(), 0.02);
  EXPECT_EQ(json["straggler"], 5);
  ASSERT_EQ(json["results"].size(), 4u);
  for (const nlohmann::json& row : json["results"]) {
    EXPECT_GT(row["rounds"].get<int>(), 0);
    // completion counts from the first arrival, after_last_arrival from the straggler's.
    EXPECT_NEAR(row["completion_s"].get<double>() - row["after_last_arrival_s"].get<double>(), 0.02,
                1e-12);
  }
  EXPECT_EQ(json["results"][2]["algorithm"], "stragglar");
  EXPECT_EQ(json["results"][2]["post_arrival_rounds"], 9);
  // Each result's family: what NCCL or MPI would run, or a plan that uses the straggler's delay.
  EXPECT_EQ(json["results"][0]["family"], "baseline");
  EXPECT_EQ(json["results"][1]["family"], "baseline");
  EXPECT_EQ(json["results"][2]["family"], "stragglar");
  EXPECT_TRUE(json["break_even_delay_s"].contains("ring"));
  // Log-depth StragglAR, with the block count chosen for the size: at n = 8 it takes exactly its
  // bound, K - 1 + log2 8 post-arrival rounds.
  const nlohmann::json& log_depth = json["results"][3];
  EXPECT_EQ(log_depth["algorithm"], "stragglar-log-depth");
  EXPECT_EQ(log_depth["family"], "stragglar");
  const int blocks = log_depth["blocks"].get<int>();
  EXPECT_TRUE(blocks == 32 || blocks == 64) << blocks;  // either side of sqrt(3 S beta / alpha)
  EXPECT_EQ(log_depth["post_arrival_rounds"], blocks + 2);
  EXPECT_TRUE(log_depth["break_even_delay_s"].contains("halving-doubling"));
}

TEST(CliTest, PlanPrintsLogDepthStragglar) {
  CliResult table = RunCli("plan --algorithm stragglar-log-depth --ranks 8 --pieces 4");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("8 ranks, 4 chunks, straggler 7, log-depth, 4 blocks"));
  // Halving-Doubling among 7 ready ranks (6 rounds), then the broadcast at its bound 4 - 1 + 3.
  EXPECT_THAT(table.out, HasSubstr("rounds: 12 (6 pre-arrival, 6 post-arrival; lower bound 6)"));
  CliResult json = RunCli(
      "plan --algorithm stragglar-log-depth --ranks 13 --straggler 2 "
      "--pieces 8 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["variant"], "log-depth");
  EXPECT_EQ(parsed["blocks"], 8);
  EXPECT_EQ(parsed["straggler"], 2);
  EXPECT_EQ(RunCli("verify --plan -", json.out).exit_code, 0);
}

TEST(CliTest, SimAtScaleLeavesFlatStragglarOutByDefaultAndSaysSo) {
  // Above 1024 ranks the flat plan (millions of transfers) is not priced unless asked for; Ring is
  // priced by its ring run, without its transfers.
  CliResult json = RunCli("sim --ranks 1025 --bytes 1MiB --delay 1s --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json parsed = nlohmann::json::parse(json.out);
  std::vector<std::string> algorithms;
  for (const nlohmann::json& result : parsed["results"]) {
    algorithms.push_back(result["algorithm"]);
  }
  EXPECT_THAT(algorithms, ElementsAre("ring", "halving-doubling", "stragglar-log-depth"));
  CliResult table = RunCli("sim --ranks 1025 --bytes 1MiB --delay 1s");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("flat stragglar is left out above 1024 ranks"));
  EXPECT_THAT(table.out, HasSubstr("--algorithms stragglar prices it"));
  // Asked for, it is there, and the note is not.
  CliResult asked = RunCli("sim --ranks 1025 --bytes 1MiB --delay 1s --algorithms ring,stragglar");
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_THAT(asked.out, HasSubstr("\nstragglar "));
  EXPECT_THAT(asked.out, Not(HasSubstr("left out")));
}

TEST(CliTest, SimTableNamesTheBreakEvenDelay) {
  CliResult result = RunCli("sim --ranks 8 --bytes 16MiB --algorithms ring,stragglar");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("break-even vs ring: stragglar wins when the straggler is"));
}

TEST(CliTest, VerifyAcceptsGoodPlansAndExplainsBadOnes) {
  const std::string plan = RunCli("plan --algorithm stragglar --ranks 6 --json").out;
  CliResult good = RunCli("verify --plan -", plan);
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_THAT(good.out, StartsWith("ok: stragglar plan for 6 ranks"));
  // stdin as "-": nothing on stderr (absl warned "RAW: Did you really mean to set flag 'plan' to
  // the value '-'?").
  EXPECT_EQ(good.err, "");
  nlohmann::json broken = nlohmann::json::parse(plan);
  broken["rounds"].erase(broken["rounds"].size() - 1);
  CliResult bad = RunCli("verify --plan -", broken.dump());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("plan is incorrect: incomplete"));
  CliResult garbage = RunCli("verify --plan -", "{not json");
  EXPECT_NE(garbage.exit_code, 0);
  EXPECT_THAT(garbage.err, HasSubstr("not valid JSON"));
  CliResult missing = RunCli("verify --plan /nonexistent/plan.json");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.err, HasSubstr("cannot open plan file"));
  // A directory: one line, where reading it threw out of the stream (an uncaught exception).
  const std::string dir = ::testing::TempDir();
  CliResult directory = RunCli(absl::StrCat("verify --plan ", dir));
  EXPECT_NE(directory.exit_code, 0);
  EXPECT_THAT(directory.err,
              HasSubstr(absl::StrCat("cannot open plan file ", dir, ": Is a directory")));
  EXPECT_EQ(std::count(directory.err.begin(), directory.err.end(), '\n'), 1) << directory.err;
}

TEST(CliTest, PipelinedPlansPrintAndVerify) {
  CliResult plan = RunCli("plan --algorithm stragglar --ranks 4 --straggler 1 --pieces 4 --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const nlohmann::json json = nlohmann::json::parse(plan.out);
  EXPECT_EQ(json["chunks"], 12);
  EXPECT_EQ(json["straggler"], 1);
  EXPECT_EQ(json["rounds"].size(), 2u + 13u);  // 3k + 1 = 13 rounds after arrival
  CliResult verified = RunCli("verify --plan -", plan.out);
  EXPECT_EQ(verified.exit_code, 0) << verified.err;
  EXPECT_THAT(verified.out, StartsWith("ok: stragglar plan for 4 ranks"));
}

TEST(CliTest, PlanTableNamesRunsOfChunksByTheirEnds) {
  // Halving-Doubling on 6 ranks sends pairs of chunks; StragglAR in 3 pieces per chunk sends runs
  // of three, named by their first and last.
  CliResult pairs = RunCli("plan --algorithm halving-doubling --ranks 6");
  ASSERT_EQ(pairs.exit_code, 0) << pairs.err;
  EXPECT_THAT(pairs.out, HasSubstr("0->4 +c0,1  4->0 +c2,3"));
  EXPECT_THAT(pairs.out, HasSubstr("4->5 +c1  5->4 +c0"));
  CliResult runs = RunCli("plan --algorithm stragglar --ranks 4 --pieces 3");
  ASSERT_EQ(runs.exit_code, 0) << runs.err;
  EXPECT_THAT(runs.out, HasSubstr("cK-L is chunks K to L"));
  EXPECT_THAT(runs.out, HasSubstr("0->1 +c6-8  1->2 +c0-2  2->0 +c3-5"));
}

TEST(CliTest, RoundsTableComparesWithTheLowerBound) {
  CliResult result = RunCli("rounds --min-ranks 2 --max-ranks 9 --verify --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  ASSERT_EQ(json["rows"].size(), 8u);
  EXPECT_EQ(json["rows"][6]["ranks"], 8);
  EXPECT_EQ(json["rows"][6]["lower_bound"], 9);
  EXPECT_EQ(json["rows"][6]["ring_rounds"], 14);
  EXPECT_EQ(json["rows"][6]["halving_doubling_rounds"], 6);
  EXPECT_EQ(json["misses"], 0);
}

// Each bad input: non-zero exit, nothing on stdout, and one line on stderr that says what is wrong.
TEST(CliTest, BadInputGetsOneClearLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plan --algorithm ring --ranks 1", "--ranks must be at least 2"},
      {"plan --algorithm tree --ranks 4", "unknown algorithm \"tree\""},
      {"plan --ranks 4", "--algorithm is required"},
      {"plan --algorithm stragglar --ranks 4 --straggler 4", "--straggler 4 is outside [0, 3]"},
      {"plan --algorithm stragglar --ranks 4 --straggler x", "--straggler must be a rank index"},
      {"plan --algorithm ring --ranks 4 --straggler 1", "applies to --algorithm stragglar only"},
      {"plan --algorithm ring --ranks 4 --bytes 1MiB", "--bytes does not apply"},
      {"plan --algorithm ring --ranks 4 --pieces 2", "--pieces applies to --algorithm stragglar"},
      {"plan --algorithm stragglar --ranks 4 --pieces 0", "got 4 ranks x 0 pieces"},
      {"plan --algorithm stragglar --ranks 40 --pieces 8", "1 to 128 pieces in all"},
      {"sim --ranks 4", "--bytes is required"},
      {"sim --bytes 1MiB", "--ranks is required"},
      {"sim --ranks 4 --bytes 12XB", "malformed size \"12XB\""},
      {"sim --ranks 4 --bytes 1MiB --delay 3", "malformed time \"3\""},
      {"sim --ranks 4 --bytes 1MiB --delay -3ms", "--delay must not be negative"},
      {"sim --ranks 4 --bytes 1MiB --bandwidth 10GiB", "malformed bandwidth"},
      {"sim --ranks 4 --bytes 1MiB --algorithms ring,tree", "unknown algorithm \"tree\""},
      {"sim --ranks 4 --bytes 1MiB --frobnicate", "Unknown command line flag 'frobnicate'"},
      {"sim --topology 4 --bytes 1MiB", "--topology: topology \"4\" is not NxG"},
      {"plan --algorithm halving-doubling --topology 2x4",
       "--topology applies to --algorithm stragglar and ring only"},
      {"plan --algorithm stragglar --topology 3x4 --pieces 128",
       "flat rails over 3 nodes take at most 64 pieces per chunk"},
      {"plan --algorithm stragglar --topology 2x4 --straggler 8",
       "--straggler 8 is outside [0, 7]"},
      {"plan --algorithm stragglar --topology 2x4 --ranks 4", "--ranks 4 disagrees"},
      {"plan --algorithm stragglar-log-depth --ranks 4 --pieces 3", "must be a power of two"},
      {"plan --algorithm stragglar-log-depth --topology 2x2 --pieces 3", "must be a power of two"},
      {"sim --topology 1x1 --bytes 1MiB", "has one rank"},
      {"sim --topology 2x4 --ranks 6 --bytes 1MiB", "--ranks 6 disagrees with --topology 2x4"},
      {"sim --ranks 4 --bytes 1MiB --inter-alpha 5us", "need --topology NxG"},
      {"sim --topology 2x2 --bytes 1MiB --inter-alpha -5us", "--inter-alpha must not be negative"},
      {"sim --topology 2x2 --bytes 1MiB --straggler 4", "--straggler 4 is outside [0, 3]"},
      {"sim --topology 2x2 --bytes 1MiB --algorithms nccl-ring,nccl-ring", "listed twice"},
      {"rounds --min-ranks 1", "need 2 <= --min-ranks"},
      {"frobnicate", "unknown command \"frobnicate\""},
      {"plan --algorithm ring --ranks 4 extra", "unexpected argument \"extra\""},
  };
  for (const auto& [args, message] : cases) {
    CliResult result = RunCli(args);
    EXPECT_NE(result.exit_code, 0) << args;
    EXPECT_THAT(result.err, HasSubstr(message)) << args;
    if (args != "frobnicate") {
      EXPECT_EQ(result.out, "") << args;
      EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << args << result.err;
    }
  }
}

// A small, fast configuration of the main job: the contract's summary and trace, exact results.
TEST(CliTest, RunWritesTheSummaryAndTraceContracts) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "run";
  std::filesystem::create_directories(dir);
  CliResult result = RunCli(absl::StrCat(
      "run --ranks 4 --straggler 2 --delay 6ms --bytes 256KiB --iterations 48 --epoch-calls 16 "
      "--seed 7 --summary-json ",
      (dir / "summary.json").string(), " --trace ", (dir / "trace.csv").string(), " --trace-json ",
      (dir / "trace.json").string()));
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  EXPECT_THAT(result.out, HasSubstr("adaptive  epoch 3/3"));
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["ranks"], 4);
  EXPECT_EQ(summary["injected_straggler"], 2);
  EXPECT_EQ(summary["detected_straggler"], 2);
  EXPECT_EQ(summary["iterations"], 48);
  EXPECT_EQ(summary["bytes"], 256 * 1024);
  EXPECT_EQ(summary["correct"], true);
  EXPECT_EQ(summary["baseline"]["algorithm"], "ring");
  // run's own default candidates, not sim's: the speedup is StragglAR's alone.
  EXPECT_EQ(summary["candidates"], nlohmann::json::parse(R"(["ring", "stragglar"])"));
  int calls = 0;
  for (const auto& [algorithm, count] : summary["algorithm_counts"].items()) {
    calls += count.get<int>();
  }
  EXPECT_EQ(calls, 48);
  for (const char* phase : {"adaptive", "baseline"}) {
    for (const char* key : {"mean_s", "p50_s", "p99_s"}) {
      EXPECT_GT(summary[phase][key].get<double>(), 0) << phase << " " << key;
    }
  }
  EXPECT_NEAR(
      summary["speedup"].get<double>(),
      summary["baseline"]["mean_s"].get<double>() / summary["adaptive"]["mean_s"].get<double>(),
      1e-9);
  // Latency counts from the last arrival; the span, from the first, is never shorter.
  EXPECT_EQ(summary["latency"], "last completion - last arrival");
  const nlohmann::json& span = summary["span"];
  EXPECT_GE(span["baseline_mean_s"].get<double>(), summary["baseline"]["mean_s"].get<double>());
  EXPECT_GE(span["adaptive_mean_s"].get<double>(), summary["adaptive"]["mean_s"].get<double>());
  EXPECT_NEAR(span["speedup"].get<double>(),
              span["baseline_mean_s"].get<double>() / span["adaptive_mean_s"].get<double>(), 1e-9);
  const std::string trace = ReadFile(dir / "trace.csv");
  EXPECT_THAT(trace, StartsWith("call,rank,arrival_s,duration_s,bytes,algorithm,link_bytes_per_s,"
                                "link_send_bytes_per_s,link_receive_bytes_per_s\n"));
  EXPECT_EQ(std::count(trace.begin(), trace.end(), '\n'), 1 + 48 * 4);
  // The trace is the adaptive phase's: its per-call latencies average to the summary's mean.
  std::vector<double> last_arrival(48, 0), last_completion(48, 0);
  for (absl::string_view line : absl::StrSplit(trace, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> fields = absl::StrSplit(line, ',');
    int call;
    double arrival, duration;
    if (!absl::SimpleAtoi(fields[0], &call)) continue;  // the header
    ASSERT_TRUE(absl::SimpleAtod(fields[2], &arrival) && absl::SimpleAtod(fields[3], &duration));
    last_arrival[call] = std::max(last_arrival[call], arrival);
    last_completion[call] = std::max(last_completion[call], arrival + duration);
  }
  double total = 0;
  for (int call = 0; call < 48; ++call) total += last_completion[call] - last_arrival[call];
  // The trace prints 9 decimals, so the recomputed mean agrees to about 1e-9 s.
  EXPECT_NEAR(total / 48, summary["adaptive"]["mean_s"].get<double>(), 1e-8);

  // Replaying the trace through the same runtime core names the same straggler at the same call.
  result = RunCli(
      absl::StrCat("replay --trace ", (dir / "trace.csv").string(), " --epoch-calls 16 --json"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json replay = nlohmann::json::parse(result.out);
  EXPECT_EQ(replay["ranks"], 4);
  EXPECT_EQ(replay["calls"], 48);
  const nlohmann::json& online = summary["stragglers"];
  ASSERT_EQ(online.size(), 1u) << summary.dump(2);
  ASSERT_EQ(replay["stragglers"].size(), 1u) << replay.dump(2);
  EXPECT_EQ(online[0]["rank"], 2);
  EXPECT_EQ(replay["stragglers"][0]["rank"], online[0]["rank"]);
  EXPECT_EQ(replay["stragglers"][0]["detected_at_call"], online[0]["detected_at_call"]);
  EXPECT_EQ(replay["stragglers"][0]["persistence"], online[0]["persistence"]);
  EXPECT_NEAR(replay["stragglers"][0]["mean_lag_s"].get<double>(),
              online[0]["mean_lag_s"].get<double>(), 1e-8);
  // Replayed as the NCCL preload exchanges epochs (deferred): absorbed an epoch later, so of the
  // three epochs only the first is in by the last call, which names nobody yet.
  result = RunCli(absl::StrCat("replay --trace ", (dir / "trace.csv").string(),
                               " --epoch-calls 16 --exchange deferred --json"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json deferred = nlohmann::json::parse(result.out);
  EXPECT_EQ(deferred["exchange"], "deferred");
  EXPECT_EQ(replay["exchange"], "immediate");
  // Lags as each exchange's preload takes them, unless --lags says otherwise.
  EXPECT_EQ(deferred["lags"], "duration");
  EXPECT_EQ(replay["lags"], "arrival");
  EXPECT_TRUE(deferred["stragglers"].empty()) << deferred.dump(2);
  // And the same algorithm mix as the online run.
  EXPECT_EQ(replay["decisions"][std::to_string(256 * 1024)]["mix"]["stragglar"],
            summary["algorithm_counts"]["stragglar"]);

  // The end-of-run lag summary names the late rank first, in the log and in the file.
  const nlohmann::json& lags = summary["lags"];
  EXPECT_EQ(lags["calls"], 48);
  ASSERT_EQ(lags["per_rank"].size(), 4u);
  EXPECT_EQ(lags["top_late_ranks"][0], 2);
  EXPECT_GT(lags["per_rank"][2]["last_fraction"].get<double>(), 0.5);
  EXPECT_GT(lags["per_rank"][0]["waited_s"].get<double>(),
            lags["per_rank"][2]["waited_s"].get<double>());

  // The Perfetto trace: one track per rank, one slice per rank and call.
  const nlohmann::json perfetto = nlohmann::json::parse(ReadFile(dir / "trace.json"));
  int slices = 0, tracks = 0;
  for (const nlohmann::json& event : perfetto["traceEvents"]) {
    if (event["ph"] == "X" && event["cat"] == "collective") ++slices;
    if (event["ph"] == "M" && event["name"] == "thread_name") ++tracks;
  }
  EXPECT_EQ(slices, 48 * 4);
  EXPECT_EQ(tracks, 4);
}

TEST(CliTest, ReplayAndScenariosRejectBadInput) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "replay";
  std::filesystem::create_directories(dir);
  const std::filesystem::path bad = dir / "bad.csv";
  std::ofstream(bad) << "call,rank,arrival_s\n0,0,0.5\n0,1,0.6\nnot,a,row\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"replay", "--trace is required"},
      {absl::StrCat("replay --trace ", bad.string()),
       absl::StrCat(bad.string(), ":4: call must be a non-negative integer, got \"not\"")},
      {absl::StrCat("replay --trace ", (dir / "missing.csv").string()), "cannot read the trace"},
      {absl::StrCat("replay --trace ", dir.string()),
       absl::StrCat("cannot read the trace ", dir.string(), ": Is a directory")},
      {"replay --trace x.csv --bytes 1MiB", "--bytes does not apply to 'stragglar replay'"},
      {"replay --trace x.csv --exchange sideways",
       "--exchange must be immediate or deferred, got \"sideways\""},
      {"replay --trace x.csv --lags sideways",
       "--lags must be arrival or duration, got \"sideways\""},
      {"scenarios --ranks 1", "--ranks must be in [2, 64] for the suite, got 1"},
      {"scenarios --calls 0", "--calls and --noise-calls must be at least 1"},
      {"scenarios --trace x.csv", "--trace does not apply to 'stragglar scenarios'"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult result = RunCli(args);
    EXPECT_NE(result.exit_code, 0) << args;
    EXPECT_THAT(result.err, HasSubstr(message)) << args;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << args << result.err;
  }
  // From stdin: a file cut inside a number is refused (it read as 0), in one line (absl added a
  // "RAW: Did you really mean ..." line for "--trace -").
  const CliResult cut = RunCli("replay --trace -", "call,rank,arrival_s\n0,0,0.1\n1,1,0.");
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_EQ(cut.err,
            "stragglar replay: <stdin>:3: arrival_s must be a finite number, got \"0.\"\n");
}

TEST(CliTest, RunWithoutAStragglerFlagsNobody) {
  CliResult result = RunCli(
      "run --ranks 3 --straggler none --bytes 64KiB --iterations 32 --epoch-calls 16 --json", "");
  // --json does not apply to run: rejected before anything runs.
  EXPECT_NE(result.exit_code, 0);
  result = RunCli("run --ranks 3 --straggler none --bytes 64KiB --iterations 32 --epoch-calls 16");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("straggler detected: none"));
  EXPECT_THAT(result.out, HasSubstr("results correct on every rank and step"));
}

// 64 ranks of int8: the sums leave int8's range and must wrap exactly as the reference does.
// The default straggler is rank 5; with fewer ranks, the last (it failed on its own default).
TEST(CliTest, RunWithFewRanksMakesItsLastRankTheDefaultStraggler) {
  const CliResult result = RunCli("run --ranks 4 --bytes 64KiB --iterations 8 --epoch-calls 4");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("rank 3 late by"));
  EXPECT_THAT(result.out, HasSubstr("results correct on every rank and step"));
  const CliResult outside = RunCli("run --ranks 4 --straggler 5 --iterations 8");
  EXPECT_NE(outside.exit_code, 0);
  EXPECT_THAT(outside.err, HasSubstr("--straggler 5 is outside [0, 3] for 4 ranks"));
}

TEST(CliTest, RunWrapsNarrowIntegersLikeTheReference) {
  CliResult result = RunCli(
      "run --ranks 64 --dtype int8 --bytes 640B --iterations 4 --epoch-calls 4 --straggler none");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("results correct on every rank and step"));
}

TEST(CliTest, RunRejectsBadOptions) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run --ranks 1", "--ranks must be in [2, 64]"},
      {"run --ranks 4 --straggler 4", "--straggler 4 is outside [0, 3]"},
      {"run --straggler soon", "--straggler must be a rank index or \"none\""},
      {"run --bytes 6B", "--bytes must be a multiple of 4"},
      {"run --iterations 0", "--iterations must be at least 1"},
      {"run --dtype float128", "unknown data type \"float128\""},
      {"run --delay -1ms", "--delay must not be negative"},
      {"run --algorithms halving-doubling,ring", "--algorithms must start with ring"},
      {"run --algorithms ring,fastest", "unknown algorithm \"fastest\""},
      // Checked before the run starts, not after it.
      {"run --summary-json /nonexistent-dir/summary.json", "cannot write the summary file"},
      {"run --trace /nonexistent-dir/trace.csv", "cannot write the trace file"},
      {"run --trace-json /nonexistent-dir/trace.json", "cannot write the trace JSON file"},
      {"run --metrics-port 70000", "--metrics-port must be in [0, 65535], got 70000"},
      {"run --topology 2x4 --ranks 4", "--ranks 4 disagrees with --topology 2x4"},
      {"run --ranks 4 --inter-alpha 5us", "need --topology NxG"},
      {"run --topology 2x2 --inter-bandwidth 0GB/s", "bandwidth"},
  };
  for (const auto& [args, message] : cases) {
    CliResult result = RunCli(args);
    EXPECT_NE(result.exit_code, 0) << args;
    EXPECT_THAT(result.err, HasSubstr(message)) << args;
  }
}

// Metrics are optional: a port in use or a bad STRAGGLAR_METRICS_PORT costs one log line, not the
// job.
TEST(CliTest, RunWithoutItsMetricsEndpointLogsOnceAndContinues) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  const std::string run =
      "run --ranks 3 --straggler 2 --bytes 64KiB --iterations 8 --epoch-calls 4";
  CliResult result = RunCli(absl::StrCat(run, " --metrics-port ", port));
  close(listener);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.err, HasSubstr(absl::StrCat("cannot serve metrics on 127.0.0.1:", port)));
  EXPECT_THAT(result.err, HasSubstr("running without metrics"));
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_THAT(result.out, HasSubstr("results correct on every rank and step"));

  setenv("STRAGGLAR_METRICS_PORT", "ninety", 1);
  result = RunCli(run);
  unsetenv("STRAGGLAR_METRICS_PORT");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.err, HasSubstr("STRAGGLAR_METRICS_PORT=\"ninety\" is invalid"));
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_THAT(result.out, Not(HasSubstr("metrics: http")));
}

// `stragglar doctor` with a port out of range: its [fail] line, and no [ok] line calling the port
// unset (it printed both).
TEST(CliTest, DoctorFailsABadMetricsPortWithoutCallingItUnset) {
  setenv("STRAGGLAR_METRICS_PORT", "99999", 1);
  const CliResult bad = RunCli("doctor --preload any");
  unsetenv("STRAGGLAR_METRICS_PORT");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.out, HasSubstr("[fail] setting stragglar: STRAGGLAR_METRICS_PORT=\"99999\" is "
                                 "invalid: it accepts a port number in [1, 65535]"));
  EXPECT_THAT(bad.out, Not(HasSubstr("metrics: STRAGGLAR_METRICS_PORT unset")));
  const CliResult unset = RunCli("doctor --preload any");
  EXPECT_THAT(unset.out, HasSubstr("[ok]   metrics: STRAGGLAR_METRICS_PORT unset"));
}

// `stragglar doctor` cannot see the other hosts; it prints the digest of the settings rank 0
// would send, to compare across them: the same here as AgreedSettingsFingerprint, and another one
// where an agreed setting differs.
TEST(CliTest, DoctorPrintsTheAgreedSettingsFingerprint) {
  const CliResult plain = RunCli("doctor --preload any");
  EXPECT_THAT(plain.out, HasSubstr(absl::StrCat("[ok]   agreed settings: fingerprint ",
                                                AgreedSettingsFingerprint(PreloadConfig()),
                                                " (compare it across the job's hosts")));
  setenv("STRAGGLAR_EPOCH_CALLS", "16", 1);
  const CliResult other = RunCli("doctor --preload any");
  unsetenv("STRAGGLAR_EPOCH_CALLS");
  EXPECT_THAT(other.out, Not(HasSubstr(AgreedSettingsFingerprint(PreloadConfig()))));
  EXPECT_THAT(other.out, HasSubstr("agreed settings: fingerprint "));
}

// `stragglar doctor` checks where the preloads would write: a directory or a FIFO as a file, a
// missing directory, and a path it can write.
TEST(CliTest, DoctorChecksTheOutputPaths) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "doctor-paths";
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "fifo").string();
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  setenv("STRAGGLAR_STATE_FILE", fifo.c_str(), 1);
  setenv("STRAGGLAR_TRACE_FILE", "/nonexistent-dir/trace.csv", 1);
  setenv("STRAGGLAR_SUMMARY_FILE", dir.string().c_str(), 1);
  setenv("STRAGGLAR_PIPELINE_ADVICE_FILE", (dir / "advice.json").string().c_str(), 1);
  const CliResult result = RunCli("doctor --preload any");
  for (const char* name : {"STRAGGLAR_STATE_FILE", "STRAGGLAR_TRACE_FILE", "STRAGGLAR_SUMMARY_FILE",
                           "STRAGGLAR_PIPELINE_ADVICE_FILE"}) {
    unsetenv(name);
  }
  std::remove(fifo.c_str());
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr(absl::StrCat("[fail] output: STRAGGLAR_STATE_FILE=", fifo,
                                                 " is not a regular file\n")));
  EXPECT_THAT(result.out, HasSubstr("[fail] output: STRAGGLAR_TRACE_FILE=/nonexistent-dir/"
                                    "trace.csv: its directory /nonexistent-dir does not exist\n"));
  EXPECT_THAT(result.out, HasSubstr(absl::StrCat("[fail] output: STRAGGLAR_SUMMARY_FILE=",
                                                 dir.string(), " is not a regular file\n")));
  EXPECT_THAT(result.out,
              HasSubstr(absl::StrCat("[ok]   output: STRAGGLAR_PIPELINE_ADVICE_FILE=",
                                     (dir / "advice.json").string(), " is writable\n")));
}

// `stragglar pipeline --json`: default, adapted and best, each with its counts, iteration time
// and bubble fraction, consistent with each other (best is no slower than the others) and with
// the repeated --link-delay flags all applied.
TEST(CliTest, PipelineJsonComparesDefaultAdaptedAndBest) {
  const CliResult result = RunCli(
      "pipeline --stages 4 --microbatches 8 --forward 10ms --backward 20ms "
      "--link-delay 1-2:30ms --link-delay 3-2:5ms --memory-microbatches 6 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  for (const char* name : {"default", "adapted", "best"}) {
    ASSERT_TRUE(json.contains(name)) << result.out;
    EXPECT_EQ(json[name]["warmup"].size(), 4u);
    for (int w : json[name]["warmup"]) EXPECT_LE(w, 6) << name;
    EXPECT_GT(json[name]["iteration_s"].get<double>(), 0);
    EXPECT_GE(json[name]["bubble_fraction"].get<double>(), 0);
    EXPECT_LE(json["best"]["iteration_s"].get<double>(),
              json[name]["iteration_s"].get<double>() * (1 + 1e-12));
  }
  EXPECT_EQ(json["default"]["warmup"], nlohmann::json({4, 3, 2, 1}));
  // Last stage 1; stage 2: 1 + ceil(5 / 10) + 2; stage 1: 4 + 3 + 2; stage 0: 9 + 0 + 2; each
  // capped at 6 - i.
  EXPECT_EQ(json["adapted"]["warmup"], nlohmann::json({6, 5, 4, 1}));
  EXPECT_GE(json["best"]["iteration_s"].get<double>(), json["lower_bound_s"].get<double>());
}

// --blocking-sends reaches the simulator: the schedule worked by hand in pipeline_test (2 stages,
// 2 micro-batches, forward 1 s, backward 2 s, link 1 s) takes 11 s, and 12 s when sends hold
// their stage.
TEST(CliTest, PipelineBlockingSendsHoldTheSender) {
  const std::string args =
      "pipeline --stages 2 --microbatches 2 --forward 1s --backward 2s --link-delay 0-1:1s --json";
  for (const auto& [flag, expected] :
       std::vector<std::pair<std::string, double>>{{"", 11}, {" --blocking-sends", 12}}) {
    const CliResult result = RunCli(args + flag);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const nlohmann::json json = nlohmann::json::parse(result.out);
    EXPECT_DOUBLE_EQ(json["default"]["iteration_s"].get<double>(), expected) << flag;
  }
}

TEST(CliTest, PipelineRejectsBadInputInOneLine) {
  const std::string base = "pipeline --microbatches 8 --forward 10ms --backward 20ms ";
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {base, "--stages is required"},
           {base + "--stages 1", "--stages must be in [2, 1024], got 1"},
           {base + "--stages 4 --link-delay 1-3:30ms", "a link joins adjacent stages in [0, 3]"},
           {base + "--stages 4 --link-delay 1-2", "expected I-J:DELAY, e.g. 3-4:30ms"},
           {base + "--stages 4 --link-delay 1-2:-3ms", "must not be negative"},
           {base + "--stages 4 --memory-microbatches -1", "--memory-microbatches must be >= 0"},
           {"pipeline --stages 4 --microbatches 8 --forward 10ms,5ms --backward 20ms",
            "--forward has 2 times for 4 stages"},
           {"pipeline --stages 4 --microbatches 8 --forward 10ms", "--backward is required"},
           {"pipeline --stages 4 --microbatches 8 --forward 0ms --backward 1ms",
            "--forward: times must be positive"},
       }) {
    const CliResult result = RunCli(args);
    EXPECT_NE(result.exit_code, 0) << args;
    EXPECT_THAT(result.err, HasSubstr(message)) << args;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_EQ(result.out, "") << args;
  }
}

// `stragglar pipeline-run`: the emulated job names the slow link once its delay starts (the
// transfers' times are the emulated link's, so the verdict does not depend on the machine's
// noise) and writes the advice file; applied, the advice changes the counts the job runs.
TEST(CliTest, PipelineRunNamesTheSlowLinkAndWritesAdvice) {
  const std::string advice =
      (std::filesystem::path(::testing::TempDir()) / absl::StrCat("advice-", getpid(), ".json"))
          .string();
  const CliResult result = RunCli(
      "pipeline-run --stages 3 --microbatches 8 --forward 1ms --backward 2ms --link-delay 0-1:5ms "
      "--iterations 8 --delay-from 3 --apply-advice --advice-file " +
      advice);
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  EXPECT_THAT(result.out, HasSubstr("iteration 1/8: "));
  EXPECT_THAT(result.out, HasSubstr("mean iteration: "));
  const nlohmann::json json = nlohmann::json::parse(ReadFile(advice));
  EXPECT_EQ(json["slow_link"], nlohmann::json({{"src", 0}, {"dst", 1}}));
  EXPECT_NEAR(json["delay_s"].get<double>(), 0.005, 1e-4);  // the baseline drifts up slowly
  EXPECT_EQ(json["default_warmup"], nlohmann::json({3, 2, 1}));
  EXPECT_GT(json["speedup"].get<double>(), 1.0);
  // The healthy iterations name nothing: the first line with a slow link comes after the delay.
  const size_t named = result.out.find("slow link 0->1");
  ASSERT_NE(named, std::string::npos);
  EXPECT_GT(named, result.out.find("iteration 3/8: "));
  std::filesystem::remove(advice);
}

TEST(CliTest, PipelineRunRejectsBadInputInOneLine) {
  const std::string base = "pipeline-run --stages 3 --microbatches 8 --forward 1ms --backward 2ms ";
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {base + "--iterations 0", "--iterations must be in [1, 100000], got 0"},
           {base + "--json", "--json does not apply to 'stragglar pipeline-run'"},
           {base + "--delay-from 0", "--delay-from must be >= 1, got 0"},
           // Refused before the run, not when the first advice is written.
           {base + "--advice-file /nonexistent/dir/advice.json --link-delay 0-1:5ms "
                   "--iterations 100000",
            "cannot write the advice file /nonexistent/dir/advice.json"},
       }) {
    const CliResult result = RunCli(args);
    EXPECT_NE(result.exit_code, 0) << args;
    EXPECT_THAT(result.err, HasSubstr(message)) << args;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
}

TEST(CliTest, HelpPrintsUsageAndSucceeds) {
  CliResult result = RunCli("--help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("stragglar sim (--ranks N | --topology NxG) --bytes SIZE"));
}

// The short form of the command that produces docs/policy.md's table: every target met.
TEST(CliTest, ScenarioSuiteShortFormMeetsTheTargets) {
  const CliResult result = RunCli("scenarios --calls 3000 --noise-calls 10000 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  const nlohmann::json report = nlohmann::json::parse(result.out);
  EXPECT_EQ(report["targets_met"], true) << report["failures"];
  EXPECT_EQ(report["scenarios"].size(), 13u);
  EXPECT_LE(report["mean_regret"].get<double>(), 0.02);
  // A blind policy would fail, and the command says so with a non-zero exit.
  const CliResult blind = RunCli("scenarios --calls 500 --noise-calls 500 --epoch-calls 400");
  EXPECT_NE(blind.exit_code, 0);
  EXPECT_THAT(blind.out, HasSubstr("targets NOT met"));
  EXPECT_THAT(blind.err, HasSubstr("the policy missed some of its targets"));
}

}  // namespace
}  // namespace stragglar
