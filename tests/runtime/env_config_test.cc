#include "runtime/env_config.h"

#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_env.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

void ExpectConfigEq(const PreloadConfig& actual, const PreloadConfig& expected) {
  EXPECT_EQ(actual.mode, expected.mode);
  EXPECT_EQ(actual.debug, expected.debug);
  EXPECT_EQ(actual.epoch_calls, expected.epoch_calls);
  EXPECT_EQ(actual.min_bytes, expected.min_bytes);
  EXPECT_EQ(actual.state_file, expected.state_file);
  EXPECT_EQ(actual.trace_file, expected.trace_file);
  EXPECT_EQ(actual.summary_file, expected.summary_file);
  EXPECT_EQ(actual.algorithm, expected.algorithm);
  EXPECT_EQ(actual.straggler, expected.straggler);
  EXPECT_EQ(actual.prefer_cupti, expected.prefer_cupti);
  EXPECT_EQ(actual.pieces, expected.pieces);
  EXPECT_EQ(actual.mpi_segment_bytes, expected.mpi_segment_bytes);
  EXPECT_EQ(actual.mpi_network_message_bytes, expected.mpi_network_message_bytes);
  EXPECT_EQ(actual.native_pre_arrival, expected.native_pre_arrival);
  EXPECT_EQ(actual.per_class_queues, expected.per_class_queues);
  EXPECT_EQ(actual.topology, expected.topology);
}

// Every variable set to a valid, non-default value...
void SetAllValid() {
  FakeEnv() = {
      {"STRAGGLAR_MODE", "Observe"},
      {"STRAGGLAR_DEBUG", "trace"},
      {"STRAGGLAR_EPOCH_CALLS", "128"},
      {"STRAGGLAR_MIN_BYTES", "1MiB"},
      {"STRAGGLAR_STATE_FILE", "/tmp/state.json"},
      {"STRAGGLAR_TRACE_FILE", "/tmp/trace.json"},
      {"STRAGGLAR_SUMMARY_FILE", "/tmp/summary.json"},
      {"STRAGGLAR_ALGORITHM", "stragglar"},
      {"STRAGGLAR_STRAGGLER", "3"},
      {"STRAGGLAR_PROFILER", "Events"},
      {"STRAGGLAR_PIECES", "8"},
      {"STRAGGLAR_MPI_SEGMENT", "64KiB"},
      {"STRAGGLAR_PRE_ARRIVAL", "NCCL"},
      {"STRAGGLAR_TOPOLOGY", "2X4"},
      {"STRAGGLAR_QUEUES", "per-class"},
  };
}

// ...and what it parses to.
PreloadConfig AllValid() {
  PreloadConfig config;
  config.mode = RuntimeMode::kObserve;
  config.debug = LogLevel::kTrace;
  config.epoch_calls = 128;
  config.min_bytes = 1 << 20;
  config.state_file = "/tmp/state.json";
  config.trace_file = "/tmp/trace.json";
  config.summary_file = "/tmp/summary.json";
  config.algorithm = PreloadConfig::Forced::kStragglar;
  config.straggler = 3;
  config.prefer_cupti = false;
  config.pieces = 8;
  config.mpi_segment_bytes = 64 << 10;
  config.native_pre_arrival = true;
  config.topology = Topology{.nodes = 2, .ranks_per_node = 4};
  config.per_class_queues = true;
  return config;
}

class EnvConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { FakeEnv().clear(); }
  void TearDown() override {
    FakeEnv().clear();
    SetLogSink(nullptr);
    SetLogLevel(LogLevel::kWarn);
    SetLogRank(-1);
  }
};

TEST_F(EnvConfigTest, DefaultsWhenNothingIsSet) {
  std::vector<std::string> lines;
  const PreloadConfig config = Parse(&lines);
  EXPECT_THAT(lines, IsEmpty());
  EXPECT_EQ(config.mode, RuntimeMode::kAdapt);
  EXPECT_EQ(config.debug, LogLevel::kWarn);
  EXPECT_EQ(config.epoch_calls, 64);
  EXPECT_EQ(config.min_bytes, 256 * 1024);
  EXPECT_EQ(config.state_file, "");
  EXPECT_EQ(config.trace_file, "");
  EXPECT_EQ(config.summary_file, "");
  EXPECT_EQ(config.algorithm, PreloadConfig::Forced::kAuto);
  EXPECT_EQ(config.straggler, std::nullopt);
  EXPECT_EQ(config.mpi_segment_bytes, 256 << 10);
  EXPECT_FALSE(config.native_pre_arrival);
}

