// The link reports' all-gather over TCP (pipeline/links/tcp_report_transport.h), ranks as threads
// over loopback: every rank gets every block in rank order, gather after gather; a wait for a rank
// that never comes ends at Cancel or at the deadline; a rank that goes is an error naming it.
#include "pipeline/links/tcp_report_transport.h"

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

std::vector<std::unique_ptr<TcpReportTransport>> Transports(int size) {
  std::unique_ptr<TcpListener> listener = *TcpListener::Open("127.0.0.1");
  const std::string hub = listener->address();
  std::vector<std::unique_ptr<TcpReportTransport>> transports;
  transports.push_back(std::make_unique<TcpReportTransport>(
      TcpTransportOptions{.rank = 0, .size = size}, std::move(listener), ""));
  for (int rank = 1; rank < size; ++rank) {
    transports.push_back(std::make_unique<TcpReportTransport>(
        TcpTransportOptions{.rank = rank, .size = size}, nullptr, hub));
  }
  return transports;
}

TEST(TcpReportTransportTest, EveryRankGetsEveryBlockInRankOrder) {
  constexpr int kRanks = 4, kValues = 300;
  std::vector<std::unique_ptr<TcpReportTransport>> transports = Transports(kRanks);
  std::vector<std::thread> threads;
  std::vector<int> wrong(kRanks, 0);
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      for (int gather = 0; gather < 5; ++gather) {
        std::vector<double> mine(kValues);
        for (int i = 0; i < kValues; ++i) mine[i] = gather * 1e6 + rank * 1e3 + i + 0.5;
        absl::StatusOr<std::vector<double>> all = transports[rank]->AllGather(mine);
        if (!all.ok() || all->size() != kRanks * kValues) {
          ++wrong[rank];
          continue;
        }
        for (int r = 0; r < kRanks; ++r) {
          for (int i = 0; i < kValues; ++i) {
            wrong[rank] += (*all)[r * kValues + i] != gather * 1e6 + r * 1e3 + i + 0.5;
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong, std::vector<int>(kRanks, 0));
}

TEST(TcpReportTransportTest, CancelEndsAWaitForARankThatNeverComes) {
  std::vector<std::unique_ptr<TcpReportTransport>> transports = Transports(3);
  // Rank 2 never gathers: rank 0 waits for it to connect, rank 1 for rank 0's answer.
  std::vector<std::future<absl::StatusOr<std::vector<double>>>> waits;
  for (int rank = 0; rank < 2; ++rank) {
    waits.push_back(std::async(std::launch::async, [&, rank] {
      return transports[rank]->AllGather(std::vector<double>(4, rank));
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Clock::time_point cancelled_at = Clock::now();
  for (int rank = 0; rank < 2; ++rank) transports[rank]->Cancel();
  // Rank 0 stops; rank 1 stops too, or first sees rank 0 close its connection.
  EXPECT_TRUE(absl::IsCancelled(waits[0].get().status()));
  const absl::Status rank1 = waits[1].get().status();
  EXPECT_TRUE(absl::IsCancelled(rank1) || absl::IsUnavailable(rank1)) << rank1;
  EXPECT_LT(Clock::now() - cancelled_at, std::chrono::seconds(2));
  EXPECT_TRUE(absl::IsCancelled(transports[0]->AllGather(std::vector<double>(4)).status()));
}

TEST(TcpReportTransportTest, ARankThatGoesIsAnErrorNamingIt) {
  std::vector<std::unique_ptr<TcpReportTransport>> transports = Transports(3);
  const auto gather_all = [&](int ranks) {
    std::vector<std::future<absl::Status>> gathers;
    for (int rank = 0; rank < ranks; ++rank) {
      gathers.push_back(std::async(std::launch::async, [&, rank] {
        return transports[rank]->AllGather(std::vector<double>(2, rank)).status();
      }));
    }
    std::vector<absl::Status> statuses;
    for (auto& gather : gathers) statuses.push_back(gather.get());
    return statuses;
  };
  for (const absl::Status& status : gather_all(3)) EXPECT_TRUE(status.ok()) << status;
  transports.pop_back();  // rank 2 leaves
  const std::vector<absl::Status> statuses = gather_all(2);
  EXPECT_TRUE(absl::IsUnavailable(statuses[0])) << statuses[0];
  EXPECT_THAT(statuses[0].message(), HasSubstr("rank 2 closed"));
  transports.erase(transports.begin());  // rank 0 gives up and leaves: rank 1 learns it
  EXPECT_TRUE(absl::IsUnavailable(statuses[1]) ||
              absl::IsUnavailable(transports[0]->AllGather(std::vector<double>(2)).status()));
}

TEST(TcpReportTransportTest, NoHubIsAnErrorAfterTheDeadline) {
  int port = 0;
  {
    std::unique_ptr<TcpListener> closed = *TcpListener::Open("127.0.0.1");
    port = std::stoi(closed->address().substr(closed->address().find(':') + 1));
  }  // closed: nobody listens there now
  TcpReportTransport lost({.rank = 1, .size = 2, .connect_timeout = std::chrono::milliseconds(200)},
                          nullptr, "127.0.0.1:" + std::to_string(port));
  const absl::Status status = lost.AllGather(std::vector<double>(1)).status();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("cannot reach rank 0"));
  TcpReportTransport bad({.rank = 1, .size = 2}, nullptr, "somewhere");
  EXPECT_THAT(bad.AllGather(std::vector<double>(1)).status().message(),
              HasSubstr("bad link report address"));
}

TEST(TcpReportTransportTest, TheHubWaitsOnlyUntilItsDeadline) {
  std::unique_ptr<TcpListener> listener = *TcpListener::Open();
  EXPECT_THAT(listener->address(), HasSubstr(":"));
  TcpReportTransport hub({.rank = 0, .size = 3, .connect_timeout = std::chrono::milliseconds(200)},
                         std::move(listener), "");
  EXPECT_THAT(hub.AllGather(std::vector<double>(1)).status().message(),
              HasSubstr("2 ranks did not connect"));
}

}  // namespace
}  // namespace stragglar
