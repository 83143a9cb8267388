// The CLI on a machine of nodes (`--topology NxG`): plans for nodes, their simulation against
// NCCL's closed forms and the hierarchical ring, and the host runtime on an emulated machine.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/plan/plan.h"
#include "kernels/plan/verifier.h"
#include "kernels/synth/synthesizers.h"
#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CliTest, PlanForAMachineOfNodesIsHierarchical) {
  CliResult table = RunCli("plan --algorithm stragglar --topology 2x2");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("4 ranks, 2 chunks, straggler 3, hierarchical on 2x2"));
  EXPECT_THAT(table.out, HasSubstr("rounds: 4 (1 pre-arrival, 3 post-arrival)"));
  // Between the nodes only the rails: 0<->2 and 1<->3, each with its own shard.
  EXPECT_THAT(table.out, HasSubstr("0->2 +c0  2->0 +c0  1->3 +c1  3->1 +c1"));
  CliResult json = RunCli("plan --algorithm stragglar --topology 3x2 --straggler 1 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["topology"]["nodes"], 3);
  EXPECT_EQ(parsed["topology"]["ranks_per_node"], 2);
  EXPECT_EQ(parsed["variant"], "hierarchical");
  absl::StatusOr<Plan> plan = PlanFromJson(parsed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->straggler, 1);
  EXPECT_TRUE(VerifyPlan(*plan).ok()) << VerifyPlan(*plan);
  EXPECT_EQ(RunCli("verify --plan -", json.out).exit_code, 0);
  // The hierarchical ring: node rings around the rails, 2(G - 1) + 2(N - 1) rounds.
  CliResult ring = RunCli("plan --algorithm ring --topology 3x2 --json");
  ASSERT_EQ(ring.exit_code, 0) << ring.err;
  const nlohmann::json ring_json = nlohmann::json::parse(ring.out);
  EXPECT_EQ(ring_json["algorithm"], "ring");
  EXPECT_EQ(ring_json["variant"], "hierarchical");
  EXPECT_EQ(ring_json["rounds"].size(), 6u);
  EXPECT_EQ(RunCli("verify --plan -", ring.out).exit_code, 0);
  // Hierarchical StragglAR whose rails are log-depth StragglAR in 2 blocks.
  CliResult rails = RunCli("plan --algorithm stragglar-log-depth --topology 3x2 --pieces 2 --json");
  ASSERT_EQ(rails.exit_code, 0) << rails.err;
  const nlohmann::json rails_json = nlohmann::json::parse(rails.out);
  EXPECT_EQ(rails_json["variant"], "hierarchical");
  EXPECT_EQ(rails_json["blocks"], 2);
  EXPECT_EQ(*PlanFromJson(rails_json), *SynthesizeHierarchicalStragglar(3, 2, 5, 2));
  EXPECT_EQ(RunCli("verify --plan -", rails.out).exit_code, 0);
  // One node has no rails: the flat plan, said as such, without a block count.
  CliResult one_node = RunCli("plan --algorithm stragglar-log-depth --topology 1x4 --pieces 2");
  ASSERT_EQ(one_node.exit_code, 0) << one_node.err;
  EXPECT_THAT(one_node.out, HasSubstr("one level on 1x4: the flat plan"));
  EXPECT_THAT(one_node.out, Not(HasSubstr("rails")));
}