TEST_F(EnvConfigTest, EmptyValuesKeepTheDefaults) {
  for (const char* name :
       {"STRAGGLAR_MODE", "STRAGGLAR_DEBUG", "STRAGGLAR_EPOCH_CALLS", "STRAGGLAR_MIN_BYTES",
        "STRAGGLAR_STATE_FILE", "STRAGGLAR_TRACE_FILE", "STRAGGLAR_SUMMARY_FILE",
        "STRAGGLAR_ALGORITHM", "STRAGGLAR_STRAGGLER", "STRAGGLAR_PROFILER", "STRAGGLAR_PIECES",
        "STRAGGLAR_MPI_SEGMENT", "STRAGGLAR_MPI_NETWORK_MESSAGE", "STRAGGLAR_PRE_ARRIVAL",
        "STRAGGLAR_TOPOLOGY"}) {
    FakeEnv()[name] = "";
  }
  std::vector<std::string> lines;
  ExpectConfigEq(Parse(&lines), PreloadConfig());
  EXPECT_THAT(lines, IsEmpty());
}

TEST_F(EnvConfigTest, EveryVariableValid) {
  SetAllValid();
  std::vector<std::string> lines;
  ExpectConfigEq(Parse(&lines), AllValid());
  EXPECT_THAT(lines, IsEmpty());
}

TEST_F(EnvConfigTest, PathsAreTakenVerbatim) {
  FakeEnv()["STRAGGLAR_STATE_FILE"] = "my state.json";
  FakeEnv()["STRAGGLAR_TRACE_FILE"] = "trace.csv";
  std::vector<std::string> lines;
  const PreloadConfig config = Parse(&lines);
  EXPECT_EQ(config.state_file, "my state.json");
  EXPECT_EQ(config.trace_file, "trace.csv");
  EXPECT_THAT(lines, IsEmpty());
}

// One setting refused keeps its default only; every case of every setting: settings_test.
TEST_F(EnvConfigTest, AnInvalidValueKeepsOnlyItsOwnDefault) {
  SetAllValid();
  FakeEnv()["STRAGGLAR_MODE"] = "fast";
  PreloadConfig expected = AllValid();
  expected.mode = RuntimeMode::kAdapt;
  std::vector<std::string> lines;
  ExpectConfigEq(Parse(&lines), expected);
  EXPECT_THAT(lines, ElementsAre("STRAGGLAR_MODE=\"fast\" is invalid (accepted: adapt, observe, "
                                 "off); using adapt"));
}

TEST_F(EnvConfigTest, SeveralInvalidValuesWriteOneLineEach) {
  FakeEnv() = {{"STRAGGLAR_MODE", "fast"},
               {"STRAGGLAR_EPOCH_CALLS", "12x"},
               {"STRAGGLAR_MIN_BYTES", "4096"},
               {"STRAGGLAR_STRAGGLER", "x"}};
  std::vector<std::string> lines;
  const PreloadConfig config = Parse(&lines);
  EXPECT_EQ(config.min_bytes, 4096);
  EXPECT_EQ(config.mode, RuntimeMode::kAdapt);
  // In the settings table's order (runtime/settings.h).
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], HasSubstr("STRAGGLAR_MODE=\"fast\""));
  EXPECT_THAT(lines[1], HasSubstr("STRAGGLAR_STRAGGLER=\"x\""));
  EXPECT_THAT(lines[2], HasSubstr("STRAGGLAR_EPOCH_CALLS=\"12x\""));
}

TEST_F(EnvConfigTest, ValuesAreEscapedToStayOneLine) {
  FakeEnv()["STRAGGLAR_MODE"] = "fa\"st\nnext";
  std::vector<std::string> lines;
  Parse(&lines);
  EXPECT_THAT(lines, ElementsAre("STRAGGLAR_MODE=\"fa\\\"st\\nnext\" is invalid (accepted: adapt, "
                                 "observe, off); using adapt"));
}

TEST_F(EnvConfigTest, InvalidValuesGoToTheLogWhateverTheLevel) {
  std::ostringstream sink;
  SetLogSink(&sink);
  SetLogLevel(LogLevel::kNone);
  FakeEnv()["STRAGGLAR_MODE"] = "fast";
  PreloadConfigFromEnv(&FakeGetenv);
  EXPECT_THAT(Lines(sink.str()),
              ElementsAre(Prefix("-", "WARN") +
                          "STRAGGLAR_MODE=\"fast\" is invalid (accepted: adapt, observe, off); "
                          "using adapt"));
}

