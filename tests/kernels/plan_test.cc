#include "kernels/plan/plan.h"

#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"
#include "nlohmann/json.hpp"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

TEST(PlanHeaderTest, HeaderOfCopiesEveryFieldButTheRounds) {
  // Every field away from its default, so that a field HeaderOf leaves out shows.
  Plan plan{.algorithm = Algorithm::kStragglar,
            .num_ranks = 9,
            .num_chunks = 16,
            .straggler = 4,
            .pre_arrival_rounds = 2,
            .variant = PlanVariant::kLogDepth};
  plan.rounds.resize(5);
  EXPECT_EQ(HeaderOf(plan), (PlanHeader{.algorithm = Algorithm::kStragglar,
                                        .num_ranks = 9,
                                        .num_chunks = 16,
                                        .straggler = 4,
                                        .pre_arrival_rounds = 2,
                                        .variant = PlanVariant::kLogDepth,
                                        .round_count = 5}));
  EXPECT_EQ(HeaderOf(plan).post_arrival_rounds(), plan.post_arrival_rounds());
}

TEST(ChunkElementsTest, CoversEveryElementExactlyOnceForAnyCount) {
  for (int64_t count : {0, 1, 2, 5, 6, 7, 63, 64, 1000003}) {
    for (int chunks : {1, 2, 3, 7, 8, 63}) {
      int64_t next = 0;
      for (int chunk = 0; chunk < chunks; ++chunk) {
        const ElementRange range = ChunkElements(count, chunks, chunk);
        EXPECT_EQ(range.begin, next) << count << " elements, chunk " << chunk << "/" << chunks;
        EXPECT_GE(range.size(), count / chunks);
        EXPECT_LE(range.size(), count / chunks + 1);
        next = range.end;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(ChunkElementsTest, MatchesTheContractFormula) {
  // [floor(i*count/k), floor((i+1)*count/k)): 10 elements in 4 chunks -> 2, 3, 2, 3.
  EXPECT_EQ(ChunkElements(10, 4, 0).size(), 2);
  EXPECT_EQ(ChunkElements(10, 4, 1).begin, 2);
  EXPECT_EQ(ChunkElements(10, 4, 1).size(), 3);
  EXPECT_EQ(ChunkElements(10, 4, 3).end, 10);
  // Fewer elements than chunks: most chunks are empty.
  EXPECT_EQ(ChunkElements(2, 7, 0).size(), 0);
  EXPECT_EQ(ChunkElements(2, 7, 3).size(), 1);
  EXPECT_EQ(ChunkElements(2, 7, 6).size(), 1);
  // Large buffers do not overflow.
  const int64_t huge = int64_t{1} << 40;
  EXPECT_EQ(ChunkElements(huge, 1023, 1022).end, huge);
}

TEST(AlgorithmTest, NamesRoundTripAndUnknownNamesAreRejected) {
  for (Algorithm algorithm : kAllAlgorithms) {
    absl::StatusOr<Algorithm> parsed = ParseAlgorithm(AlgorithmName(algorithm));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, algorithm);
  }
  absl::StatusOr<Algorithm> unknown = ParseAlgorithm("tree");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown algorithm \"tree\""));
  EXPECT_THAT(unknown.status().message(), HasSubstr("halving-doubling"));
}

TEST(PlanFamilyTest, EveryFamilyHasOneNameThatFindsItAndNoOther) {
  std::set<std::string> names;
  for (PlanFamily family : kPlanFamilies) {
    const std::string name(PlanFamilyName(family));
    EXPECT_TRUE(names.insert(name).second) << name << " names two families";
    EXPECT_EQ(FindPlanFamily(name), family) << name;
    // A flat family is its algorithm's name; the others add their variant's.
    EXPECT_EQ(name, family.variant == PlanVariant::kFlat
                        ? std::string(AlgorithmName(family.algorithm))
                        : absl::StrCat(AlgorithmName(family.algorithm), "-",
                                       PlanVariantName(family.variant)));
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"ring", "halving-doubling", "stragglar", "stragglar-log-depth",
                                   "stragglar-hierarchical", "ring-hierarchical"}));
  // Exactly, as the CLI reads them; native and auto are no plan family.
  for (absl::string_view other :
       {"Stragglar-Log-Depth", "native", "auto", "halving-doubling-hierarchical", "", "tree"}) {
    EXPECT_EQ(FindPlanFamily(other), std::nullopt) << other;
  }
}

