#include "pipeline/pipeline_advisor.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace stragglar {
namespace {

using ::testing::ElementsAre;

PipelineSpec Stages() {
  PipelineSpec spec;
  spec.microbatches = 32;
  spec.forward_s.assign(8, 0.010);
  spec.backward_s.assign(8, 0.020);
  return spec;  // no link delays: the advisor takes them from the report
}

LinkEpochReport Report(std::optional<Link> slow, double delay_s) {
  LinkEpochReport report;
  report.slow_link = slow;
  for (int i = 0; i + 1 < 8; ++i) {
    for (Link link : {Link{i, i + 1}, Link{i + 1, i}}) {
      report.links.push_back(
          {.link = link, .transfers = 32, .mean_delay_s = slow == link ? delay_s : 0});
    }
  }
  return report;
}

// The goal case as the monitor would report it: the advice is the search's optimal counts, and
// the file says what they buy.
TEST(PipelineAdvisorTest, AdvisesTheSearchsCountsForTheNamedLink) {
  absl::StatusOr<std::optional<PipelineAdvice>> advice =
      AdviseWarmup(Report(Link{3, 4}, 0.030), Stages(), 16);
  ASSERT_TRUE(advice.ok()) << advice.status();
  ASSERT_TRUE(advice->has_value());
  const PipelineAdvice& a = **advice;
  EXPECT_EQ(a.slow_link, (Link{3, 4}));
  EXPECT_EQ(a.delay_s, 0.030);
  EXPECT_THAT(a.default_warmup, ElementsAre(8, 7, 6, 5, 4, 3, 2, 1));
  EXPECT_NEAR(a.default_iteration_s, 2.07, 1e-9);
  EXPECT_NEAR(a.iteration_s, 1.23, 1e-9);  // the lower bound
  for (int w : a.warmup) EXPECT_LE(w, 16);
  const nlohmann::json json = nlohmann::json::parse(AdviceJson(a));
  EXPECT_EQ(json["slow_link"]["src"], 3);
  EXPECT_EQ(json["slow_link"]["dst"], 4);
  EXPECT_EQ(json["warmup"], nlohmann::json(a.warmup));
  EXPECT_NEAR(json["speedup"].get<double>(), 2.07 / 1.23, 1e-9);
  // The gradient direction of the same link advises the same counts.
  absl::StatusOr<std::optional<PipelineAdvice>> back =
      AdviseWarmup(Report(Link{4, 3}, 0.030), Stages(), 16);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->warmup, a.warmup);
}

// Earlier advice stays while it is predicted within 2% of the best (no flapping between counts
// that are as good), and is replaced when it is not.
TEST(PipelineAdvisorTest, KeepsEarlierAdviceThatIsStillAsGood) {
  const LinkEpochReport report = Report(Link{3, 4}, 0.030);
  const std::vector<int> as_good = {16, 15, 13, 10, 6, 4, 2, 1};  // also at the bound, 1.23 s
  absl::StatusOr<std::optional<PipelineAdvice>> kept = AdviseWarmup(report, Stages(), 16, as_good);
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_EQ((*kept)->warmup, as_good);
  EXPECT_NEAR((*kept)->iteration_s, 1.23, 1e-9);
  EXPECT_THAT((*kept)->method, ::testing::StartsWith("kept: within 2% of the best"));
  const std::vector<int> worse = {8, 7, 6, 5, 4, 3, 2, 1};  // 2.07 s
  absl::StatusOr<std::optional<PipelineAdvice>> replaced =
      AdviseWarmup(report, Stages(), 16, worse);
  ASSERT_TRUE(replaced.ok() && replaced->has_value());
  EXPECT_NE((*replaced)->warmup, worse);
  EXPECT_NEAR((*replaced)->iteration_s, 1.23, 1e-9);
}

TEST(PipelineAdvisorTest, NoAdviceWithoutASlowPipelineLink) {
  EXPECT_FALSE(AdviseWarmup(Report(std::nullopt, 0), Stages(), 16)->has_value());
  EXPECT_FALSE(AdviseWarmup(Report(Link{1, 5}, 0.030), Stages(), 16)->has_value());
  EXPECT_EQ(AdviseWarmup(Report(Link{8, 9}, 0.030), Stages(), 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  PipelineSpec one_stage = Stages();
  one_stage.forward_s = {0.01};
  EXPECT_EQ(AdviseWarmup(Report(Link{3, 4}, 0.030), one_stage, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stragglar