TEST_F(EnvConfigTest, ToRuntimeConfigMapsFields) {
  const PreloadConfig config = AllValid();
  const RuntimeConfig runtime = ToRuntimeConfig(config);
  EXPECT_EQ(runtime.mode, RuntimeMode::kObserve);
  EXPECT_EQ(runtime.epoch_calls, 128);
  EXPECT_EQ(runtime.min_bytes, 1 << 20);
  EXPECT_EQ(runtime.state_file, "/tmp/state.json");
  EXPECT_EQ(runtime.stragglar_pieces, 8);
  // The rest keeps the core's defaults.
  const RuntimeConfig defaults;
  EXPECT_EQ(runtime.default_algorithm, defaults.default_algorithm);
  EXPECT_EQ(runtime.candidates, defaults.candidates);

  const RuntimeConfig from_defaults = ToRuntimeConfig(PreloadConfig());
  EXPECT_EQ(from_defaults.mode, RuntimeMode::kAdapt);
  EXPECT_EQ(from_defaults.epoch_calls, 64);
  EXPECT_EQ(from_defaults.min_bytes, 256 << 10);
  EXPECT_EQ(from_defaults.state_file, "");
  EXPECT_EQ(from_defaults.stragglar_pieces, 0);
}

TEST_F(EnvConfigTest, DescribeConfig) {
  EXPECT_EQ(DescribeConfig(PreloadConfig()),
            "mode adapt, epoch 64 calls, min 256 KiB, debug WARN, algorithm auto");
  EXPECT_EQ(
      DescribeConfig(AllValid()),
      "mode observe, epoch 128 calls, min 1 MiB, debug TRACE, algorithm stragglar "
      "(straggler 3), stragglar pieces 8, profiler events, pre-arrival nccl, queues per-class, "
      "mpi segment 64 KiB, state "
      "/tmp/state.json, trace "
      "/tmp/trace.json "
      "(Perfetto JSON), summary /tmp/summary.json");
  PreloadConfig config;
  config.algorithm = PreloadConfig::Forced::kStragglar;
  config.trace_file = "t.csv";
  EXPECT_THAT(DescribeConfig(config), HasSubstr("algorithm stragglar (straggler last rank)"));
  EXPECT_THAT(DescribeConfig(config), HasSubstr("trace t.csv (CSV)"));
  config.algorithm = PreloadConfig::Forced::kStragglarLogDepth;
  EXPECT_THAT(DescribeConfig(config),
              HasSubstr("algorithm stragglar-log-depth (straggler last rank)"));
  config.algorithm = PreloadConfig::Forced::kRing;
  config.straggler = 2;
  EXPECT_THAT(DescribeConfig(config), HasSubstr("straggler 2 ignored"));
  config.mpi_segment_bytes = 0;
  EXPECT_THAT(DescribeConfig(config), HasSubstr("mpi segment off"));
  config.mpi_network_message_bytes = 48;
  EXPECT_THAT(DescribeConfig(config), HasSubstr("mpi network messages 48 B"));
  EXPECT_THAT(DescribeConfig(config), Not(HasSubstr("executor")));
  config.device_executor = true;
  config.ipc_bytes = 64 << 20;
  config.ipc_ctas = 16;
  config.device_system_scope = true;
  EXPECT_THAT(DescribeConfig(config), HasSubstr("executor device (window 64 MiB, 16 CTAs"));
  EXPECT_THAT(DescribeConfig(config), HasSubstr(", system scope)"));
  config.ipc_timeout_s = 0;
  EXPECT_THAT(DescribeConfig(config), HasSubstr("timeout none"));
  config.link_profiling = true;
  EXPECT_THAT(DescribeConfig(config), HasSubstr("link profiling on"));
}

// The pipeline's stage times as the advisor takes them: one time for every stage, or one each.
TEST_F(EnvConfigTest, PipelineSpecForStages) {
  FakeEnv() = {{"STRAGGLAR_PIPELINE_MICROBATCHES", "32"},
               {"STRAGGLAR_PIPELINE_FORWARD", "10ms"},
               {"STRAGGLAR_PIPELINE_BACKWARD", "20ms, 21ms,19ms,20ms"}};
  std::vector<std::string> lines;
  PreloadConfig config = Parse(&lines);
  EXPECT_THAT(lines, IsEmpty());
  ASSERT_TRUE(config.pipeline.complete());
  absl::StatusOr<PipelineSpec> spec = PipelineSpecFor(config.pipeline, 4);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->microbatches, 32);
  EXPECT_THAT(spec->forward_s, ElementsAre(10e-3, 10e-3, 10e-3, 10e-3));
  EXPECT_THAT(spec->backward_s, ElementsAre(20e-3, 21e-3, 19e-3, 20e-3));
  EXPECT_EQ(spec->link_delay_s.size(), 3u);
  EXPECT_THAT(PipelineSpecFor(config.pipeline, 3).status().message(),
              HasSubstr("STRAGGLAR_PIPELINE_BACKWARD has 4 times for a pipeline of 3 stages"));
  config.pipeline.backward_s.clear();
  EXPECT_THAT(PipelineSpecFor(config.pipeline, 4).status().message(), HasSubstr("all needed"));
}

