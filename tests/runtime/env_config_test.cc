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

TEST_F(EnvConfigTest, ModeIsCaseInsensitive) {
  const std::vector<std::pair<std::string, RuntimeMode>> cases = {
      {"adapt", RuntimeMode::kAdapt},     {"ADAPT", RuntimeMode::kAdapt},
      {"observe", RuntimeMode::kObserve}, {"OBSERVE", RuntimeMode::kObserve},
      {"off", RuntimeMode::kOff},         {"Off", RuntimeMode::kOff},
      {" off ", RuntimeMode::kOff},
  };
  for (const auto& [value, mode] : cases) {
    FakeEnv()["STRAGGLAR_MODE"] = value;
    std::vector<std::string> lines;
    EXPECT_EQ(Parse(&lines).mode, mode) << value;
    EXPECT_THAT(lines, IsEmpty()) << value;
  }
}

TEST_F(EnvConfigTest, DebugIsCaseInsensitive) {
  const std::vector<std::pair<std::string, LogLevel>> cases = {
      {"NONE", LogLevel::kNone},   {"none", LogLevel::kNone},   {"WARN", LogLevel::kWarn},
      {"Warn", LogLevel::kWarn},   {"INFO", LogLevel::kInfo},   {"info", LogLevel::kInfo},
      {"TRACE", LogLevel::kTrace}, {"tRaCe", LogLevel::kTrace},
  };
  for (const auto& [value, level] : cases) {
    FakeEnv()["STRAGGLAR_DEBUG"] = value;
    std::vector<std::string> lines;
    EXPECT_EQ(Parse(&lines).debug, level) << value;
    EXPECT_THAT(lines, IsEmpty()) << value;
  }
}

TEST_F(EnvConfigTest, EpochCallsBounds) {
  for (const auto& [value, calls] : std::vector<std::pair<std::string, int>>{
           {"1", 1}, {"64", 64}, {"1000000", 1000000}, {"+7", 7}}) {
    FakeEnv()["STRAGGLAR_EPOCH_CALLS"] = value;
    std::vector<std::string> lines;
    EXPECT_EQ(Parse(&lines).epoch_calls, calls) << value;
    EXPECT_THAT(lines, IsEmpty()) << value;
  }
  FakeEnv()["STRAGGLAR_EPOCH_CALLS"] = "1000001";
  std::vector<std::string> lines;
  EXPECT_EQ(Parse(&lines).epoch_calls, 64);
  EXPECT_EQ(lines.size(), 1u);
}

TEST_F(EnvConfigTest, MinBytesSizes) {
  for (const auto& [value, bytes] :
       std::vector<std::pair<std::string, int64_t>>{{"1MiB", 1 << 20},
                                                    {"0", 0},
                                                    {"4096", 4096},
                                                    {"256KiB", 256 << 10},
                                                    {"1MB", 1000000},
                                                    {"1.5KiB", 1536},
                                                    {"2GiB", int64_t{2} << 30}}) {
    FakeEnv()["STRAGGLAR_MIN_BYTES"] = value;
    std::vector<std::string> lines;
    EXPECT_EQ(Parse(&lines).min_bytes, bytes) << value;
    EXPECT_THAT(lines, IsEmpty()) << value;
  }
}

TEST_F(EnvConfigTest, ProfilerChoice) {
  for (const auto& [value, cupti] : std::vector<std::pair<std::string, bool>>{
           {"cupti", true}, {"CUPTI", true}, {"events", false}, {" Events ", false}}) {
    FakeEnv()["STRAGGLAR_PROFILER"] = value;
    std::vector<std::string> lines;
    EXPECT_EQ(Parse(&lines).prefer_cupti, cupti) << value;
    EXPECT_THAT(lines, IsEmpty()) << value;
  }
  FakeEnv()["STRAGGLAR_PROFILER"] = "nsight";
  std::vector<std::string> lines;
  EXPECT_TRUE(Parse(&lines).prefer_cupti);
  EXPECT_THAT(lines, ElementsAre(HasSubstr(
                         "STRAGGLAR_PROFILER=\"nsight\" is invalid (accepted: cupti, events); "
                         "using cupti")));
}

