#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/host_runtime.h"
#include "runtime/runtime_core.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

const LinkModel kPaperLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};

TEST(RuntimeCoreTest, BadConfigurationIsRejected) {
  RuntimeConfig config;
  EXPECT_THAT(RuntimeCore::Create(config, 0, 1, kPaperLink).status().message(),
              HasSubstr("at least 2 ranks"));
  EXPECT_THAT(RuntimeCore::Create(config, 4, 4, kPaperLink).status().message(),
              HasSubstr("rank 4 outside"));
  config.epoch_calls = 0;
  EXPECT_THAT(RuntimeCore::Create(config, 0, 4, kPaperLink).status().message(),
              HasSubstr("epoch_calls"));
}

// Feeds every rank's core the same exchanged epochs, as a backend would.
std::vector<RuntimeCore> Cores(int n, const RuntimeConfig& config) {
  std::vector<RuntimeCore> cores;
  for (int rank = 0; rank < n; ++rank) {
    cores.push_back(*RuntimeCore::Create(config, rank, n, kPaperLink));
  }
  return cores;
}

absl::Status RunEpoch(std::vector<RuntimeCore>& cores, int64_t bytes, int late_rank, double delay_s,
                      std::vector<CallDecision>* decisions) {
  const int n = static_cast<int>(cores.size());
  for (int call = 0; call < cores[0].config().epoch_calls; ++call) {
    for (int rank = 0; rank < n; ++rank) {
      absl::StatusOr<CallDecision> decision = cores[rank].Decide(bytes);
      if (!decision.ok()) return decision.status();
      if (rank == 0) decisions->push_back(*decision);
      // Every rank must take the same decision for the same call.
      EXPECT_EQ(decision->algorithm, decisions->back().algorithm) << "call " << decision->call;
      EXPECT_EQ(decision->straggler, decisions->back().straggler);
      const double arrival = 1.0 * decision->call + (rank == late_rank ? delay_s : 1e-5 * rank);
      cores[rank].Record({.arrival_s = arrival, .duration_s = 0.1});
    }
  }
  std::vector<double> all;
  for (const RuntimeCore& core : cores) {
    const std::vector<double> payload = core.EpochPayload();
    all.insert(all.end(), payload.begin(), payload.end());
  }
  for (RuntimeCore& core : cores) {
    EXPECT_TRUE(core.ExchangeDue());
    if (absl::Status status = core.AbsorbEpoch(all); !status.ok()) return status;
  }
  return absl::OkStatus();
}

TEST(RuntimeCoreTest, AdaptsAtEpochBoundariesIdenticallyOnEveryRank) {
  RuntimeConfig config;
  config.epoch_calls = 32;
  std::vector<RuntimeCore> cores = Cores(8, config);
  std::vector<CallDecision> decisions;
  for (int epoch = 0; epoch < 3; ++epoch) {
    ASSERT_TRUE(RunEpoch(cores, 1 << 30, 5, 20e-3, &decisions).ok());
  }
  // Epoch 0 knows nothing: ring. Afterwards rank 5 is declared and StragglAR chosen.
  for (int call = 0; call < 32; ++call) EXPECT_EQ(decisions[call].algorithm, Algorithm::kRing);
  for (int call = 32; call < 96; ++call) {
    EXPECT_EQ(decisions[call].algorithm, Algorithm::kStragglar) << call;
    EXPECT_EQ(decisions[call].straggler, 5);
    EXPECT_EQ(decisions[call].call, call);
  }
  EXPECT_EQ(cores[3].detector().straggler(), 5);
  EXPECT_EQ(cores[0].epochs(), 3);
}

TEST(RuntimeCoreTest, ObserveModeDetectsButNeverSwitches) {
  RuntimeConfig config;
  config.epoch_calls = 32;
  config.mode = RuntimeMode::kObserve;
  std::vector<RuntimeCore> cores = Cores(4, config);
  std::vector<CallDecision> decisions;
  for (int epoch = 0; epoch < 3; ++epoch) {
    ASSERT_TRUE(RunEpoch(cores, 1 << 30, 2, 20e-3, &decisions).ok());
  }
  for (const CallDecision& decision : decisions) EXPECT_EQ(decision.algorithm, Algorithm::kRing);
  EXPECT_EQ(cores[0].detector().straggler(), 2);
}

