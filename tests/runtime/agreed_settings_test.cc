// The agreement with rank 0 (runtime/agreed_settings.h): every setting that changes what a rank
// calls is taken from rank 0, each rank keeps its own of the rest, and a setting added later
// fails here until it is classed as one or the other.
#include "runtime/agreed_settings.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "base/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_env.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A valid value other than the default for every variable the preloads read. A variable added to
// PreloadVariableNames() without one here fails EverySettingIsAgreedOrKeptPerRank.
const std::map<std::string, std::string>& Samples() {
  static const auto* samples = new std::map<std::string, std::string>{
      {"STRAGGLAR_ALGORITHM", "stragglar"},
      {"STRAGGLAR_DEBUG", "trace"},
      {"STRAGGLAR_EPOCH_CALLS", "16"},
      {"STRAGGLAR_METRICS_ADDR", "0.0.0.0"},
      {"STRAGGLAR_METRICS_PORT", "9400"},
      {"STRAGGLAR_MIN_BYTES", "8MiB"},
      {"STRAGGLAR_MODE", "off"},
      {"STRAGGLAR_MPI_SEGMENT", "48"},
      {"STRAGGLAR_MPI_NETWORK_MESSAGE", "64000"},
      {"STRAGGLAR_PIECES", "4"},
      {"STRAGGLAR_TOPOLOGY", "2x4"},
      {"STRAGGLAR_PRE_ARRIVAL", "nccl"},
      {"STRAGGLAR_QUEUES", "per-class"},
      {"STRAGGLAR_PROFILER", "events"},
      {"STRAGGLAR_STATE_FILE", "/tmp/state with space\n.json"},
      {"STRAGGLAR_STRAGGLER", "2"},
      {"STRAGGLAR_SUMMARY_FILE", "/tmp/summary.json"},
      {"STRAGGLAR_TRACE_FILE", "/tmp/trace.json"},
      {"STRAGGLAR_PIPELINE_ADVICE_FILE", "/tmp/advice.json"},
      {"STRAGGLAR_LINK_PROFILING", "on"},
      {"STRAGGLAR_LINK_ADDR", "10.0.0.1"},
      {"STRAGGLAR_PIPELINE_MICROBATCHES", "8"},
      {"STRAGGLAR_PIPELINE_FORWARD", "10ms,12.5ms,0.3s,7us"},
      {"STRAGGLAR_PIPELINE_BACKWARD", "20ms"},
      {"STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", "3"},
      {"STRAGGLAR_EXECUTOR", "device"},
      {"STRAGGLAR_IPC_BYTES", "64MiB"},
      {"STRAGGLAR_IPC_TIMEOUT", "12.25s"},
      {"STRAGGLAR_IPC_BLOCKS", "16"},
      {"STRAGGLAR_DEVICE_SCOPE", "system"},
      {"STRAGGLAR_DEVICE_STAMPS", "/tmp/stamps"},
      {"STRAGGLAR_WARN_AFTER", "2.5s"},
      {"STRAGGLAR_TIMEOUT", "10m"},
  };
  return *samples;
}

// Rank 0's side of the exchange: what it sends.
std::string TextOf(const PreloadConfig& rank_zero) {
  std::string sent;
  const absl::StatusOr<PreloadConfig> own = AgreeWithRankZero(rank_zero, 0, [&](std::string& text) {
    sent = text;
    return absl::OkStatus();
  });
  EXPECT_TRUE(own.ok()) << own.status();
  if (own.ok()) {
    EXPECT_TRUE(*own == rank_zero) << "rank 0 must keep its own settings";
  }
  return sent;
}

// `mine` after agreeing with a rank 0 that has `rank_zero`.
PreloadConfig Agree(const PreloadConfig& mine, const PreloadConfig& rank_zero, int rank = 1) {
  const std::string sent = TextOf(rank_zero);
  absl::StatusOr<PreloadConfig> agreed = AgreeWithRankZero(mine, rank, [&](std::string& text) {
    text = sent;
    return absl::OkStatus();
  });
  EXPECT_TRUE(agreed.ok()) << agreed.status();
  return agreed.value_or(PreloadConfig());
}

PreloadConfig With(absl::string_view variable) {
  std::ostringstream invalid;
  const PreloadConfig config = PreloadConfigFromValues(
      {{std::string(variable), Samples().at(std::string(variable))}}, &invalid);
  EXPECT_EQ(invalid.str(), "") << variable << "'s sample must be valid";
  return config;
}