TEST_F(EnvConfigTest, EveryAlgorithm) {
  using Forced = PreloadConfig::Forced;
  const std::vector<std::pair<std::string, Forced>> cases = {
      {"auto", Forced::kAuto},
      {"native", Forced::kNative},
      {"ring", Forced::kRing},
      {"halving-doubling", Forced::kHalvingDoubling},
      {"stragglar", Forced::kStragglar},
      {"Ring", Forced::kRing},
      {"NATIVE", Forced::kNative},
      {"stragglar-log-depth", Forced::kStragglarLogDepth},
      {"StragglAR-Hierarchical", Forced::kStragglarHierarchical},
  };
  for (const auto& [value, algorithm] : cases) {
    FakeEnv()["STRAGGLAR_ALGORITHM"] = value;
    std::vector<std::string> lines;
    EXPECT_EQ(Parse(&lines).algorithm, algorithm) << value;
    EXPECT_THAT(lines, IsEmpty()) << value;
  }
  EXPECT_EQ(ForcedAlgorithmName(Forced::kHalvingDoubling), "halving-doubling");
  EXPECT_EQ(ForcedAlgorithmName(Forced::kAuto), "auto");
  EXPECT_EQ(ForcedAlgorithmName(Forced::kStragglarHierarchical), "stragglar-hierarchical");

  FakeEnv()["STRAGGLAR_ALGORITHM"] = "stragglar-tree";
  std::vector<std::string> lines;
  EXPECT_EQ(Parse(&lines).algorithm, Forced::kAuto);
  EXPECT_THAT(lines,
              ElementsAre(HasSubstr("(accepted: auto, native, ring, halving-doubling, stragglar, "
                                    "stragglar-log-depth, stragglar-hierarchical); using auto")));
}

TEST_F(EnvConfigTest, StragglerRank) {
  FakeEnv()["STRAGGLAR_STRAGGLER"] = "0";
  std::vector<std::string> lines;
  EXPECT_EQ(Parse(&lines).straggler, 0);
  FakeEnv()["STRAGGLAR_STRAGGLER"] = "1023";
  EXPECT_EQ(Parse(&lines).straggler, 1023);
  EXPECT_THAT(lines, IsEmpty());
}

TEST_F(EnvConfigTest, PiecesAutoOrANumber) {
  std::vector<std::string> lines;
  FakeEnv()["STRAGGLAR_PIECES"] = "AUTO";
  EXPECT_EQ(Parse(&lines).pieces, 0);
  FakeEnv()["STRAGGLAR_PIECES"] = "1";
  EXPECT_EQ(Parse(&lines).pieces, 1);
  FakeEnv()["STRAGGLAR_PIECES"] = " 16 ";
  EXPECT_EQ(Parse(&lines).pieces, 16);
  EXPECT_THAT(lines, IsEmpty());
}

TEST_F(EnvConfigTest, MpiSegment) {
  std::vector<std::string> lines;
  FakeEnv()["STRAGGLAR_MPI_SEGMENT"] = "0";  // one message per transfer
  EXPECT_EQ(Parse(&lines).mpi_segment_bytes, 0);
  FakeEnv()["STRAGGLAR_MPI_SEGMENT"] = "48";
  EXPECT_EQ(Parse(&lines).mpi_segment_bytes, 48);
  FakeEnv()["STRAGGLAR_MPI_SEGMENT"] = "1GiB";
  EXPECT_EQ(Parse(&lines).mpi_segment_bytes, int64_t{1} << 30);
  EXPECT_THAT(lines, IsEmpty());
}

