#include "kernels/synth/stragglar_schedule.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stragglar {
namespace {

// Independent checker for the post-arrival rules; returns "" when the schedule is valid.
std::string CheckSchedule(int n, const PostArrivalSchedule& rounds) {
  const int sigma = n - 1, m = n - 1;
  // final_at[r][c]: rank r holds final chunk c (as of the start of the current round).
  std::vector<std::vector<bool>> final_at(n, std::vector<bool>(m, false));
  if (static_cast<int>(rounds.size()) < m) return "fewer rounds than exchanges";
  for (int t = 0; t < static_cast<int>(rounds.size()); ++t) {
    std::vector<int> sends(n, 0), recvs(n, 0);
    bool saw_up = false, saw_down = false;
    std::vector<std::pair<int, int>> arrivals;  // (rank, chunk) final after this round
    for (const ScheduleMove& mv : rounds[t]) {
      const std::string where =
          absl::StrCat("round ", t, " move ", mv.src, "->", mv.dst, " c", mv.chunk, ": ");
      if (mv.src < 0 || mv.src >= n || mv.dst < 0 || mv.dst >= n || mv.src == mv.dst) {
        return where + "bad ranks";
      }
      if (mv.chunk < 0 || mv.chunk >= m) return where + "bad chunk";
      if (++sends[mv.src] > 1) return where + "second send";
      if (++recvs[mv.dst] > 1) return where + "second receive";
      const bool is_up = t < m && mv.src == t && mv.dst == sigma && mv.chunk == t;
      const bool is_down = t < m && mv.src == sigma && mv.dst == t && mv.chunk == t;
      if (is_up || is_down) {
        saw_up |= is_up;
        saw_down |= is_down;
        arrivals.push_back({mv.dst, t});
        continue;
      }
      if (t < m && (mv.src == sigma || mv.dst == sigma)) return where + "straggler still busy";
      if (!final_at[mv.src][mv.chunk]) return where + "sender lacks final chunk";
      if (final_at[mv.dst][mv.chunk]) return where + "receiver already has chunk";
      arrivals.push_back({mv.dst, mv.chunk});
    }
    if (t < m && !(saw_up && saw_down)) return absl::StrCat("round ", t, ": exchange missing");
    for (auto [rank, chunk] : arrivals) {
      if (final_at[rank][chunk]) return absl::StrCat("round ", t, ": chunk arrives twice");
      final_at[rank][chunk] = true;
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < m; ++c) {
      if (!final_at[r][c]) return absl::StrCat("rank ", r, " ends without chunk ", c);
    }
  }
  return "";
}

// Builds a schedule from "a<->b chunk x/y" swaps and copies.
struct Builder {
  PostArrivalSchedule rounds;
  Builder& Round() {
    rounds.emplace_back();
    return *this;
  }
  Builder& Exchange(int rank, int sigma) {
    rounds.back().push_back({rank, sigma, rank});
    rounds.back().push_back({sigma, rank, rank});
    return *this;
  }
  Builder& Swap(int a, int b, int chunk_from_a, int chunk_from_b) {
    rounds.back().push_back({a, b, chunk_from_a});
    rounds.back().push_back({b, a, chunk_from_b});
    return *this;
  }
  Builder& Copy(int src, int dst, int chunk) {
    rounds.back().push_back({src, dst, chunk});
    return *this;
  }
};

TEST(StragglarScheduleTest, LowerBoundValues) {
  EXPECT_EQ(StragglarRoundLowerBound(2), 1);
  EXPECT_EQ(StragglarRoundLowerBound(3), 3);
  EXPECT_EQ(StragglarRoundLowerBound(4), 4);
  EXPECT_EQ(StragglarRoundLowerBound(8), 9);
  EXPECT_EQ(StragglarRoundLowerBound(12), 14);
  EXPECT_EQ(StragglarRoundLowerBound(16), 18);
  EXPECT_EQ(StragglarRoundLowerBound(48), 52);
  EXPECT_EQ(StragglarRoundLowerBound(256), 262);
  EXPECT_EQ(StragglarRoundLowerBound(1024), 1032);
}

TEST(StragglarScheduleTest, ReferenceScheduleForFourRanksPassesChecker) {
  Builder b;
  b.Round().Exchange(0, 3);
  b.Round().Exchange(1, 3).Copy(0, 2, 0);
  b.Round().Exchange(2, 3).Swap(0, 1, 0, 1);
  b.Round().Copy(3, 1, 2).Swap(0, 2, 1, 2);
  EXPECT_EQ(CheckSchedule(4, b.rounds), "");
  EXPECT_EQ(static_cast<int>(b.rounds.size()), StragglarRoundLowerBound(4));
}

TEST(StragglarScheduleTest, ReferenceScheduleForEightRanksPassesChecker) {
  Builder b;
  b.Round().Exchange(0, 7);
  b.Round().Exchange(1, 7).Copy(0, 3, 0);
  b.Round().Exchange(2, 7).Copy(1, 4, 1).Copy(0, 5, 0).Copy(3, 6, 0);
  b.Round().Exchange(3, 7).Swap(0, 2, 0, 2).Swap(1, 5, 1, 0).Swap(4, 6, 1, 0);
  b.Round().Exchange(4, 7).Swap(3, 1, 3, 1).Swap(0, 5, 2, 1).Swap(2, 6, 2, 1);
  b.Round().Exchange(5, 7).Swap(4, 2, 4, 2).Swap(0, 3, 2, 3).Swap(1, 6, 3, 2);
  b.Round().Exchange(6, 7).Swap(5, 3, 5, 3).Swap(0, 2, 3, 4).Swap(1, 4, 3, 4);
  b.Round().Swap(6, 4, 6, 4).Swap(0, 3, 4, 5).Swap(1, 5, 4, 5).Copy(7, 2, 6);
  b.Round().Swap(0, 2, 5, 6).Swap(1, 4, 5, 6).Swap(3, 6, 5, 6).Copy(7, 5, 6);
  EXPECT_EQ(CheckSchedule(8, b.rounds), "");
  EXPECT_EQ(static_cast<int>(b.rounds.size()), StragglarRoundLowerBound(8));
}

TEST(StragglarScheduleTest, CheckerRejectsBrokenSchedules) {
  Builder late_copy;  // n = 4 with the final copy removed: rank 1 never gets chunk 2.
  late_copy.Round().Exchange(0, 3);
  late_copy.Round().Exchange(1, 3).Copy(0, 2, 0);
  late_copy.Round().Exchange(2, 3).Swap(0, 1, 0, 1);
  late_copy.Round().Swap(0, 2, 1, 2);
  EXPECT_NE(CheckSchedule(4, late_copy.rounds), "");

  Builder not_final;  // Rank 0 forwards chunk 1 before it is final anywhere.
  not_final.Round().Exchange(0, 3).Copy(1, 2, 1);
  EXPECT_NE(CheckSchedule(4, not_final.rounds), "");

  Builder double_send;  // Rank 0 sends twice in one round.
  double_send.Round().Exchange(0, 3);
  double_send.Round().Exchange(1, 3).Copy(0, 2, 0).Copy(0, 1, 0);
  EXPECT_NE(CheckSchedule(4, double_send.rounds), "");

  Builder wrong_round;  // Exchange of chunk 1 in round 0.
  wrong_round.Round().Exchange(1, 3);
  EXPECT_NE(CheckSchedule(4, wrong_round.rounds), "");
}

TEST(StragglarScheduleTest, RejectsFewerThanTwoRanks) {
  for (int n : {-3, 0, 1}) {
    EXPECT_EQ(SynthesizeStragglarPostArrival(n).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

int CeilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Returns the number of rounds after checking validity.
int ExpectValid(int n) {
  absl::StatusOr<PostArrivalSchedule> schedule = SynthesizeStragglarPostArrival(n);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  if (!schedule.ok()) return -1;
  EXPECT_EQ(CheckSchedule(n, *schedule), "") << "n=" << n;
  const int rounds = static_cast<int>(schedule->size());
  EXPECT_GE(rounds, StragglarRoundLowerBound(n)) << "n=" << n;
  return rounds;
}

// Every n in 2..64 reaches L(n): powers of two by the cyclic pipeline, n = 63 by stored receive
// rows, the others by stored timetables (and the greedy for n = 2, 3).
TEST(StragglarScheduleTest, ExactlyLowerBoundUpTo64) {
  for (int n = 2; n <= 64; ++n) {
    EXPECT_EQ(ExpectValid(n), StragglarRoundLowerBound(n)) << "n=" << n;
  }
}

TEST(StragglarScheduleTest, ValidLargerSample) {
  for (int n : {65, 96, 100, 127, 129, 200, 255, 257, 383, 511, 513, 700, 1000, 1023}) {
    const int rounds = ExpectValid(n);
    EXPECT_LE(rounds, StragglarRoundLowerBound(n) + 5 * CeilLog2(n)) << "n=" << n;
  }
}

// Exactly L(n) where the synthesizer is known to reach it: every power of two (cyclic pipeline)
// and the small n where the greedy happens to.
TEST(StragglarScheduleTest, OptimalForPowersOfTwoAndSmallN) {
  for (int n : {2, 3, 4, 5, 6, 8, 9, 16, 32, 64, 128, 256, 512, 1024}) {
    EXPECT_EQ(ExpectValid(n), StragglarRoundLowerBound(n)) << "n=" << n;
  }
}

TEST(StragglarScheduleTest, Deterministic) {
  for (int n : {5, 12, 48, 63, 129}) {
    absl::StatusOr<PostArrivalSchedule> first = SynthesizeStragglarPostArrival(n);
    absl::StatusOr<PostArrivalSchedule> second = SynthesizeStragglarPostArrival(n);
    ASSERT_TRUE(first.ok() && second.ok());
    ASSERT_EQ(first->size(), second->size());
    for (size_t t = 0; t < first->size(); ++t) {
      ASSERT_EQ((*first)[t].size(), (*second)[t].size());
      for (size_t i = 0; i < (*first)[t].size(); ++i) {
        EXPECT_EQ((*first)[t][i].src, (*second)[t][i].src);
        EXPECT_EQ((*first)[t][i].dst, (*second)[t][i].dst);
        EXPECT_EQ((*first)[t][i].chunk, (*second)[t][i].chunk);
      }
    }
  }
}

}  // namespace
}  // namespace stragglar