bool IsAgreed(absl::string_view variable) {
  const std::vector<absl::string_view> agreed = AgreedVariableNames();
  return std::find(agreed.begin(), agreed.end(), variable) != agreed.end();
}

class AgreedSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override { SetLogSink(&log_); }
  void TearDown() override { SetLogSink(nullptr); }

  std::ostringstream log_;  // the warnings
};

// First in this file: the warnings are once per process, and the later tests set off others.
TEST_F(AgreedSettingsTest, ARankWhoseSettingDiffersSaysSoOnceAndTakesRankZeros) {
  PreloadConfig mine;
  mine.mode = RuntimeMode::kOff;
  mine.min_bytes = 8 << 20;
  PreloadConfig rank_zero;
  rank_zero.epoch_calls = 16;
  EXPECT_TRUE(Agree(mine, rank_zero, /*rank=*/2) == rank_zero);
  EXPECT_THAT(
      Lines(log_.str()),
      ElementsAre(
          Prefix("-", "WARN") +
              "STRAGGLAR_MODE differs across ranks: rank 2 has off, rank 0 adapt; "
              "every rank uses rank 0's",
          Prefix("-", "WARN") + "STRAGGLAR_EPOCH_CALLS differs across ranks: rank 2 has 64, rank 0 "
                                "16; every rank uses rank 0's",
          Prefix("-", "WARN") + "STRAGGLAR_MIN_BYTES differs across ranks: rank 2 has 8388608, "
                                "rank 0 262144; every rank uses rank 0's"));
  log_.str("");
  EXPECT_TRUE(Agree(mine, rank_zero, /*rank=*/2) == rank_zero);
  EXPECT_EQ(log_.str(), "") << "once per process";
}

TEST_F(AgreedSettingsTest, UnsetIsSaidAsSuchAndAPathStaysOnOneLine) {
  PreloadConfig rank_zero;
  rank_zero.straggler = 3;
  rank_zero.state_file = "/tmp/a\nb";
  EXPECT_TRUE(Agree(PreloadConfig(), rank_zero) == rank_zero);
  EXPECT_THAT(Lines(log_.str()),
              ElementsAre(Prefix("-", "WARN") +
                              "STRAGGLAR_STRAGGLER differs across ranks: rank 1 has unset, rank 0 "
                              "3; every rank uses rank 0's",
                          Prefix("-", "WARN") +
                              "STRAGGLAR_STATE_FILE differs across ranks: rank 1 has unset, rank "
                              "0 /tmp/a\\nb; every rank uses rank 0's"));
}

TEST_F(AgreedSettingsTest, EverySettingIsAgreedOrKeptPerRank) {
  std::set<absl::string_view> classed;
  for (absl::string_view name : AgreedVariableNames()) {
    EXPECT_TRUE(classed.insert(name).second) << name << " is classed twice";
  }
  for (absl::string_view name : PerRankVariableNames()) {
    EXPECT_TRUE(classed.insert(name).second) << name << " is classed twice";
  }
  const std::set<absl::string_view> read(PreloadVariableNames().begin(),
                                         PreloadVariableNames().end());
  for (absl::string_view name : read) {
    EXPECT_TRUE(classed.contains(name))
        << name << " is read but neither agreed with rank 0 (AgreedValues) nor kept per rank "
        << "(PerRankVariableNames)";
    EXPECT_TRUE(Samples().contains(std::string(name))) << "give " << name << " a sample value";
  }
  for (absl::string_view name : classed) {
    EXPECT_TRUE(read.contains(name)) << name << " is classed but never read";
  }
}

// Each variable alone, set on one side only: an agreed one ends as rank 0 has it, whichever side
// set it, and exactly so (the whole configuration compared); a per-rank one stays each rank's.
TEST_F(AgreedSettingsTest, EachSettingIsTakenFromRankZeroOrKept) {
  for (absl::string_view variable : PreloadVariableNames()) {
    SCOPED_TRACE(variable);
    if (variable == "STRAGGLAR_METRICS_PORT" || variable == "STRAGGLAR_METRICS_ADDR") {
      continue;  // read apart from PreloadConfig (MetricsEndpointFromEnv); per rank, above
    }
    const PreloadConfig set = With(variable);
    ASSERT_FALSE(set == PreloadConfig()) << "the sample changes nothing";
    if (IsAgreed(variable)) {
      EXPECT_TRUE(Agree(set, PreloadConfig()) == PreloadConfig()) << "set here only";
      EXPECT_TRUE(Agree(PreloadConfig(), set) == set) << "set on rank 0 only";
    } else {
      EXPECT_TRUE(Agree(set, PreloadConfig()) == set) << "set here only";
      EXPECT_TRUE(Agree(PreloadConfig(), set) == PreloadConfig()) << "set on rank 0 only";
    }
  }
}

