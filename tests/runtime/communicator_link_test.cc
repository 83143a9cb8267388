// The communicator's link probe on ranks as threads: a link that slows mid-run and recovers is
// probed again and followed, and a backend that defers its exchange (the NCCL preload's) looks
// for a slow link at setup only; every rank alike in both.
#include <algorithm>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/communicator.h"
#include "tests/runtime/ranks_as_threads.h"
#include "tests/scripted_calls.h"

namespace stragglar {
namespace {

using testing_threads::GatheringBackend;
using testing_threads::Rendezvous;
using testing_threads::SameDecisions;

constexpr int kRanks = 4;
constexpr int64_t kBytes = 64 << 20;

RuntimeConfig Config() { return scripted::Config(); }

// Hosts whose rank 1's link runs 4x slower while calls [kSlowFrom, kSlowUntil) run, and the ranks
// arrive together: the calls' times and the link probe's rounds (the call just run says when)
// both see it.
constexpr int64_t kSlowFrom = 40, kSlowUntil = 88;
bool LinkSlowAt(int64_t call) { return call >= kSlowFrom && call < kSlowUntil; }
const LinkModel kHostLink{.alpha_s = 10e-6, .bandwidth_bytes_per_s = 1e9};

class SlowingLinkBackend final : public GatheringBackend {
 public:
  SlowingLinkBackend(int rank, Rendezvous& gathers, bool deferred = false)
      : GatheringBackend(rank, gathers), deferred_(deferred) {}
  bool DefersExchange() const override { return deferred_; }
  absl::Status BroadcastFromRankZero(std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<double> RingRoundSeconds(int64_t bytes, int repeats, RingPeers peers) override {
    ++probe_rounds_;
    const auto hop = [&](int from, int to) {
      const bool slow = LinkSlowAt(last_call_) && (from == 1 || to == 1);
      return kHostLink.alpha_s + (slow ? 4.0 : 1.0) * bytes / kHostLink.bandwidth_bytes_per_s;
    };
    return std::max(hop(rank(), peers.next), hop(peers.previous, rank()));
  }
  // Through the gathers: every rank's values meet, and each takes the largest of each.
  absl::Status MaxOverRanks(absl::Span<double> values) override {
    if (absl::Status status = StartGather(values); !status.ok()) return status;
    absl::StatusOr<std::vector<double>> all = FinishGather();
    if (!all.ok()) return all.status();
    for (size_t i = 0; i < all->size(); ++i) {
      values[i % values.size()] = std::max(values[i % values.size()], (*all)[i]);
    }
    return absl::OkStatus();
  }
  void Ran(int64_t call) { last_call_ = call; }
  int probe_rounds() const { return probe_rounds_; }

 private:
  bool deferred_;
  int64_t last_call_ = -1;
  int probe_rounds_ = 0;
};

class SlowingLinkWork final : public CallWork {
 public:
  explicit SlowingLinkWork(SlowingLinkBackend& backend) : backend_(backend) {}
  CallOutcome Run(const CallDecision& decision, const RankProgram*) override {
    backend_.Ran(decision.call);
    // Call 20 stalls 10x: one call, which moves no epoch's median.
    const double factor = LinkSlowAt(decision.call) ? 4 : decision.call == 20 ? 10 : 1;
    return {.timing = CallTiming{.arrival_s = 1.0 * decision.call, .duration_s = factor * 0.2}};
  }

