// The state file (runtime/state_file.h): what a job learned, saved and loaded again; old formats
// read; missing, stale, corrupt and unreadable files refused with a reason.
#include "runtime/state_file.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

LearnedState SomeState() {
  LearnedState state{.num_ranks = 4, .machine = "node1/host-threads"};
  for (double ratio : {1.5, 1.6, 1.7, 1.8}) {
    state.calibration.Add(Algorithm::kRing, 1 << 20, 1e-3, ratio * 1e-3);
    state.calibration.Add(Algorithm::kStragglar, 1 << 20, 1e-3, 2 * ratio * 1e-3,
                          CalibrationRegime::kPhaseHidden);
  }
  state.predicted_lag_s = {0, 1e-5, 3e-3, 2e-5};
  state.straggler = 2;
  return state;
}

TEST(StateFileTest, RoundTrip) {
  const std::string path = TempPath("state-roundtrip.json");
  ASSERT_TRUE(SaveState(path, SomeState()).ok());
  absl::StatusOr<LearnedState> loaded = LoadState(path, 4, "node1/host-threads");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->predicted_lag_s, SomeState().predicted_lag_s);
  EXPECT_EQ(loaded->straggler, 2);
  EXPECT_EQ(loaded->calibration.ToJson(), SomeState().calibration.ToJson());
  EXPECT_DOUBLE_EQ(loaded->calibration.Factor(Algorithm::kRing, 1 << 20), 1.7);
  EXPECT_DOUBLE_EQ(
      loaded->calibration.Factor(Algorithm::kStragglar, 1 << 20, CalibrationRegime::kPhaseHidden),
      3.4);
}

// Format 1 (before the calibration had regimes) still loads: its entries are kPhaseExposed.
TEST(StateFileTest, FormatOneStillLoads) {
  const std::string path = TempPath("state-v1.json");
  WriteFile(path, R"({"version": 1, "ranks": 4, "machine": "node1/host-threads",
                      "predicted_lag_s": [0, 0, 0, 0.02], "straggler": 3,
                      "calibration": {"stragglar": {"24": {"ratios": [2.0, 3.0, 3.0, 3.0]}}}})");
  absl::StatusOr<LearnedState> loaded = LoadState(path, 4, "node1/host-threads");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->straggler, 3);
  EXPECT_EQ(loaded->calibration.Samples(Algorithm::kStragglar, 16 << 20,
                                        CalibrationRegime::kPhaseExposed),
            4);
  EXPECT_EQ(
      loaded->calibration.Samples(Algorithm::kStragglar, 16 << 20, CalibrationRegime::kPhaseHidden),
      0);
}

// Missing, stale and corrupt files are refused with a reason and never crash.
TEST(StateFileTest, MissingStaleAndCorruptFilesAreRefused) {
  const std::string path = TempPath("state-bad.json");
  ASSERT_TRUE(SaveState(path, SomeState()).ok());
  EXPECT_EQ(LoadState(TempPath("no-such-state.json"), 4, "node1/host-threads").status().code(),
            absl::StatusCode::kNotFound);
  absl::Status status = LoadState(path, 8, "node1/host-threads").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("is for world size 4, this job has 8"));
  status = LoadState(path, 4, "node2/host-threads").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("was learned on node1/host-threads, this is node2"));
  const std::string good = [&] {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const std::vector<std::pair<std::string, std::string>> corrupt = {
      {"", "not valid JSON"},
      {good.substr(0, good.size() / 2), "not valid JSON"},
      {"\x01\xff garbage", "not valid JSON"},
      {"[1, 2, 3]", "not a JSON object"},
      {R"({"ranks": 4})", "no \"version\""},
      {R"({"version": 1, "ranks": 4, "machine": "node1/host-threads",
           "predicted_lag_s": [0, 0, 0], "calibration": {}})",
       "\"predicted_lag_s\" must list 4 lags"},
      {R"({"version": 1, "ranks": 4, "machine": "node1/host-threads", "straggler": 9,
           "predicted_lag_s": [0, 0, 0, 0], "calibration": {}})",
       "\"straggler\" is not a rank of this job"},
      {R"({"version": 1, "ranks": 4, "machine": "node1/host-threads",
           "predicted_lag_s": [0, 0, 0, 0], "calibration": {"ring": {"20": {"ratios": ["x"]}}}})",
       "ratios must be positive"},
  };
  for (const auto& [text, message] : corrupt) {
    WriteFile(path, text);
    status = LoadState(path, 4, "node1/host-threads").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_THAT(status.message(), HasSubstr(message)) << text;
  }
  for (const char* version : {"0", "7"}) {
    WriteFile(path, absl::StrCat(R"({"version": )", version, "}"));
    status = LoadState(path, 4, "node1/host-threads").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << version;
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("format version ", version, ", this build reads 1 to 2")));
  }
}

// A FIFO (or a directory) as the state file is refused at once: reading one would wait for a
// writer and hang the job at its first call.
TEST(StateFileTest, OnlyARegularFileIsRead) {
  const std::string fifo = TempPath("state-fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::Status status = LoadState(fifo, 4, "node1/host-threads").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), absl::StrCat("state file ", fifo, " is not a regular file (a FIFO)"));
  std::remove(fifo.c_str());
  status = LoadState(::testing::TempDir(), 4, "node1/host-threads").status();
  EXPECT_THAT(status.message(), HasSubstr("is not a regular file (a directory)"));
}

}  // namespace
}  // namespace stragglar
