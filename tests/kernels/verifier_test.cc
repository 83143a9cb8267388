#include "kernels/plan/verifier.h"

#include <numeric>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

std::string VerifyMessage(const Plan& plan) {
  absl::Status status = VerifyPlan(plan);
  return status.ok() ? "ok" : std::string(status.message());
}

int ToInt(absl::string_view text) {
  int value = 0;
  EXPECT_TRUE(absl::SimpleAtoi(text, &value)) << text;
  return value;
}

// Builds a canonical StragglAR plan (straggler n-1) from the shared doc's notation, one string per
// post-arrival round: "a<>s c" exchange with the straggler, "a>b c" copy, "a=b x/y" two-way swap
// (a sends x, b sends y), separated by ';'.
Plan ReferencePlan(int num_ranks, const std::vector<std::string>& post_rounds) {
  Plan plan;
  plan.algorithm = Algorithm::kStragglar;
  plan.num_ranks = num_ranks;
  plan.num_chunks = num_ranks - 1;
  plan.straggler = num_ranks - 1;
  std::vector<int> punctual(num_ranks - 1);
  std::iota(punctual.begin(), punctual.end(), 0);
  AppendRingReduceScatter(punctual, plan);
  plan.pre_arrival_rounds = plan.num_rounds();
  for (const std::string& text : post_rounds) {
    std::vector<Transfer>& transfers = plan.rounds.emplace_back().transfers;
    for (absl::string_view item : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
      std::vector<absl::string_view> parts = absl::StrSplit(item, ' ', absl::SkipEmpty());
      EXPECT_EQ(parts.size(), 2u) << item;
      absl::string_view pair = parts[0];
      if (size_t at = pair.find("<>"); at != absl::string_view::npos) {
        const int a = ToInt(pair.substr(0, at)), b = ToInt(pair.substr(at + 2));
        const int chunk = ToInt(parts[1]);
        transfers.push_back({a, b, TransferOp::kReduce, {chunk}});
        transfers.push_back({b, a, TransferOp::kReduce, {chunk}});
      } else if (size_t at = pair.find('>'); at != absl::string_view::npos) {
        transfers.push_back({ToInt(pair.substr(0, at)),
                             ToInt(pair.substr(at + 1)),
                             TransferOp::kCopy,
                             {ToInt(parts[1])}});
      } else {
        const size_t eq = pair.find('=');
        const size_t slash = parts[1].find('/');
        const int a = ToInt(pair.substr(0, eq)), b = ToInt(pair.substr(eq + 1));
        transfers.push_back({a, b, TransferOp::kCopy, {ToInt(parts[1].substr(0, slash))}});
        transfers.push_back({b, a, TransferOp::kCopy, {ToInt(parts[1].substr(slash + 1))}});
      }
    }
  }
  return plan;
}

// The reference schedules of ../shared/docs/stragglar.md.
Plan PaperPlanFor4() {
  return ReferencePlan(4, {"0<>3 0", "1<>3 1; 0>2 0", "2<>3 2; 0=1 0/1", "3>1 2; 0=2 1/2"});
}

Plan PaperPlanFor8() {
  return ReferencePlan(8, {
                              "0<>7 0",
                              "1<>7 1; 0>3 0",
                              "2<>7 2; 1>4 1; 0>5 0; 3>6 0",
                              "3<>7 3; 0=2 0/2; 1=5 1/0; 4=6 1/0",
                              "4<>7 4; 3=1 3/1; 0=5 2/1; 2=6 2/1",
                              "5<>7 5; 4=2 4/2; 0=3 2/3; 1=6 3/2",
                              "6<>7 6; 5=3 5/3; 0=2 3/4; 1=4 3/4",
                              "6=4 6/4; 0=3 4/5; 1=5 4/5; 7>2 6",
                              "0=2 5/6; 1=4 5/6; 3=6 5/6; 7>5 6",
                          });
}