TEST_F(EnvConfigTest, TraceFileIsJson) {
  EXPECT_TRUE(TraceFileIsJson("/tmp/trace.json"));
  EXPECT_TRUE(TraceFileIsJson("TRACE.JSON"));
  EXPECT_FALSE(TraceFileIsJson("/tmp/trace.csv"));
  EXPECT_FALSE(TraceFileIsJson("/tmp/json"));
}

// What each STRAGGLAR_ALGORITHM does to the core's decision, and which runs the backend's own
// collective.
TEST(ForcedAlgorithmTest, OverridesTheDecision) {
  using Forced = PreloadConfig::Forced;
  const CallDecision stragglar{.call = 7, .algorithm = Algorithm::kStragglar, .straggler = 2};
  const CallDecision ring{.call = 7, .algorithm = Algorithm::kRing};
  PreloadConfig config;
  CallDecision decision = stragglar;
  EXPECT_FALSE(ApplyForcedAlgorithm(config, 4, decision));  // auto keeps the core's choice
  EXPECT_EQ(decision.algorithm, Algorithm::kStragglar);
  EXPECT_EQ(decision.straggler, 2);
  decision = ring;
  EXPECT_FALSE(ApplyForcedAlgorithm(config, 4, decision));  // auto's Ring is our Ring plan
  EXPECT_EQ(decision.algorithm, Algorithm::kRing);
  decision = {.call = 7, .algorithm = Algorithm::kNative};
  EXPECT_TRUE(ApplyForcedAlgorithm(config, 4, decision));  // and its native the library's

  config.algorithm = Forced::kNative;
  decision = stragglar;
  EXPECT_TRUE(ApplyForcedAlgorithm(config, 4, decision));
  EXPECT_EQ(decision.algorithm, Algorithm::kNative);
  EXPECT_FALSE(decision.straggler.has_value());

  config.algorithm = Forced::kRing;  // our Ring plan, not the library's
  decision = stragglar;
  EXPECT_FALSE(ApplyForcedAlgorithm(config, 4, decision));
  EXPECT_EQ(decision.algorithm, Algorithm::kRing);

  config.algorithm = Forced::kHalvingDoubling;
  decision = ring;
  EXPECT_FALSE(ApplyForcedAlgorithm(config, 4, decision));
  EXPECT_EQ(decision.algorithm, Algorithm::kHalvingDoubling);

  config.algorithm = Forced::kStragglar;
  decision = ring;
  EXPECT_FALSE(ApplyForcedAlgorithm(config, 4, decision));
  EXPECT_EQ(decision.algorithm, Algorithm::kStragglar);
  EXPECT_EQ(decision.straggler, 3);  // unset: the last rank
  config.straggler = 9;
  std::ostringstream log;
  SetLogSink(&log);
  EXPECT_FALSE(ApplyForcedAlgorithm(config, 4, decision));
  EXPECT_EQ(decision.straggler, 3);  // capped to the last rank, with one warning for all calls
  EXPECT_FALSE(ApplyForcedAlgorithm(config, 4, decision));
  SetLogSink(nullptr);
  EXPECT_THAT(Lines(log.str()),
              ElementsAre(Prefix("-", "WARN") +
                          "STRAGGLAR_STRAGGLER=9 is outside [0, 3] for 4 ranks: StragglAR runs "
                          "around the last rank, 3"));
  config.straggler = 1;
  EXPECT_FALSE(ApplyForcedAlgorithm(config, 4, decision));
  EXPECT_EQ(decision.straggler, 1);
  EXPECT_EQ(decision.call, 7);
}

// PreloadVariableNames is what `stragglar doctor` calls known: exactly the names the readers ask
// for (recorded by a getenv that sets every one to "1", so that no reader stops early), so a new
// setting missing from the list fails.
std::set<std::string> asked_names;
const char* RecordingGetenv(const char* name) { return asked_names.insert(name), "1"; }
TEST(PreloadVariableNamesTest, AreExactlyTheNamesTheReadersAskFor) {
  std::ostringstream log;
  PreloadConfigFromEnv(&RecordingGetenv, &log);
  StateFileFromEnv(&RecordingGetenv);
  MetricsEndpointFromEnv(0, log, &RecordingGetenv);
  std::set<std::string> listed(PreloadVariableNames().begin(), PreloadVariableNames().end());
  EXPECT_EQ(listed, asked_names);
  EXPECT_EQ(listed.size(), PreloadVariableNames().size()) << "a name is listed twice";
}

}  // namespace
}  // namespace stragglar
