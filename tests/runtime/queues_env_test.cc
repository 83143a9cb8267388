// STRAGGLAR_QUEUES (the MPI library's per-class queues): read like every other setting, one line
// for an invalid value, which leaves the plans running round by round.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/env_config.h"
#include "tests/fake_env.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

using QueuesEnvTest = FakeEnvTest;

TEST_F(QueuesEnvTest, RoundsUnlessPerClassIsAskedFor) {
  std::vector<std::string> lines;
  EXPECT_FALSE(Parse(&lines).per_class_queues);
  EXPECT_THAT(DescribeConfig(Parse(&lines)), Not(HasSubstr("queues")));
  for (const auto& [value, per_class] : std::vector<std::pair<std::string, bool>>{
           {"per-class", true}, {" Per-Class ", true}, {"rounds", false}, {"", false}}) {
    FakeEnv()["STRAGGLAR_QUEUES"] = value;
    const PreloadConfig config = Parse(&lines);
    EXPECT_EQ(config.per_class_queues, per_class) << value;
    EXPECT_EQ(absl::StrContains(DescribeConfig(config), ", queues per-class"), per_class) << value;
  }
  EXPECT_THAT(lines, IsEmpty());
}

TEST_F(QueuesEnvTest, AnInvalidValueIsOneLineAndKeepsRounds) {
  FakeEnv() = {{"STRAGGLAR_QUEUES", "two"}, {"STRAGGLAR_MPI_SEGMENT", "64KiB"}};
  std::vector<std::string> lines;
  const PreloadConfig config = Parse(&lines);
  EXPECT_FALSE(config.per_class_queues);
  EXPECT_EQ(config.mpi_segment_bytes, 64 << 10);  // the other settings are kept
  EXPECT_THAT(lines, ElementsAre("STRAGGLAR_QUEUES=\"two\" is invalid (accepted: rounds, "
                                 "per-class); using rounds"));
}

TEST_F(QueuesEnvTest, IsAPreloadVariable) {
  EXPECT_THAT(PreloadVariableNames(), testing::Contains("STRAGGLAR_QUEUES"));
}

}  // namespace
}  // namespace stragglar