TEST(AlgorithmTest, NativeIsAnAlgorithmButNoPlan) {
  // Traces and the calibration name what ran, the library's own AllReduce too; plans, their JSON,
  // their synthesis and the CLI's lists of plans refuse it in one line naming the plans.
  EXPECT_EQ(*ParseAlgorithm("native"), Algorithm::kNative);
  EXPECT_EQ(AlgorithmFamily(Algorithm::kNative), "baseline");
  EXPECT_EQ(*ParsePlanAlgorithm("ring"), Algorithm::kRing);
  for (absl::string_view name : {"native", "tree"}) {
    const absl::Status refused = ParsePlanAlgorithm(name).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(refused.message(), HasSubstr("expected one of ring, halving-doubling, stragglar"));
  }
  EXPECT_THAT(ParsePlanAlgorithm("native").status().message(), HasSubstr("not a plan"));
  EXPECT_THAT(ParseAlgorithmList("ring,native").status().message(), HasSubstr("not a plan"));
  EXPECT_THAT(SynthesizePlan(Algorithm::kNative, 4, std::nullopt).status().message(),
              HasSubstr("has no plan"));
}

TEST(AlgorithmTest, ListsParseInOrderAndRejectDuplicatesAndEmptyItems) {
  absl::StatusOr<std::vector<Algorithm>> list = ParseAlgorithmList("stragglar,ring");
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, ::testing::ElementsAre(Algorithm::kStragglar, Algorithm::kRing));
  EXPECT_FALSE(ParseAlgorithmList("ring,ring").ok());
  EXPECT_FALSE(ParseAlgorithmList("ring,").ok());
  EXPECT_FALSE(ParseAlgorithmList("").ok());
}

TEST(PlanJsonTest, HasTheContractShape) {
  absl::StatusOr<Plan> plan = SynthesizeStragglar(4, 3);
  ASSERT_TRUE(plan.ok());
  const nlohmann::json json = PlanToJson(*plan);
  EXPECT_EQ(json["algorithm"], "stragglar");
  EXPECT_EQ(json["ranks"], 4);
  EXPECT_EQ(json["straggler"], 3);
  EXPECT_EQ(json["chunks"], 3);
  ASSERT_EQ(json["rounds"].size(), plan->rounds.size());
  const nlohmann::json& first_post = json["rounds"][plan->pre_arrival_rounds]["transfers"];
  bool saw_exchange = false;
  for (const nlohmann::json& transfer : first_post) {
    EXPECT_TRUE(transfer.contains("src") && transfer.contains("dst"));
    if (transfer["src"] == 0 && transfer["dst"] == 3) {
      EXPECT_EQ(transfer["chunks"], nlohmann::json::array({0}));
      EXPECT_EQ(transfer["op"], "reduce");
      saw_exchange = true;
    }
  }
  EXPECT_TRUE(saw_exchange);
  absl::StatusOr<Plan> ring = SynthesizeRing(3);
  ASSERT_TRUE(ring.ok());
  EXPECT_TRUE(PlanToJson(*ring)["straggler"].is_null());
}

TEST(PlanJsonTest, RoundTripsEveryAlgorithm) {
  for (Algorithm algorithm : kPlanAlgorithms) {
    absl::StatusOr<Plan> plan = SynthesizePlan(
        algorithm, 6, algorithm == Algorithm::kStragglar ? std::optional<int>(2) : std::nullopt);
    ASSERT_TRUE(plan.ok());
    absl::StatusOr<Plan> parsed = PlanFromJson(nlohmann::json::parse(PlanToJson(*plan).dump()));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, *plan) << AlgorithmName(algorithm);
  }
  // StragglAR's other families keep their variant.
  for (const Plan& plan :
       {*SynthesizeLogDepthStragglar(6, 2, 4), *SynthesizeHierarchicalStragglar(3, 2, 1)}) {
    const nlohmann::json json = PlanToJson(plan);
    EXPECT_EQ(json["variant"].get<std::string>(), PlanVariantName(plan.variant));
    absl::StatusOr<Plan> parsed = PlanFromJson(json);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, plan) << PlanVariantName(plan.variant);
  }
  EXPECT_FALSE(PlanToJson(*SynthesizeStragglar(6, 2)).contains("variant"));
}