TEST(VerifierTest, PaperReferenceSchedulesVerify) {
  const Plan four = PaperPlanFor4();
  EXPECT_EQ(VerifyMessage(four), "ok");
  EXPECT_EQ(four.post_arrival_rounds(), 4);
  const Plan eight = PaperPlanFor8();
  EXPECT_EQ(VerifyMessage(eight), "ok");
  EXPECT_EQ(eight.post_arrival_rounds(), 9);
  // Relabelled for another straggler they still verify.
  EXPECT_EQ(VerifyMessage(SwapRanks(eight, 2, 7)), "ok");
}

TEST(VerifierTest, RingAndHalvingDoublingVerifyForEveryRankCountUpTo64) {
  for (int n = 2; n <= 64; ++n) {
    absl::StatusOr<Plan> ring = SynthesizeRing(n);
    ASSERT_TRUE(ring.ok());
    EXPECT_EQ(VerifyMessage(*ring), "ok") << "ring n=" << n;
    absl::StatusOr<Plan> halving_doubling = SynthesizeHalvingDoubling(n);
    ASSERT_TRUE(halving_doubling.ok());
    EXPECT_EQ(VerifyMessage(*halving_doubling), "ok") << "halving-doubling n=" << n;
  }
}

TEST(VerifierTest, StragglarVerifiesForEveryRankCountUpTo64AndEveryStraggler) {
  for (int n = 2; n <= 64; ++n) {
    for (int straggler = 0; straggler < n; ++straggler) {
      absl::StatusOr<Plan> plan = SynthesizeStragglar(n, straggler);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ASSERT_EQ(VerifyMessage(*plan), "ok") << "n=" << n << " straggler=" << straggler;
    }
  }
}

TEST(VerifierTest, RandomLargerPlansVerify) {
  std::mt19937 random(20261122);
  std::uniform_int_distribution<int> ranks(65, 320);
  for (int sample = 0; sample < 6; ++sample) {
    const int n = ranks(random);
    const int straggler = std::uniform_int_distribution<int>(0, n - 1)(random);
    for (Algorithm algorithm : kPlanAlgorithms) {
      absl::StatusOr<Plan> plan = SynthesizePlan(
          algorithm, n,
          algorithm == Algorithm::kStragglar ? std::optional<int>(straggler) : std::nullopt);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(VerifyMessage(*plan), "ok")
          << AlgorithmName(algorithm) << " n=" << n << " straggler=" << straggler;
    }
  }
}

// Property: removing any single transfer from a correct plan breaks it, so the verifier is not
// trivially accepting (every transfer of these plans carries a contribution somebody needs).
TEST(VerifierTest, DroppingAnyTransferIsCaught) {
  std::mt19937 random(7);
  for (Algorithm algorithm : kPlanAlgorithms) {
    for (int n : {3, 5, 8, 13}) {
      absl::StatusOr<Plan> plan = SynthesizePlan(
          algorithm, n, algorithm == Algorithm::kStragglar ? std::optional<int>(1) : std::nullopt);
      ASSERT_TRUE(plan.ok());
      for (int trial = 0; trial < 20; ++trial) {
        Plan broken = *plan;
        Round& round =
            broken.rounds[std::uniform_int_distribution<int>(0, broken.num_rounds() - 1)(random)];
        if (round.transfers.empty()) continue;
        round.transfers.erase(round.transfers.begin() +
                              std::uniform_int_distribution<int>(
                                  0, static_cast<int>(round.transfers.size()) - 1)(random));
        EXPECT_NE(VerifyMessage(broken), "ok") << AlgorithmName(algorithm) << " n=" << n;
      }
    }
  }
}

