// STRAGGLAR_LINK_PROFILING and the pipeline's stage times for the link advisor
// (docs/pipeline.md): read like every other setting, one line per invalid value.
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

using EnvConfigTest = FakeEnvTest;

TEST_F(EnvConfigTest, LinkProfilingAndPipelineStageTimes) {
  std::vector<std::string> lines;
  PreloadConfig config = Parse(&lines);
  EXPECT_FALSE(config.link_profiling);
  EXPECT_FALSE(config.pipeline.complete());
  FakeEnv() = {{"STRAGGLAR_LINK_PROFILING", " ON "},
               {"STRAGGLAR_LINK_ADDR", "10.1.2.3"},
               {"STRAGGLAR_PIPELINE_MICROBATCHES", "32"},
               {"STRAGGLAR_PIPELINE_FORWARD", "10ms"},
               {"STRAGGLAR_PIPELINE_BACKWARD", "20ms, 21ms,19ms,20ms"},
               {"STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", "16"}};
  config = Parse(&lines);
  EXPECT_THAT(lines, IsEmpty());
  EXPECT_TRUE(config.link_profiling);
  EXPECT_EQ(config.link_host, "10.1.2.3");
  EXPECT_TRUE(config.pipeline.complete());
  EXPECT_EQ(config.pipeline.memory_microbatches, 16);
  EXPECT_THAT(DescribeConfig(config), HasSubstr("link profiling on"));
  absl::StatusOr<PipelineSpec> spec = PipelineSpecFor(config.pipeline, 4);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->microbatches, 32);
  EXPECT_THAT(spec->forward_s, ElementsAre(10e-3, 10e-3, 10e-3, 10e-3));
  EXPECT_THAT(spec->backward_s, ElementsAre(20e-3, 21e-3, 19e-3, 20e-3));
  EXPECT_EQ(spec->link_delay_s.size(), 3u);
  EXPECT_THAT(PipelineSpecFor(config.pipeline, 3).status().message(),
              HasSubstr("STRAGGLAR_PIPELINE_BACKWARD has 4 times for a pipeline of 3 stages"));
  // Each bad value is one line and leaves that setting unset; the others stand.
  FakeEnv() = {
      {"STRAGGLAR_LINK_PROFILING", "yes"},      {"STRAGGLAR_LINK_ADDR", "node7"},
      {"STRAGGLAR_PIPELINE_MICROBATCHES", "0"}, {"STRAGGLAR_PIPELINE_FORWARD", "10ms,0ms"},
      {"STRAGGLAR_PIPELINE_BACKWARD", "20"},    {"STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", "8"}};
  config = Parse(&lines);
  EXPECT_THAT(lines,
              ElementsAre(HasSubstr("STRAGGLAR_LINK_PROFILING=\"yes\" is invalid (accepted: on, "
                                    "off); using off"),
                          HasSubstr("STRAGGLAR_LINK_ADDR=\"node7\" is invalid (accepted: an IPv4 "
                                    "address)"),
                          HasSubstr("STRAGGLAR_PIPELINE_MICROBATCHES=\"0\" is invalid"),
                          HasSubstr("STRAGGLAR_PIPELINE_FORWARD=\"10ms,0ms\" is invalid"),
                          HasSubstr("STRAGGLAR_PIPELINE_BACKWARD=\"20\" is invalid")));
  EXPECT_FALSE(config.link_profiling);
  EXPECT_EQ(config.pipeline.memory_microbatches, 8);
  EXPECT_FALSE(config.pipeline.complete());
  EXPECT_THAT(PipelineSpecFor(config.pipeline, 4).status().message(), HasSubstr("all needed"));
}

}  // namespace
}  // namespace stragglar