TEST_F(EnvConfigTest, MpiNetworkMessage) {
  std::vector<std::string> lines;
  EXPECT_EQ(Parse(&lines).mpi_network_message_bytes, std::nullopt);  // auto: the eager limit
  FakeEnv()["STRAGGLAR_MPI_NETWORK_MESSAGE"] = "0";                  // whole messages
  EXPECT_EQ(Parse(&lines).mpi_network_message_bytes, 0);
  FakeEnv()["STRAGGLAR_MPI_NETWORK_MESSAGE"] = "48";
  EXPECT_EQ(Parse(&lines).mpi_network_message_bytes, 48);
  EXPECT_THAT(DescribeConfig(Parse(&lines)), HasSubstr("mpi network messages 48 B"));
  FakeEnv()["STRAGGLAR_MPI_NETWORK_MESSAGE"] = " Auto ";
  EXPECT_EQ(Parse(&lines).mpi_network_message_bytes, std::nullopt);
  EXPECT_THAT(lines, IsEmpty());
  for (const char* bad : {"100", "2GiB", "-16", "fast"}) {
    FakeEnv()["STRAGGLAR_MPI_NETWORK_MESSAGE"] = bad;
    lines.clear();
    EXPECT_EQ(Parse(&lines).mpi_network_message_bytes, std::nullopt) << bad;
    EXPECT_THAT(lines, ElementsAre(absl::StrCat(
                           "STRAGGLAR_MPI_NETWORK_MESSAGE=\"", bad,
                           "\" is invalid (accepted: auto, 0 or a multiple of 16 bytes up to "
                           "1GiB, e.g. 64000); using auto")));
  }
}