TEST(VerifierTest, BatchesOfChunksGiveTheSameVerdictAndMessage) {
  // A budget of one byte indexes one chunk per pass. Every verdict, and the message of the error
  // met first in execution order, must not depend on it.
  const VerifyOptions one_chunk_per_pass{.max_index_bytes = 1};
  auto message = [](const Plan& plan, const VerifyOptions& options) {
    absl::Status status = VerifyPlan(plan, options);
    return status.ok() ? std::string("ok") : std::string(status.message());
  };
  std::mt19937 random(11);
  for (Algorithm algorithm : kPlanAlgorithms) {
    for (int n : {5, 8, 13}) {
      absl::StatusOr<Plan> plan = SynthesizePlan(
          algorithm, n, algorithm == Algorithm::kStragglar ? std::optional<int>(2) : std::nullopt);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(message(*plan, one_chunk_per_pass), "ok");
      for (int trial = 0; trial < 20; ++trial) {
        // Two planted bugs at once (a dropped transfer, a copy turned into a reduce or back), so
        // that different batches find different errors.
        Plan broken = *plan;
        for (int bug = 0; bug < 2; ++bug) {
          Round& round =
              broken.rounds[std::uniform_int_distribution<int>(0, broken.num_rounds() - 1)(random)];
          if (round.transfers.empty()) continue;
          const int index = std::uniform_int_distribution<int>(
              0, static_cast<int>(round.transfers.size()) - 1)(random);
          if (bug == 0) {
            round.transfers.erase(round.transfers.begin() + index);
          } else {
            TransferOp& op = round.transfers[index].op;
            op = op == TransferOp::kCopy ? TransferOp::kReduce : TransferOp::kCopy;
          }
        }
        EXPECT_EQ(message(broken, one_chunk_per_pass), message(broken, {}))
            << AlgorithmName(algorithm) << " n=" << n << " trial " << trial;
      }
    }
  }
}

TEST(VerifierTest, TheErrorMetFirstIsReportedWhicheverChunkHasIt) {
  // Chunk `early` double counts in round 1, the other chunk in round 2: the round-1 error is
  // reported whether the chunks are checked together or one per pass, in either chunk order.
  for (int early : {0, 1}) {
    Plan plan{.algorithm = Algorithm::kRing, .num_ranks = 2, .num_chunks = 2};
    plan.rounds.push_back({{{0, 1, TransferOp::kReduce, {0, 1}}}});
    plan.rounds.push_back({{{0, 1, TransferOp::kReduce, {early}}}});
    plan.rounds.push_back({{{0, 1, TransferOp::kReduce, {1 - early}}}});
    for (int64_t budget : {int64_t{1}, int64_t{1} << 20}) {
      EXPECT_THAT(
          VerifyPlan(plan, {.max_index_bytes = budget}).message(),
          HasSubstr(absl::StrCat("round 1 transfer 0 (0->1): chunk ", early, " double counts")))
          << budget;
    }
  }
}

TEST(VerifierTest, PortModelViolationsAreRejected) {
  Plan plan = PaperPlanFor4();
  Plan two_sends = plan;
  // Last round: 3->1, 0<->2. Rank 0 already sends; rank 3 is free to receive.
  two_sends.rounds.back().transfers.push_back({0, 3, TransferOp::kCopy, {0}});
  EXPECT_THAT(VerifyMessage(two_sends), HasSubstr("rank 0 sends twice in one round"));
  Plan two_receives = plan;
  // Second post-arrival round: 1<->3, 0->2. Rank 2 is free to send; rank 1 already receives.
  two_receives.rounds[plan.pre_arrival_rounds + 1].transfers.push_back(
      {2, 1, TransferOp::kCopy, {0}});
  EXPECT_THAT(VerifyMessage(two_receives), HasSubstr("rank 1 receives twice in one round"));
}

TEST(VerifierTest, DoubleCountingIsRejected) {
  // 0 and 1 exchange chunk 0 twice: the second exchange adds contributions already present.
  Plan plan{.algorithm = Algorithm::kRing, .num_ranks = 2, .num_chunks = 1};
  plan.rounds.push_back({{{0, 1, TransferOp::kReduce, {0}}, {1, 0, TransferOp::kReduce, {0}}}});
  EXPECT_EQ(VerifyMessage(plan), "ok");
  plan.rounds.push_back(plan.rounds.front());
  EXPECT_THAT(VerifyMessage(plan), HasSubstr("double counts"));
}

