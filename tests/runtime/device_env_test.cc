// STRAGGLAR_EXECUTOR and the device executor's STRAGGLAR_IPC_* settings: read like every other
// setting, one line per invalid value, which leaves that setting at its default.
#include <string>
#include <vector>

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

using DeviceEnvTest = FakeEnvTest;

TEST_F(DeviceEnvTest, DefaultsAreTheNcclExecutor) {
  std::vector<std::string> lines;
  const PreloadConfig config = Parse(&lines);
  EXPECT_THAT(lines, IsEmpty());
  EXPECT_FALSE(config.device_executor);
  EXPECT_EQ(config.ipc_bytes, 32 << 20);
  EXPECT_EQ(config.ipc_timeout_s, 300);
  EXPECT_EQ(config.ipc_ctas, 8);
  EXPECT_FALSE(config.device_system_scope);
  EXPECT_THAT(DescribeConfig(config), Not(HasSubstr("executor")));
}

TEST_F(DeviceEnvTest, EverySettingIsRead) {
  FakeEnv() = {
      {"STRAGGLAR_EXECUTOR", " Device "},     {"STRAGGLAR_IPC_BYTES", "64MiB"},
      {"STRAGGLAR_IPC_TIMEOUT", "90s"},       {"STRAGGLAR_IPC_BLOCKS", "16"},
      {"STRAGGLAR_DEVICE_SCOPE", " System "}, {"STRAGGLAR_DEVICE_STAMPS", " /tmp/run/stamps "}};
  std::vector<std::string> lines;
  const PreloadConfig config = Parse(&lines);
  EXPECT_THAT(lines, IsEmpty());
  EXPECT_TRUE(config.device_executor);
  EXPECT_EQ(config.device_stamps, "/tmp/run/stamps");
  EXPECT_EQ(config.ipc_bytes, 64 << 20);
  EXPECT_EQ(config.ipc_timeout_s, 90);
  EXPECT_EQ(config.ipc_ctas, 16);
  EXPECT_TRUE(config.device_system_scope);
  EXPECT_THAT(DescribeConfig(config), HasSubstr("executor device (window 64 MiB, 16 CTAs"));
  EXPECT_THAT(DescribeConfig(config), HasSubstr(", system scope)"));
  FakeEnv()["STRAGGLAR_IPC_TIMEOUT"] = "0";
  EXPECT_THAT(DescribeConfig(Parse(&lines)), HasSubstr("timeout none"));
}

TEST_F(DeviceEnvTest, EachBadValueIsOneLineAndKeepsItsDefault) {
  FakeEnv() = {{"STRAGGLAR_EXECUTOR", "gpu"},
               {"STRAGGLAR_IPC_BYTES", "512KiB"},
               {"STRAGGLAR_IPC_TIMEOUT", "-1s"},
               {"STRAGGLAR_IPC_BLOCKS", "65"},
               {"STRAGGLAR_DEVICE_SCOPE", "gpu"}};
  std::vector<std::string> lines;
  const PreloadConfig config = Parse(&lines);
  EXPECT_THAT(
      lines,
      ElementsAre(HasSubstr("STRAGGLAR_EXECUTOR=\"gpu\" is invalid (accepted: nccl, device)"),
                  HasSubstr("STRAGGLAR_IPC_BYTES=\"512KiB\" is invalid"),
                  HasSubstr("STRAGGLAR_IPC_TIMEOUT=\"-1s\" is invalid"),
                  HasSubstr("STRAGGLAR_IPC_BLOCKS=\"65\" is invalid (accepted: an integer from 1 "
                            "to 64); using 8"),
                  HasSubstr("STRAGGLAR_DEVICE_SCOPE=\"gpu\" is invalid (accepted: auto, system); "
                            "using auto")));
  EXPECT_FALSE(config.device_executor);
  EXPECT_EQ(config.ipc_bytes, 32 << 20);
  EXPECT_EQ(config.ipc_timeout_s, 300);
  EXPECT_EQ(config.ipc_ctas, 8);
  EXPECT_FALSE(config.device_system_scope);
}

TEST_F(DeviceEnvTest, TheDoctorKnowsTheVariables) {
  for (const char* name : {"STRAGGLAR_EXECUTOR", "STRAGGLAR_IPC_BYTES", "STRAGGLAR_IPC_TIMEOUT",
                           "STRAGGLAR_IPC_BLOCKS", "STRAGGLAR_DEVICE_SCOPE"}) {
    EXPECT_THAT(PreloadVariableNames(), testing::Contains(name));
  }
}

}  // namespace
}  // namespace stragglar