TEST_F(AgreedSettingsTest, EverySettingAtOnce) {
  std::ostringstream invalid;
  const PreloadConfig everything = PreloadConfigFromValues(Samples(), &invalid);
  ASSERT_EQ(invalid.str(), "");
  PreloadConfig expected;  // rank 0's, the defaults, with this rank's own per-rank settings
  expected.debug = everything.debug;
  expected.prefer_cupti = everything.prefer_cupti;
  expected.trace_file = everything.trace_file;
  expected.summary_file = everything.summary_file;
  expected.link_host = everything.link_host;
  expected.pipeline_advice_file = everything.pipeline_advice_file;
  expected.device_stamps = everything.device_stamps;
  EXPECT_TRUE(Agree(everything, PreloadConfig()) == expected);
  // And the other way round: a rank 0 with every setting, a rank with none.
  PreloadConfig from_rank_zero = everything;
  from_rank_zero.debug = PreloadConfig().debug;
  from_rank_zero.prefer_cupti = PreloadConfig().prefer_cupti;
  from_rank_zero.trace_file = from_rank_zero.summary_file = "";
  from_rank_zero.link_host = from_rank_zero.pipeline_advice_file = "";
  from_rank_zero.device_stamps = "";
  EXPECT_TRUE(Agree(PreloadConfig(), everything) == from_rank_zero);
}

// The fingerprint `stragglar doctor` prints: the digest of what rank 0 sends, so it changes with
// every agreed setting and with none of a rank's own, and is fixed for given settings (FNV-1a of
// the text: the same on every machine, so hosts can be compared).
TEST_F(AgreedSettingsTest, TheFingerprintFollowsTheAgreedSettingsOnly) {
  const PreloadConfig defaults;
  EXPECT_EQ(AgreedSettingsText(defaults), TextOf(defaults));
  const std::string base = AgreedSettingsFingerprint(defaults);
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(base, AgreedSettingsFingerprint(PreloadConfig()));
  std::set<std::string> seen = {base};
  for (absl::string_view variable : PreloadVariableNames()) {
    SCOPED_TRACE(variable);
    if (variable == "STRAGGLAR_METRICS_PORT" || variable == "STRAGGLAR_METRICS_ADDR") continue;
    const std::string changed = AgreedSettingsFingerprint(With(variable));
    if (IsAgreed(variable)) {
      EXPECT_TRUE(seen.insert(changed).second) << "the same digest as another setting";
    } else {
      EXPECT_EQ(changed, base) << "a rank's own setting must not change it";
    }
  }
}

TEST_F(AgreedSettingsTest, AFailedExchangeIsAnError) {
  const absl::StatusOr<PreloadConfig> agreed = AgreeWithRankZero(
      PreloadConfig(), 1, [](std::string&) { return absl::UnavailableError("MPI_Bcast failed"); });
  EXPECT_EQ(agreed.status(), absl::UnavailableError("MPI_Bcast failed"));
}

TEST_F(AgreedSettingsTest, UnreadableTextFromRankZeroIsAnError) {
  std::string invalid_value = TextOf(PreloadConfig());  // rank 0 of another build, say
  invalid_value.replace(invalid_value.find("STRAGGLAR_MODE=adapt"), 20, "STRAGGLAR_MODE=fast");
  for (const std::string& sent : {std::string(""), std::string("STRAGGLAR_MODE=adapt\n"),
                                  std::string("STRAGGLAR_MODE=\\q\n"), invalid_value}) {
    const absl::StatusOr<PreloadConfig> agreed =
        AgreeWithRankZero(PreloadConfig(), 1, [&](std::string& text) {
          text = sent;
          return absl::OkStatus();
        });
    EXPECT_EQ(agreed.status().code(), absl::StatusCode::kInternal) << sent;
  }
}

}  // namespace
}  // namespace stragglar