TEST(VerifierTest, RoundsReadValuesAsOfTheStartOfTheRound) {
  // Round 0 has 0->1 and 1->2: rank 2 receives rank 1's value from the start of the round, {1},
  // not {0,1}. So adding rank 0's contribution in round 1 is correct here; reading values mid-round
  // would make it a double count.
  Plan plan{.algorithm = Algorithm::kRing, .num_ranks = 3, .num_chunks = 1};
  plan.rounds.push_back({{{0, 1, TransferOp::kReduce, {0}}, {1, 2, TransferOp::kReduce, {0}}}});
  plan.rounds.push_back({{{0, 2, TransferOp::kReduce, {0}}}});
  plan.rounds.push_back({{{2, 0, TransferOp::kCopy, {0}}}});
  plan.rounds.push_back({{{2, 1, TransferOp::kCopy, {0}}}});
  EXPECT_EQ(VerifyMessage(plan), "ok");
}

TEST(VerifierTest, IncompletePlansNameTheMissingContribution) {
  Plan plan = PaperPlanFor4();
  plan.rounds.pop_back();
  EXPECT_THAT(VerifyMessage(plan), HasSubstr("incomplete: at the end rank"));
}

TEST(VerifierTest, StragglerMayNotActBeforeItArrives) {
  Plan plan = PaperPlanFor8();
  plan.rounds.insert(plan.rounds.begin(), Round{{{7, 6, TransferOp::kReduce, {3}}}});
  plan.pre_arrival_rounds += 1;
  EXPECT_THAT(VerifyMessage(plan), HasSubstr("involves straggler 7 before it arrives"));
  Plan late_start = PaperPlanFor8();
  late_start.pre_arrival_rounds -= 1;  // claims the straggler starts a round earlier than it does
  EXPECT_THAT(VerifyMessage(late_start), HasSubstr("is idle in round"));
  Plan no_straggler = PaperPlanFor8();
  no_straggler.straggler.reset();
  EXPECT_THAT(VerifyMessage(no_straggler), HasSubstr("without a straggler"));
  Plan outside = PaperPlanFor8();
  outside.straggler = 8;
  EXPECT_THAT(VerifyMessage(outside), HasSubstr("straggler 8 outside"));
}

TEST(VerifierTest, MalformedTransfersAreRejected) {
  const Plan good = PaperPlanFor4();
  auto with = [&](Transfer transfer) {
    Plan plan = good;
    plan.rounds.push_back({{transfer}});
    return VerifyMessage(plan);
  };
  EXPECT_THAT(with({0, 0, TransferOp::kCopy, {0}}), HasSubstr("sends to itself"));
  EXPECT_THAT(with({0, 4, TransferOp::kCopy, {0}}), HasSubstr("rank outside"));
  EXPECT_THAT(with({0, 1, TransferOp::kCopy, {3}}), HasSubstr("chunk 3 outside"));
  EXPECT_THAT(with({0, 1, TransferOp::kCopy, {1, 1}}), HasSubstr("listed twice"));
  EXPECT_THAT(with({0, 1, TransferOp::kCopy, {}}), HasSubstr("no chunks"));
}

}  // namespace
}  // namespace stragglar

namespace stragglar {
namespace {

// A plan read from a file may claim any size: one too large to verify in reasonable time is
// refused at once (65536 ranks and 2^24 chunks, no rounds, would have reset 2^50 words).
TEST(VerifierTest, APlanTooLargeToVerifyIsRefusedAtOnce) {
  Plan plan{.algorithm = Algorithm::kRing, .num_ranks = 65536, .num_chunks = 1 << 24};
  const absl::Status status = VerifyPlan(plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "plan of 65536 ranks and 16777216 chunks is too large to verify: chunks x ranks x "
            "ranks/64 is 1125899906842624, at most 17179869184");
  // Well inside it, still verified: Ring on 2048 ranks (2^27 words).
  EXPECT_TRUE(VerifyPlan(*SynthesizeRing(2048)).ok());
}

}  // namespace
}  // namespace stragglar