TEST(RuntimeCoreTest, SmallCallsKeepTheDefault) {
  RuntimeConfig config;
  config.epoch_calls = 32;
  config.min_bytes = 1 << 20;
  std::vector<RuntimeCore> cores = Cores(4, config);
  std::vector<CallDecision> decisions;
  for (int epoch = 0; epoch < 2; ++epoch) {
    ASSERT_TRUE(RunEpoch(cores, 4096, 2, 20e-3, &decisions).ok());
  }
  for (const CallDecision& decision : decisions) EXPECT_EQ(decision.algorithm, Algorithm::kRing);
}

TEST(RuntimeCoreTest, MismatchedEpochSizesAreRejected) {
  RuntimeConfig config;
  config.epoch_calls = 2;
  std::vector<RuntimeCore> cores = Cores(2, config);
  ASSERT_TRUE(cores[0].Decide(8).ok());
  cores[0].Record({0, 1});
  EXPECT_THAT(cores[0].AbsorbEpoch(std::vector<double>(3)).message(),
              HasSubstr("ranks disagree on the call count"));
}

// Threads: every rank gets the exact sum, and the same algorithm for every call, while the
// straggler moves from rank 1 to rank 3 halfway through.
TEST(HostRuntimeTest, StragglerThatMovesCostsNoCorrectnessAndNoHang) {
  constexpr int kRanks = 4;
  constexpr int kCalls = 96;
  constexpr int64_t kCount = 1000;
  RuntimeConfig config;
  config.epoch_calls = 16;
  config.detector.window_calls = 32;
  config.detector.min_calls = 16;
  // A fast model so that StragglAR pays off for millisecond delays on tiny buffers.
  const LinkModel link{.alpha_s = 1e-6, .bandwidth_bytes_per_s = 1e6};
  absl::StatusOr<std::unique_ptr<HostCommunicator>> comm =
      HostCommunicator::Create(kRanks, config, link);
  ASSERT_TRUE(comm.ok());
  std::vector<std::vector<Algorithm>> ran(kRanks, std::vector<Algorithm>(kCalls));
  std::vector<std::vector<std::optional<int>>> stragglers(kRanks,
                                                          std::vector<std::optional<int>>(kCalls));
  std::vector<int> wrong(kRanks, 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      std::vector<int32_t> send(kCount), recv(kCount);
      for (int call = 0; call < kCalls; ++call) {
        for (int64_t i = 0; i < kCount; ++i) send[i] = static_cast<int32_t>(i * (rank + 1) + call);
        const int late = call < kCalls / 2 ? 1 : 3;
        if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(3));
        absl::StatusOr<CallDecision> decision =
            (*comm)->AllReduce(rank, {.send = send.data(),
                                      .recv = recv.data(),
                                      .count = kCount,
                                      .type = DataType::kInt32,
                                      .op = ReduceOp::kSum,
                                      .timeout = absl::Seconds(20)});
        ASSERT_TRUE(decision.ok()) << decision.status();
        ran[rank][call] = decision->algorithm;
        stragglers[rank][call] = decision->straggler;
        for (int64_t i = 0; i < kCount; ++i) {
          wrong[rank] += recv[i] != static_cast<int32_t>(i * 10 + 4 * call);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(wrong[rank], 0) << rank;
    EXPECT_EQ(ran[rank], ran[0]) << "rank " << rank << " disagrees with rank 0";
    EXPECT_EQ(stragglers[rank], stragglers[0]);
  }
  // The policy reacted to both stragglers.
  EXPECT_NE(std::find(stragglers[0].begin(), stragglers[0].end(), 1), stragglers[0].end());
  EXPECT_NE(std::find(stragglers[0].begin(), stragglers[0].end(), 3), stragglers[0].end());
}

TEST(HostRuntimeTest, MeasuredLinkIsPlausible) {
  absl::StatusOr<LinkModel> link = MeasureHostLink(2);
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_GT(link->alpha_s, 0);
  EXPECT_LT(link->alpha_s, 0.1);
  EXPECT_GT(link->bandwidth_bytes_per_s, 1e6);
  EXPECT_GE(link->shared_lanes, 1);
  EXPECT_FALSE(MeasureHostLink(1).ok());
}

}  // namespace
}  // namespace stragglar