// Streamed round by round, the text is exactly the whole document's dump(2), extra members and
// all, for plans with one round, many rounds and none.
TEST(PlanJsonTest, WrittenTransferByTransferIsTheWholeDocumentByteForByte) {
  Plan empty = *SynthesizeRing(2);
  empty.rounds.clear();
  Plan empty_round = *SynthesizeRing(3);
  empty_round.rounds[1].transfers.clear();
  const nlohmann::json topology = {{"topology", {{"nodes", 3}, {"ranks_per_node", 2}}},
                                   {"variant", "hierarchical"}};
  for (const auto& [plan, extra] : std::vector<std::pair<Plan, nlohmann::json>>{
           {*SynthesizeRing(2), nlohmann::json::object()},
           {*SynthesizeStragglar(7, 3, 2), nlohmann::json::object()},
           {*SynthesizeHalvingDoubling(6), {{"blocks", 4}}},
           {*SynthesizeHierarchicalStragglar(3, 2, 1), topology},
           {empty, nlohmann::json::object()},
           {empty_round, nlohmann::json::object()}}) {
    nlohmann::json whole = PlanToJson(plan);
    whole.update(extra);
    std::ostringstream streamed;
    WritePlanJson(plan, extra, streamed);
    EXPECT_EQ(streamed.str(), whole.dump(2)) << AlgorithmName(plan.algorithm);
  }
}

TEST(PlanJsonTest, MalformedPlansNameTheProblem) {
  const nlohmann::json good = PlanToJson(*SynthesizeRing(3));
  auto message = [](const nlohmann::json& json) {
    absl::StatusOr<Plan> plan = PlanFromJson(json);
    return plan.ok() ? std::string("ok") : std::string(plan.status().message());
  };
  nlohmann::json bad = good;
  bad.erase("ranks");
  EXPECT_THAT(message(bad), HasSubstr("missing \"ranks\""));
  bad = good;
  bad["algorithm"] = "tree";
  EXPECT_THAT(message(bad), HasSubstr("unknown algorithm"));
  bad["algorithm"] = "native";
  EXPECT_THAT(message(bad), HasSubstr("\"native\" is the communication library's own AllReduce"));
  bad = good;
  bad["rounds"][1]["transfers"][0]["op"] = "xor";
  EXPECT_THAT(message(bad), HasSubstr("round 1 transfer 0"));
  bad = good;
  bad["rounds"][0]["transfers"][2]["chunks"] = "0";
  EXPECT_THAT(message(bad), HasSubstr("\"chunks\" must be an array"));
  EXPECT_THAT(message(nlohmann::json::array()), HasSubstr("not a JSON object"));
  bad = good;
  bad["variant"] = "diagonal";
  EXPECT_THAT(message(bad), HasSubstr("\"variant\" must be"));
  // Integers that do not fit in 32 bits are refused, not read modulo 2^32: "ranks": 2^32 + 3
  // read as 3 and verified as a good 3-rank plan.
  bad = good;
  bad["ranks"] = (int64_t{1} << 32) + 3;
  EXPECT_EQ(message(bad), "plan: \"ranks\" must be a 32-bit signed integer, got 4294967299");
  bad = good;
  bad["chunks"] = uint64_t{1} << 63;
  EXPECT_THAT(message(bad), HasSubstr("\"chunks\" must be a 32-bit signed integer"));
  bad = good;
  bad["rounds"][0]["transfers"][0]["src"] = -(int64_t{1} << 32);
  EXPECT_THAT(message(bad), HasSubstr("\"src\" must be a 32-bit signed integer"));
  bad = good;
  const int first_chunk = good["rounds"][0]["transfers"][0]["chunks"][0].get<int>();
  bad["rounds"][0]["transfers"][0]["chunks"][0] = (int64_t{1} << 32) + first_chunk;
  EXPECT_THAT(message(bad), HasSubstr("chunk ids must be 32-bit signed integers, got 42949672"));
  // Ranks and chunks beyond what any plan has are refused before anything is sized by them
  // ("ranks": 100000000 ended in std::bad_alloc in the verifier).
  bad = good;
  bad["ranks"] = 100000000;
  EXPECT_EQ(message(bad), "plan: \"ranks\" must be in [1, 65536], got 100000000");
  bad = good;
  bad["chunks"] = (1 << 24) + 1;
  EXPECT_EQ(message(bad), "plan: \"chunks\" must be in [1, 16777216], got 16777217");
  bad = good;
  bad["chunks"] = 0;
  EXPECT_EQ(message(bad), "plan: \"chunks\" must be in [1, 16777216], got 0");
  // The largest and smallest that fit are read as they are.
  bad = good;
  bad["ranks"] = 65536;
  bad["chunks"] = 1 << 24;
  bad["straggler"] = std::numeric_limits<int>::min();
  absl::StatusOr<Plan> edges = PlanFromJson(bad);
  ASSERT_TRUE(edges.ok()) << edges.status();
  EXPECT_EQ(edges->num_ranks, 65536);
  EXPECT_EQ(edges->num_chunks, 1 << 24);
  EXPECT_EQ(edges->straggler, std::numeric_limits<int>::min());
}