TEST_F(EnvConfigTest, PreArrival) {
  std::vector<std::string> lines;
  for (const auto& [value, nccl] : std::vector<std::pair<std::string, bool>>{
           {"rounds", false}, {"nccl", true}, {" Rounds ", false}}) {
    FakeEnv()["STRAGGLAR_PRE_ARRIVAL"] = value;
    EXPECT_EQ(Parse(&lines).native_pre_arrival, nccl) << value;
  }
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

struct InvalidCase {
  std::string variable;
  std::string value;
  std::string line;
  // Puts the field of `variable` back to its default in the expected config.
  std::function<void(PreloadConfig&)> reset;
};

const char kSizeAccepted[] =
    "a size with an optional unit B, KiB, MiB, GiB, TiB, KB, MB, GB, TB, e.g. 256KiB, 1MB or 0";

std::vector<InvalidCase> InvalidCases() {
  const auto epoch = [](PreloadConfig& c) { c.epoch_calls = 64; };
  const auto min_bytes = [](PreloadConfig& c) { c.min_bytes = 256 << 10; };
  const auto straggler = [](PreloadConfig& c) { c.straggler.reset(); };
  const auto epoch_line = [](absl::string_view value) {
    return absl::StrCat("STRAGGLAR_EPOCH_CALLS=\"", value,
                        "\" is invalid (accepted: an integer from 1 to 1000000); using 64");
  };
  const auto size_line = [](absl::string_view value) {
    return absl::StrCat("STRAGGLAR_MIN_BYTES=\"", value, "\" is invalid (accepted: ", kSizeAccepted,
                        "); using 256 KiB");
  };
  const auto pieces = [](PreloadConfig& c) { c.pieces = 0; };
  const auto pieces_line = [](absl::string_view value) {
    return absl::StrCat("STRAGGLAR_PIECES=\"", value,
                        "\" is invalid (accepted: auto or an integer from 1 to 16); using auto");
  };
  const auto segment = [](PreloadConfig& c) { c.mpi_segment_bytes = 256 << 10; };
  const auto segment_line = [](absl::string_view value) {
    return absl::StrCat(
        "STRAGGLAR_MPI_SEGMENT=\"", value,
        "\" is invalid (accepted: 0 or a multiple of 16 bytes up to 1GiB, e.g. 256KiB); using "
        "256 KiB");
  };
  const auto straggler_line = [](absl::string_view value) {
    return absl::StrCat("STRAGGLAR_STRAGGLER=\"", value,
                        "\" is invalid (accepted: a rank >= 0); using the last rank");
  };
  return {
      {"STRAGGLAR_MODE", "fast",
       "STRAGGLAR_MODE=\"fast\" is invalid (accepted: adapt, observe, off); using adapt",
       [](PreloadConfig& c) { c.mode = RuntimeMode::kAdapt; }},
      {"STRAGGLAR_DEBUG", "loud",
       "STRAGGLAR_DEBUG=\"loud\" is invalid (accepted: NONE, WARN, INFO, TRACE); using WARN",
       [](PreloadConfig& c) { c.debug = LogLevel::kWarn; }},
      {"STRAGGLAR_EPOCH_CALLS", "0", epoch_line("0"), epoch},
      {"STRAGGLAR_EPOCH_CALLS", "-3", epoch_line("-3"), epoch},
      {"STRAGGLAR_EPOCH_CALLS", "12x", epoch_line("12x"), epoch},
      {"STRAGGLAR_EPOCH_CALLS", "99999999999", epoch_line("99999999999"), epoch},
      {"STRAGGLAR_MIN_BYTES", "-1", size_line("-1"), min_bytes},
      {"STRAGGLAR_MIN_BYTES", "lots", size_line("lots"), min_bytes},
      {"STRAGGLAR_ALGORITHM", "fastest",
       "STRAGGLAR_ALGORITHM=\"fastest\" is invalid (accepted: auto, native, ring, "
       "halving-doubling, stragglar, stragglar-log-depth, stragglar-hierarchical); using auto",
       [](PreloadConfig& c) { c.algorithm = PreloadConfig::Forced::kAuto; }},
      {"STRAGGLAR_STRAGGLER", "-1", straggler_line("-1"), straggler},
      {"STRAGGLAR_STRAGGLER", "x", straggler_line("x"), straggler},
      {"STRAGGLAR_PIECES", "0", pieces_line("0"), pieces},
      {"STRAGGLAR_PIECES", "17", pieces_line("17"), pieces},
      {"STRAGGLAR_PIECES", "many", pieces_line("many"), pieces},
      {"STRAGGLAR_MPI_SEGMENT", "100", segment_line("100"), segment},  // not a multiple of 16
      {"STRAGGLAR_MPI_SEGMENT", "2GiB", segment_line("2GiB"), segment},
      {"STRAGGLAR_MPI_SEGMENT", "-16", segment_line("-16"), segment},
      {"STRAGGLAR_MPI_SEGMENT", "big", segment_line("big"), segment},
      {"STRAGGLAR_TOPOLOGY", "8",
       "STRAGGLAR_TOPOLOGY=\"8\" is invalid (accepted: NxG, N nodes of G ranks, e.g. 4x8); using "
       "what the library learns",
       [](PreloadConfig& c) { c.topology.reset(); }},
      {"STRAGGLAR_TOPOLOGY", "0x8",
       "STRAGGLAR_TOPOLOGY=\"0x8\" is invalid (accepted: NxG, N nodes of G ranks, e.g. 4x8); using "
       "what the library learns",
       [](PreloadConfig& c) { c.topology.reset(); }},
      {"STRAGGLAR_PRE_ARRIVAL", "subcomm",
       "STRAGGLAR_PRE_ARRIVAL=\"subcomm\" is invalid (accepted: rounds, nccl); using rounds",
       [](PreloadConfig& c) { c.native_pre_arrival = false; }},
  };
}

TEST_F(EnvConfigTest, EachInvalidValueWritesOneLineAndKeepsOnlyThatDefault) {
  for (const InvalidCase& invalid : InvalidCases()) {
    SCOPED_TRACE(absl::StrCat(invalid.variable, "=", invalid.value));
    SetAllValid();
    FakeEnv()[invalid.variable] = invalid.value;
    PreloadConfig expected = AllValid();
    invalid.reset(expected);
    std::vector<std::string> lines;
    ExpectConfigEq(Parse(&lines), expected);
    EXPECT_THAT(lines, ElementsAre(invalid.line));
  }
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
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], HasSubstr("STRAGGLAR_MODE=\"fast\""));
  EXPECT_THAT(lines[1], HasSubstr("STRAGGLAR_EPOCH_CALLS=\"12x\""));
  EXPECT_THAT(lines[2], HasSubstr("STRAGGLAR_STRAGGLER=\"x\""));
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
