// Ranks on hosts of their own: each clock starts at its own boot, and on a slow link the ranks of
// one call finish tens of milliseconds apart. The exchange puts every arrival on rank 0's clock
// (CommOptions::align_clocks), so that the policy names the rank that arrives late, not the one
// whose clock started first nor the one that finishes first.
#include <atomic>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/clock_alignment.h"
#include "runtime/communicator.h"
#include "tests/runtime/ranks_as_threads.h"
#include "tests/scripted_calls.h"

namespace stragglar {
namespace {

using testing_threads::GatheringBackend;
using testing_threads::Rendezvous;
using testing_threads::SameDecisions;

constexpr int kRanks = 4;
constexpr int kLateRank = 2;
constexpr double kLateS = 20e-3;
// Rank 1 finishes every call this much before the others, as Ring's rank before the slow link
// did on the emulated cluster (docs/cluster.md).
constexpr int kEarlyRank = 1;
constexpr double kEarlyS = 50e-3;
constexpr int64_t kCalls = 48;
constexpr int64_t kBytes = 64 << 20;
// Hosts booted hours apart, in no order of their ranks.
constexpr double kOffsetS[kRanks] = {0, 7200.1, 3600.2, 10800.3};
const LinkModel kPaperLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};

// A host of its own: its clock reads `offset_s` more than rank 0's. The test sets the time (the
// same moment reads the same on every rank but for the offset); every rank leaves the k-th
// gather at the same moment, as ranks leave an allgather within a message's latency.
class OwnClockBackend final : public GatheringBackend {
 public:
  OwnClockBackend(int rank, double offset_s, Rendezvous& gathers)
      : GatheringBackend(rank, gathers), offset_s_(offset_s) {}
  double Now() override { return offset_s_ + moment_s_; }
  absl::Status BroadcastFromRankZero(std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<double>> FinishGather() override {
    absl::StatusOr<std::vector<double>> all = GatheringBackend::FinishGather();
    moment_s_ = 1e5 + static_cast<double>(++gathers_);
    if (short_gathers_ && all.ok()) all->pop_back();
    return all;
  }
  void Set(double moment_s) { moment_s_ = moment_s; }
  // Every gather returns one value short, as a library that lost one would.
  void ShortenGathers() { short_gathers_ = true; }

 private:
  double offset_s_;
  bool short_gathers_ = false;
  double moment_s_ = 0;
  int gathers_ = 0;
};

// Call k: the ranks arrive at second k (kLateRank kLateS later) and finish half a second later
// (kEarlyRank kEarlyS sooner). Timed by the protocol's own clock reads.
class TimedWork final : public CallWork {
 public:
  TimedWork(int rank, int64_t call, OwnClockBackend& backend)
      : rank_(rank), call_(call), backend_(backend) {}
  CallOutcome Run(const CallDecision&, const RankProgram*) override {
    backend_.Set(call_ + 0.5 - (rank_ == kEarlyRank ? kEarlyS : 0.0));
    return {};
  }