// Read from text transfer by transfer, a plan is what PlanFromJson makes of the whole value, and
// a malformed one gets the same first error, in the same order PlanFromJson checks.
TEST(PlanJsonTest, ReadFromTextIsPlanFromJsonErrorsIncluded) {
  const nlohmann::json good = PlanToJson(*SynthesizeRing(3));
  std::vector<nlohmann::json> documents = {good, PlanToJson(*SynthesizeStragglar(7, 3, 2)),
                                           PlanToJson(*SynthesizeHierarchicalStragglar(3, 2, 1)),
                                           nlohmann::json::array()};
  documents[2]["topology"] = {{"nodes", 3}, {"rounds", {{"transfers", {{{"src", 1}}}}}}};
  auto bad = [&](auto change) {
    nlohmann::json json = good;
    change(json);
    documents.push_back(std::move(json));
  };
  bad([](nlohmann::json& j) { j.erase("ranks"); });
  bad([](nlohmann::json& j) { j["rounds"][1]["transfers"][0]["op"] = "xor"; });
  bad([](nlohmann::json& j) { j["rounds"][0]["transfers"][2]["chunks"] = "0"; });
  // The earlier round's error first, whichever kind each is.
  bad([](nlohmann::json& j) {
    j["rounds"][1]["transfers"][0]["op"] = "xor";
    j["rounds"][2]["transfers"] = 5;
  });
  bad([](nlohmann::json& j) {
    j["rounds"][1] = 7;
    j["rounds"][2]["transfers"][0]["op"] = "xor";
  });
  // A transfer that is not an object.
  bad([](nlohmann::json& j) {
    j["rounds"][0]["transfers"][0] = 3;
    j["rounds"][0]["transfers"][1]["src"] = "x";
  });
  bad([](nlohmann::json& j) { j["rounds"][3]["transfers"][1]["src"] = "x"; });
  bad([](nlohmann::json& j) { j["rounds"][2]["transfers"][0]["dst"] = int64_t{1} << 32; });
  // The header's errors come before any round's.
  bad([](nlohmann::json& j) {
    j["rounds"][0]["transfers"][0]["op"] = "xor";
    j["variant"] = "diagonal";
  });
  bad([](nlohmann::json& j) { j["rounds"] = {{"a", {{"transfers", {{{"src", "x"}}}}}}}; });
  for (const nlohmann::json& json : documents) {
    std::istringstream text(json.dump(2));
    const absl::StatusOr<Plan> read = ReadPlanJson(text);
    const absl::StatusOr<Plan> parsed = PlanFromJson(json);
    ASSERT_EQ(read.status(), parsed.status()) << json.dump();
    if (parsed.ok()) {
      EXPECT_EQ(*read, *parsed);
    }
  }
  EXPECT_GE(documents.size(), 13u);
  std::istringstream broken(R"({"algorithm": "ring", "rounds": [)");
  EXPECT_EQ(ReadPlanJson(broken).status(), absl::InvalidArgumentError("not valid JSON"));
}

TEST(SwapRanksTest, SwapsEveryOccurrenceIncludingTheStraggler) {
  absl::StatusOr<Plan> plan = SynthesizeStragglar(5, 4);
  ASSERT_TRUE(plan.ok());
  const Plan swapped = SwapRanks(*plan, 1, 4);
  EXPECT_EQ(swapped.straggler, 1);
  for (int r = 0; r < plan->num_rounds(); ++r) {
    for (size_t t = 0; t < plan->rounds[r].transfers.size(); ++t) {
      const Transfer& before = plan->rounds[r].transfers[t];
      const Transfer& after = swapped.rounds[r].transfers[t];
      auto expected = [](int rank) { return rank == 1 ? 4 : rank == 4 ? 1 : rank; };
      EXPECT_EQ(after.src, expected(before.src));
      EXPECT_EQ(after.dst, expected(before.dst));
      EXPECT_EQ(after.chunks, before.chunks);
    }
  }
  EXPECT_EQ(SwapRanks(swapped, 1, 4), *plan);
}

}  // namespace
}  // namespace stragglar