TEST(CliTest, SimPricesHierarchicalStragglarWithItsFastestRails) {
  // 32 nodes of 8 at 64 MiB: the flat rails are a chain of 35 latencies; log-depth rails in 8
  // blocks of a shard are faster, and the result says so.
  CliResult result = RunCli(
      "sim --topology 32x8 --bytes 64MiB --delay 1s --algorithms stragglar-hierarchical --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json row = nlohmann::json::parse(result.out)["results"][0];
  EXPECT_EQ(row["algorithm"], "stragglar-hierarchical");
  EXPECT_EQ(row["blocks"], 8);
  CliResult table = RunCli("sim --topology 32x8 --bytes 64MiB --algorithms stragglar-hierarchical");
  EXPECT_THAT(table.out, HasSubstr("stragglar-hierarchical: log-depth rails, a shard in 8 blocks"));
  // The emulated 4x2 cluster's links: flat rails pipelined in 8 pieces, as the policy picks.
  const std::string cluster =
      "sim --topology 4x2 --bytes 2MiB --alpha 60us --bandwidth 2.8GB/s --inter-alpha 160us "
      "--inter-bandwidth 7.02MB/s --delay 1s --algorithms stragglar-hierarchical";
  CliResult pipelined = RunCli(cluster + " --json");
  ASSERT_EQ(pipelined.exit_code, 0) << pipelined.err;
  const nlohmann::json pipelined_row = nlohmann::json::parse(pipelined.out)["results"][0];
  EXPECT_EQ(pipelined_row["rail_pieces"], 8);
  EXPECT_FALSE(pipelined_row.contains("blocks"));
  EXPECT_THAT(RunCli(cluster).out,
              HasSubstr("stragglar-hierarchical: flat rails, pipelined in 8 pieces per chunk"));
  // The emulated 8x2 cluster's links: log-depth rails are 5.5% faster with their phase hidden,
  // slower with the straggler as late as the flat rails' phase, and so not picked at any delay.
  const std::string eight_nodes =
      "sim --topology 8x2 --bytes 1MiB --alpha 103us --bandwidth 0.915GB/s --inter-alpha 379us "
      "--inter-bandwidth 2.92MB/s --queues per-class --algorithms stragglar-hierarchical --delay ";
  for (const char* delay : {"353ms", "2s"}) {
    EXPECT_THAT(RunCli(eight_nodes + delay).out,
                HasSubstr("stragglar-hierarchical: flat rails, pipelined in 8 pieces per chunk"))
        << delay;
  }
  // One node has no rails to pipeline: the flat plan, not an error for 63 x 4 pieces.
  CliResult one_node =
      RunCli("sim --topology 1x64 --bytes 1MiB --algorithms stragglar-hierarchical");
  EXPECT_EQ(one_node.exit_code, 0) << one_node.err;
}

TEST(CliTest, PlanOnNodesPipelinesItsFlatRailsInPieces) {
  CliResult json = RunCli("plan --algorithm stragglar --topology 4x2 --pieces 8 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["pieces"], 8);
  EXPECT_EQ(*PlanFromJson(parsed), *SynthesizeHierarchicalStragglar(4, 2, 7, 0, 1, 8));
  EXPECT_EQ(RunCli("verify --plan -", json.out).exit_code, 0);
  EXPECT_THAT(RunCli("plan --algorithm stragglar --topology 4x2 --pieces 8").out,
              HasSubstr("48 chunks, straggler 7, hierarchical on 4x2, flat rails in 8 pieces"));
}

TEST(CliTest, SimOnAMachineOfNodesComparesWithNcclsAlgorithms) {
  CliResult result = RunCli(
      "sim --topology 4x2 --bytes 64MiB --inter-alpha 10us --inter-bandwidth 50GB/s --delay 5ms "
      "--json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["ranks"], 8);
  EXPECT_EQ(json["straggler"], 7);
  EXPECT_EQ(json["topology"]["nodes"], 4);
  EXPECT_EQ(json["topology"]["ranks_per_node"], 2);
  EXPECT_DOUBLE_EQ(json["topology"]["inter_node"]["alpha_s"].get<double>(), 10e-6);
  EXPECT_DOUBLE_EQ(json["topology"]["inter_node"]["bandwidth_Bps"].get<double>(), 50e9);
  std::vector<std::string> names;
  for (const nlohmann::json& row : json["results"]) {
    names.push_back(row["algorithm"]);
    const bool closed_form = row["model"] == "closed-form";
    EXPECT_EQ(closed_form, absl::StartsWith(names.back(), "nccl-")) << names.back();
    EXPECT_EQ(row["family"],
              absl::StartsWith(names.back(), "stragglar") ? "stragglar" : "baseline");
    EXPECT_NEAR(row["completion_s"].get<double>() - row["after_last_arrival_s"].get<double>(),
                0.005, 1e-12);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ring", "halving-doubling", "stragglar",
                                             "stragglar-hierarchical", "nccl-ring", "nccl-tree",
                                             "stragglar-log-depth", "ring-hierarchical"}));
  // NCCL's ring: 2N = 8 network steps of 14, 7/4 of the bytes through a NIC shared by 2 rails.
  EXPECT_NEAR(json["results"][4]["after_last_arrival_s"].get<double>(),
              6 * 3e-6 + 8 * 10e-6 + 2.0 * 7 / 8 * (64 << 20) / 2 / 50e9, 1e-12);
  // Each plan of StragglAR's family has its break-even against every baseline; the contract's
  // top-level one is the flat plan's.
  for (const char* baseline :
       {"ring", "halving-doubling", "nccl-ring", "nccl-tree", "ring-hierarchical"}) {
    EXPECT_TRUE(json["break_even_delay_s"].contains(baseline)) << baseline;
    EXPECT_TRUE(json["results"][3]["break_even_delay_s"].contains(baseline)) << baseline;
  }
  EXPECT_EQ(json["break_even_delay_s"], json["results"][2]["break_even_delay_s"]);
  EXPECT_FALSE(json["results"][3]["break_even_delay_s"].contains("stragglar"));
  // The table says which rows are NCCL's closed forms.
  CliResult table =
      RunCli("sim --topology 2x4 --bytes 1MiB --algorithms nccl-tree,stragglar-hierarchical");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("sim: 2x4 (2 nodes of 4 ranks)"));
  EXPECT_THAT(table.out, HasSubstr("break-even vs nccl-tree: stragglar-hierarchical"));
}