 private:
  int rank_;
  int64_t call_;
  OwnClockBackend& backend_;
};

class EpochWatcher final : public CollectiveObserver {
 public:
  void OnCall(int, const CallDecision&, int64_t, const CallTiming&) override {}
  void OnEpoch(int, const EpochReport& report) override { epochs.push_back(report); }
  std::vector<EpochReport> epochs;
};

struct ClockRun {
  std::vector<std::vector<CallDecision>> decisions{kRanks};  // [rank][call]
  std::optional<int> straggler;                              // rank 0's, at the end
  std::shared_ptr<EpochWatcher> watcher = std::make_shared<EpochWatcher>();
};

ClockRun RunHosts(bool align_clocks, LagSource lag_source) {
  Rendezvous gathers(kRanks);
  ClockRun run;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      OwnClockBackend backend(rank, kOffsetS[rank], gathers);
      CommOptions options{.runtime = scripted::Config(),
                          .name = "hosts",
                          .link = kPaperLink,
                          .align_clocks = align_clocks};
      options.runtime.lag_source = lag_source;
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          Communicator::Create(rank, kRanks, options, backend);
      ASSERT_TRUE(comm.ok()) << comm.status();
      if (rank == 0) (*comm)->observers().Add(run.watcher);
      for (int64_t call = 0; call < kCalls; ++call) {
        backend.Set(call + (rank == kLateRank ? kLateS : 0.0));
        TimedWork work(rank, call, backend);
        absl::StatusOr<CallDecision> decision = (*comm)->AllReduce(kBytes, false, work);
        ASSERT_TRUE(decision.ok()) << decision.status();
        run.decisions[rank].push_back(*decision);
      }
      if (rank == 0) run.straggler = (*comm)->core().detector().straggler();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return run;
}

TEST(CommunicatorClocksTest, AlignedArrivalsNameTheLateRankWithItsLag) {
  const ClockRun run = RunHosts(/*align_clocks=*/true, LagSource::kArrivalClock);
  for (int rank = 1; rank < kRanks; ++rank) {
    EXPECT_TRUE(SameDecisions(run.decisions[rank], run.decisions[0])) << "rank " << rank;
  }
  EXPECT_EQ(run.straggler, kLateRank);
  ASSERT_EQ(run.watcher->epochs.size(), kCalls / scripted::Config().epoch_calls);
  for (const EpochReport& epoch : run.watcher->epochs) {
    for (const EpochCallReport& call : epoch.calls) {
      for (int rank = 0; rank < kRanks; ++rank) {
        // On rank 0's clock: call k's arrival is second k, the late rank's kLateS later.
        const double arrival_s = call.timing[rank].arrival_s - call.decision.call;
        EXPECT_NEAR(arrival_s, rank == kLateRank ? kLateS : 0.0, 1e-9)
            << "call " << call.decision.call << ", rank " << rank;
        EXPECT_NEAR(call.lag_s[rank], rank == kLateRank ? kLateS : 0.0, 1e-9);
      }
    }
  }
}

// What the alignment is for: each clock read raw names the rank whose host booted first, and
// lags from durations name the rank that finishes first.
TEST(CommunicatorClocksTest, UnalignedClocksAndDurationsNameAnotherRank) {
  const ClockRun raw = RunHosts(/*align_clocks=*/false, LagSource::kArrivalClock);
  ASSERT_TRUE(raw.straggler.has_value());
  EXPECT_NE(*raw.straggler, kLateRank);
  EXPECT_EQ(raw.straggler, 3);  // the largest offset
  const ClockRun durations = RunHosts(/*align_clocks=*/false, LagSource::kDuration);
  EXPECT_EQ(durations.straggler, kEarlyRank);
}

// A gather that returns the wrong number of values is one clear error, not a read past its end;
// the protocol is then disabled, and every later call fails with the same error (no library
// collective to fall back on here).
TEST(CommunicatorClocksTest, AShortGatherIsAnErrorOnEveryRank) {
  Rendezvous gathers(kRanks);
  std::vector<absl::Status> first_error(kRanks), later(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      OwnClockBackend backend(rank, kOffsetS[rank], gathers);
      backend.ShortenGathers();
      const CommOptions options{
          .runtime = scripted::Config(), .name = "hosts", .link = kPaperLink, .align_clocks = true};
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          Communicator::Create(rank, kRanks, options, backend);
      ASSERT_TRUE(comm.ok()) << comm.status();
      for (int64_t call = 0; call < scripted::Config().epoch_calls; ++call) {
        backend.Set(call);
        TimedWork work(rank, call, backend);
        absl::StatusOr<CallDecision> decision = (*comm)->AllReduce(kBytes, false, work);
        if (!decision.ok()) first_error[rank] = decision.status();
      }
      TimedWork work(rank, 100, backend);
      later[rank] = (*comm)->AllReduce(kBytes, false, work).status();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(first_error[rank].code(), absl::StatusCode::kInvalidArgument) << "rank " << rank;
    EXPECT_EQ(first_error[rank].message(),
              "epoch exchange: expected 4 values (1 from each of 4 ranks), got 3");
    EXPECT_EQ(later[rank], first_error[rank]);
  }
}

// Each gather's stamps: rank 1's clock 5 s ahead of rank 0's, rank 2's 10 s.
TEST(ClockAlignmentTest, OffsetsAreMediansThatOneLateStampDoesNotMove) {
  ClockAlignment clocks(3);
  EXPECT_EQ(clocks.offset(1), 0);                          // no stamps yet
  clocks.Add({std::nan(""), std::nan(""), std::nan("")});  // the first gather carries none
  EXPECT_EQ(clocks.offset(1), 0);
  clocks.Add({100, 105, 110});
  EXPECT_EQ(clocks.offset(1), 5);
  EXPECT_EQ(clocks.offset(2), 10);
  clocks.Add({101, 106, 111});
  clocks.Add({102, 107.7, 112});  // rank 1 descheduled before it stamped
  EXPECT_EQ(clocks.offset(0), 0);
  EXPECT_EQ(clocks.offset(1), 5);
  EXPECT_EQ(clocks.offset(2), 10);
  clocks.Add({103, std::nan(""), 113});  // a rank's missing stamp leaves its offset as it was
  EXPECT_EQ(clocks.offset(1), 5);
  clocks.Add({1, 2});  // not one stamp per rank: ignored
  EXPECT_EQ(clocks.offset(2), 10);
}

TEST(ClockAlignmentTest, OldStampsAreForgottenSoDriftIsFollowed) {
  ClockAlignment clocks(2);
  for (int gather = 0; gather < 3; ++gather) clocks.Add({1.0 * gather, gather + 5.0});
  // Rank 1's clock moves 2 ms ahead, for good.
  for (int gather = 3; gather < 3 + ClockAlignment::kStampsKept; ++gather) {
    EXPECT_LT(clocks.offset(1), 5.002) << "gather " << gather;
    clocks.Add({1.0 * gather, gather + 5.002});
  }
  EXPECT_DOUBLE_EQ(clocks.offset(1), 5.002);
}

}  // namespace
}  // namespace stragglar