 private:
  SlowingLinkBackend& backend_;
};

class EpochWatcher final : public CollectiveObserver {
 public:
  void OnCall(int, const CallDecision&, int64_t, const CallTiming&) override {}
  void OnEpoch(int rank, const EpochReport& report) override { epochs.push_back(report); }
  std::vector<EpochReport> epochs;
};

// A link that slows 4x mid-run is named within 2 epochs, and cleared within 2 of its recovery, the
// same on every rank, each time by a probe at the epoch after which the calibration moved (the
// issue's bar); epochs that move nothing probe nothing, a one-call stall's included.
TEST(CommunicatorTest, ALinkThatSlowsOrRecoversIsProbedAgainAndFollowed) {
  constexpr int64_t kFollowCalls = 112;
  Rendezvous gathers(kRanks);
  std::vector<std::vector<CallDecision>> decisions(kRanks);
  std::vector<int> probe_rounds(kRanks);
  auto watcher = std::make_shared<EpochWatcher>();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      SlowingLinkBackend backend(rank, gathers);
      CommOptions options{.runtime = Config(), .name = "hosts", .link = kHostLink};
      options.probe.find_slow_rank = true;
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          Communicator::Create(rank, kRanks, std::move(options), backend);
      ASSERT_TRUE(comm.ok()) << comm.status();
      if (rank == 0) (*comm)->observers().Add(watcher);
      for (int64_t call = 0; call < kFollowCalls; ++call) {
        SlowingLinkWork work(backend);
        absl::StatusOr<CallDecision> decision = (*comm)->AllReduce(kBytes, false, work);
        ASSERT_TRUE(decision.ok()) << decision.status();
        decisions[rank].push_back(*decision);
      }
      probe_rounds[rank] = backend.probe_rounds();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 1; rank < kRanks; ++rank) {
    EXPECT_TRUE(SameDecisions(decisions[rank], decisions[0])) << "rank " << rank;
    EXPECT_EQ(probe_rounds[rank], probe_rounds[0]);
  }
  ASSERT_EQ(watcher->epochs.size(), kFollowCalls / 8);
  std::vector<int> slow_rank;  // by epoch, as the observers were told
  for (const EpochReport& epoch : watcher->epochs) slow_rank.push_back(epoch.link.slow_rank);
  SCOPED_TRACE(::testing::PrintToString(slow_rank));
  const int64_t slowed = kSlowFrom / 8, recovered = kSlowUntil / 8;  // the first epoch of each
  for (int64_t epoch = 0; epoch < static_cast<int64_t>(slow_rank.size()); ++epoch) {
    if (epoch < slowed || epoch >= recovered + 2) {
      EXPECT_EQ(slow_rank[epoch], -1) << "epoch " << epoch;
    } else if (epoch >= slowed + 1 && epoch < recovered) {
      EXPECT_EQ(slow_rank[epoch], 1) << "epoch " << epoch;
    }
  }
  const LinkModel& named = watcher->epochs[slowed + 1].link;
  EXPECT_NEAR(named.slow_factor, 4.0, 0.1);
  // Each probe's speeds of every rank's link, each way, in the reports from it on: none before
  // the first (the link was given), rank 1's a quarter of the others' while slow, all alike after.
  EXPECT_TRUE(watcher->epochs[0].link_speeds.empty());
  for (const auto& [epoch, slow] : {std::pair{slowed + 1, 1}, {slow_rank.size() - 1, -1}}) {
    const std::vector<RankLinkSpeed>& speeds = watcher->epochs[epoch].link_speeds;
    ASSERT_EQ(speeds.size(), static_cast<size_t>(kRanks)) << "epoch " << epoch;
    for (int rank = 0; rank < kRanks; ++rank) {
      const double expected = (rank == slow ? 0.25 : 1.0) * kHostLink.bandwidth_bytes_per_s;
      EXPECT_NEAR(speeds[rank].send_bytes_per_s / expected, 1, 0.01) << epoch << " " << rank;
      EXPECT_NEAR(speeds[rank].receive_bytes_per_s / expected, 1, 0.01) << epoch << " " << rank;
    }
  }
  // Two ring rounds a probe, one probe each way: none for the stall, nor for the epoch after each
  // change, whose calibration moved as the calls were priced on the new link.
  EXPECT_EQ(probe_rounds[0], 2 * 2);
}

// The NCCL preload's backend defers its exchange. It looks for a slow link at setup, where its
// gathers complete at once, and names it as the others do; mid-run it probes no more (its rounds
// would be timed behind calls the GPU has not run yet), so a link that slows later is left to the
// calibration. Every rank alike.
TEST(CommunicatorTest, ADeferringBackendLooksForASlowLinkAtSetupOnly) {
  for (const bool slow_at_setup : {true, false}) {
    SCOPED_TRACE(slow_at_setup ? "slow at setup" : "slow mid-run");
    Rendezvous gathers(kRanks);
    std::vector<LinkModel> links(kRanks);
    std::vector<std::vector<RankLinkSpeed>> speeds(kRanks);
    std::vector<int> setup_rounds(kRanks), mid_run_rounds(kRanks);
    std::vector<std::vector<CallDecision>> decisions(kRanks);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < kRanks; ++rank) {
      threads.emplace_back([&, rank] {
        SlowingLinkBackend backend(rank, gathers, /*deferred=*/true);
        if (slow_at_setup) backend.Ran(kSlowFrom);  // the probe's rounds see the slow link
        CommOptions options{.runtime = Config(), .name = "gpus"};  // no link given: probed
        options.probe.find_slow_rank = true;
        absl::StatusOr<std::unique_ptr<Communicator>> comm =
            Communicator::Create(rank, kRanks, std::move(options), backend);
        ASSERT_TRUE(comm.ok()) << comm.status();
        links[rank] = (*comm)->link();
        speeds[rank] = (*comm)->core().last_epoch().link_speeds;
        setup_rounds[rank] = backend.probe_rounds();
        for (int64_t call = 0; call < 112; ++call) {
          SlowingLinkWork work(backend);
          absl::StatusOr<CallDecision> decision = (*comm)->AllReduce(kBytes, false, work);
          ASSERT_TRUE(decision.ok()) << decision.status();
          decisions[rank].push_back(*decision);
        }
        mid_run_rounds[rank] = backend.probe_rounds() - setup_rounds[rank];
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int rank = 0; rank < kRanks; ++rank) {
      EXPECT_EQ(links[rank].slow_rank, slow_at_setup ? 1 : -1) << "rank " << rank;
      if (slow_at_setup) {
        EXPECT_NEAR(links[rank].slow_factor, 4.0, 0.1) << "rank " << rank;
      }
      // Every rank's link each way, as the setup's probe measured it: the same on every rank.
      ASSERT_EQ(speeds[rank].size(), static_cast<size_t>(kRanks)) << "rank " << rank;
      EXPECT_EQ(speeds[rank], speeds[0]) << "rank " << rank;
      const double slowed = slow_at_setup ? 0.25 : 1.0;
      EXPECT_NEAR(speeds[rank][1].send_bytes_per_s / kHostLink.bandwidth_bytes_per_s, slowed, 0.01);
      EXPECT_NEAR(speeds[rank][1].receive_bytes_per_s / kHostLink.bandwidth_bytes_per_s, slowed,
                  0.01);
      // The ring probe's warm-up, small and large rounds, then the slow-link probe's two rings.
      EXPECT_EQ(setup_rounds[rank], 3 + 2) << "rank " << rank;
      EXPECT_EQ(mid_run_rounds[rank], 0) << "rank " << rank;
      EXPECT_TRUE(SameDecisions(decisions[rank], decisions[0])) << "rank " << rank;
    }
  }
}

}  // namespace
}  // namespace stragglar