TEST(CliTest, RunOnAnEmulatedMachineOfNodesDelaysWhatCrossesThem) {
  // 2 nodes of 2: every result needs contributions from the other node, through an emulated NIC
  // that holds each message for at least 2 ms, so the Ring baseline (on nodes, the hierarchical
  // ring) takes at least that (64 KiB on this host takes far less). The model charges a whole
  // round for each of its 2 rounds along the rails (0<->2, 1<->3): at least 4 ms. The executor
  // overlaps a message's delivery with its sender's next round, so it may be faster than that.
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "run-nodes";
  std::filesystem::create_directories(dir);
  CliResult result = RunCli(absl::StrCat(
      "run --topology 2x2 --inter-alpha 2ms --inter-bandwidth 1GB/s --straggler 1 --delay 1ms "
      "--bytes 64KiB --iterations 3 --epoch-calls 2 --summary-json ",
      (dir / "summary.json").string()));
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  EXPECT_THAT(result.out, HasSubstr("emulated machine: 2 nodes of 2 ranks; between nodes alpha"));
  EXPECT_THAT(result.out, HasSubstr("model: the hierarchical ring takes"));
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["ranks"], 4);
  EXPECT_EQ(summary["correct"], true);
  EXPECT_EQ(summary["topology"]["nodes"], 2);
  EXPECT_EQ(summary["topology"]["ranks_per_node"], 2);
  EXPECT_DOUBLE_EQ(summary["topology"]["inter_node"]["alpha_s"].get<double>(), 2e-3);
  // The policy prices what the rails' rings measured through the emulated NICs.
  EXPECT_THAT(result.out, HasSubstr("measured between nodes: alpha"));
  EXPECT_GE(summary["topology"]["inter_node_measured"]["alpha_s"].get<double>(), 2e-3);
  EXPECT_GE(summary["baseline"]["p50_s"].get<double>(), 2e-3);
  EXPECT_GE(summary["baseline"]["model_s"].get<double>(), 2 * 2e-3);
  EXPECT_EQ(summary["baseline"]["variant"], "hierarchical");
}

TEST(CliTest, RunOnPerClassQueuesIsExactAndSaysSo) {
  // The same emulated machine with every rank on one queue per link class: results still exact,
  // the summary and the log say how the ranks ran, and the model line prices that way (its
  // hierarchical ring still waits 2 ms for each of the rails' two rounds in a row, at least 4 ms).
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "run-queues";
  std::filesystem::create_directories(dir);
  CliResult result = RunCli(absl::StrCat(
      "run --topology 2x2 --inter-alpha 2ms --inter-bandwidth 1GB/s --straggler 1 --delay 1ms "
      "--bytes 64KiB --iterations 3 --epoch-calls 2 --queues per-class --summary-json ",
      (dir / "summary.json").string()));
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  EXPECT_THAT(result.out, HasSubstr("per NIC; one queue per link class"));
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["correct"], true);
  EXPECT_EQ(summary["topology"]["queues"], "per-class");
  EXPECT_GE(summary["baseline"]["model_s"].get<double>(), 2 * 2e-3);
  // Queues mean link classes: without nodes, or with a wrong name, one line of error.
  CliResult flat = RunCli("run --ranks 4 --queues per-class --iterations 1");
  EXPECT_NE(flat.exit_code, 0);
  EXPECT_EQ(flat.out, "");
  EXPECT_EQ(flat.err,
            "stragglar run: --queues needs --topology NxG: one machine has one link class\n");
  CliResult bad = RunCli("run --topology 2x2 --queues both --iterations 1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(bad.err, "stragglar run: --queues must be rounds or per-class, got \"both\"\n");
}

TEST(CliTest, SimWithPerClassQueuesPricesThePlanWrittenForThem) {
  // 8 nodes of 8, 1 GiB: with a send and a receive queue per link class hierarchical StragglAR
  // moves its shards chunk by chunk (flat rails in 4 pieces: 28 chunks a shard), in the order
  // timed for those queues, and beats NCCL's tree by 1.47x; round by round it is the plan in one
  // piece.
  const std::string sim =
      "sim --topology 8x8 --bytes 1GiB --delay 1s --straggler 63 "
      "--algorithms stragglar-hierarchical,nccl-tree --json";
  CliResult queues = RunCli(sim + " --queues per-class");
  ASSERT_EQ(queues.exit_code, 0) << queues.err;
  const nlohmann::json parsed = nlohmann::json::parse(queues.out);
  EXPECT_EQ(parsed["queues"], "per-class");
  const nlohmann::json& ours = parsed["results"][0];
  EXPECT_EQ(ours["algorithm"], "stragglar-hierarchical");
  EXPECT_EQ(ours["pieces"], 28);
  EXPECT_EQ(ours["rail_pieces"], 4);
  EXPECT_EQ(ours["queue_timed_bytes"], 1 << 30);
  EXPECT_FALSE(ours.contains("break_even_delay_s"));
  EXPECT_FALSE(parsed.contains("break_even_delay_s"));
  const double tree_s = parsed["results"][1]["after_last_arrival_s"];
  EXPECT_GT(tree_s / ours["after_last_arrival_s"].get<double>(), 1.45);
  CliResult rounds = RunCli(sim);
  ASSERT_EQ(rounds.exit_code, 0) << rounds.err;
  const nlohmann::json round_json = nlohmann::json::parse(rounds.out);
  EXPECT_EQ(round_json["queues"], "rounds");
  EXPECT_FALSE(round_json["results"][0].contains("pieces"));
  EXPECT_LT(tree_s / round_json["results"][0]["after_last_arrival_s"].get<double>(), 1.0);
  CliResult table = RunCli(
      "sim --topology 8x8 --bytes 1GiB --delay 1s --algorithms stragglar-hierarchical "
      "--queues per-class");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("gathered inside nodes chunk by chunk, in the order the "
                                   "transfers can start on per-class queues for calls of 1 GiB"));
  EXPECT_THAT(table.out, HasSubstr("--queues per-class"));
  CliResult bad = RunCli("sim --topology 2x2 --bytes 1MiB --queues both");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(bad.err, "stragglar sim: --queues must be rounds or per-class, got \"both\"\n");
}

}  // namespace
}  // namespace stragglar
