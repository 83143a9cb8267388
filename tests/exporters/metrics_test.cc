#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "exporters/prometheus_exporter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "runtime/env_config.h"
#include "runtime/host_runtime.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;

const LinkModel kPaperLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};

// The series of `name` whose labels include every one of `labels`; fails the test unless exactly
// one matches.
prometheus::ClientMetric Series(prometheus::Registry& registry, const std::string& name,
                                const std::vector<prometheus::ClientMetric::Label>& labels) {
  std::vector<prometheus::ClientMetric> found;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      bool all = true;
      for (const auto& wanted : labels) {
        all = all &&
              std::find(metric.label.begin(), metric.label.end(), wanted) != metric.label.end();
      }
      if (all) found.push_back(metric);
    }
  }
  EXPECT_EQ(found.size(), 1u) << name;
  return found.empty() ? prometheus::ClientMetric{} : found.front();
}

prometheus::ClientMetric RankSeries(prometheus::Registry& registry, const std::string& name,
                                    int rank,
                                    std::vector<prometheus::ClientMetric::Label> more = {}) {
  more.push_back({"comm", "test"});
  more.push_back({"rank", absl::StrCat(rank)});
  return Series(registry, name, more);
}

TEST(MetricsTest, SizeBucketsAreBoundedPowersOfTwo) {
  EXPECT_EQ(SizeBucketLabel(0), "1KiB");
  EXPECT_EQ(SizeBucketLabel(1024), "1KiB");
  EXPECT_EQ(SizeBucketLabel(1025), "2KiB");
  EXPECT_EQ(SizeBucketLabel(512 << 10), "512KiB");
  EXPECT_EQ(SizeBucketLabel((512 << 10) + 1), "1MiB");
  EXPECT_EQ(SizeBucketLabel(16 << 20), "16MiB");
  EXPECT_EQ(SizeBucketLabel(int64_t{1} << 30), "1GiB");
  EXPECT_EQ(SizeBucketLabel((int64_t{1} << 30) + 1), ">1GiB");
  EXPECT_EQ(SizeBucketLabel(int64_t{1} << 50), ">1GiB");
}

TEST(MetricsTest, DurationBucketsSpanMicrosecondsToSeconds) {
  const auto& buckets = DurationBuckets();
  ASSERT_EQ(buckets.size(), 22u);
  EXPECT_DOUBLE_EQ(buckets.front(), 1e-6);
  EXPECT_DOUBLE_EQ(buckets[1], 2.5e-6);
  EXPECT_DOUBLE_EQ(buckets.back(), 10);
  // Exactly the decimal values, so the exported `le` labels are the short decimal strings.
  EXPECT_EQ(buckets[3], 1e-5);
  EXPECT_EQ(buckets[7], 2.5e-4);
  EXPECT_EQ(buckets[20], 5);
  EXPECT_TRUE(std::is_sorted(buckets.begin(), buckets.end()));
}

// Drives the observer with crafted calls and an epoch report: every value is exact.
TEST(MetricsTest, ObserverExportsEveryContractMetric) {
  prometheus::Registry registry;
  PrometheusObserver observer(registry, "test", 3);
  // Before any call every series exists: the straggler gauge says "none".
  EXPECT_EQ(RankSeries(registry, "stragglar_straggler_rank", 1).gauge.value, -1);
  EXPECT_EQ(
      RankSeries(registry, "stragglar_collective_calls_total", 1, {{"algorithm", "stragglar"}})
          .counter.value,
      0);

  const CallDecision ring{.algorithm = Algorithm::kRing};
  const CallDecision stragglar{.algorithm = Algorithm::kStragglar, .straggler = 2};
  auto call = [&](int rank, const CallDecision& decision, int64_t bytes, CallTiming timing) {
    observer.OnStart(rank, decision, bytes);
    observer.OnCall(rank, decision, bytes, timing);
  };
  for (int rank = 0; rank < 3; ++rank) {
    call(rank, ring, 4 << 20, {.arrival_s = 0, .duration_s = 0.5});
    call(rank, stragglar, 4 << 20, {.arrival_s = 1, .duration_s = 0.25});
    call(rank, stragglar, 100, {.arrival_s = 2, .duration_s = 0.125});
  }
  EXPECT_EQ(RankSeries(registry, "stragglar_slow_link_rank", 1).gauge.value, -1);
  EpochReport report{.straggler = 2, .persistence = {0.0, 0.125, 0.75}};
  // Rank 1's link 4x slower than the others' 1 GB/s.
  report.link = {.bandwidth_bytes_per_s = 1e9, .slow_rank = 1, .slow_factor = 4};
  report.calls.push_back({.lag_s = {0, 0.25, 1.0}, .saved_s = 0.5});
  report.calls.push_back({.lag_s = {0.5, 0, 0.75}, .saved_s = -0.125});
  for (int rank = 0; rank < 3; ++rank) observer.OnEpoch(rank, report);

  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(
        RankSeries(registry, "stragglar_collective_calls_total", rank, {{"algorithm", "ring"}})
            .counter.value,
        1);
    EXPECT_EQ(
        RankSeries(registry, "stragglar_collective_calls_total", rank, {{"algorithm", "stragglar"}})
            .counter.value,
        2);
    const auto duration = RankSeries(registry, "stragglar_collective_duration_seconds", rank,
                                     {{"algorithm", "stragglar"}, {"size_bucket", "4MiB"}})
                              .histogram;
    EXPECT_EQ(duration.sample_count, 1u);
    EXPECT_EQ(duration.sample_sum, 0.25);
    EXPECT_EQ(RankSeries(registry, "stragglar_collective_duration_seconds", rank,
                         {{"algorithm", "stragglar"}, {"size_bucket", "1KiB"}})
                  .histogram.sample_sum,
              0.125);
    EXPECT_EQ(RankSeries(registry, "stragglar_straggler_rank", rank).gauge.value, 2);
    EXPECT_EQ(RankSeries(registry, "stragglar_straggler_persistence_ratio", rank).gauge.value,
              report.persistence[rank]);
    EXPECT_EQ(RankSeries(registry, "stragglar_slow_link_rank", rank).gauge.value, 1);
    EXPECT_EQ(RankSeries(registry, "stragglar_link_bandwidth_bytes_per_second", rank).gauge.value,
              rank == 1 ? 0.25e9 : 1e9);
    const auto lag = RankSeries(registry, "stragglar_arrival_lag_seconds", rank).histogram;
    EXPECT_EQ(lag.sample_count, 2u);
    EXPECT_EQ(lag.sample_sum, report.calls[0].lag_s[rank] + report.calls[1].lag_s[rank]);
    // Every rank saw both calls: saved and lost are per call, exported by every rank.
    EXPECT_EQ(RankSeries(registry, "stragglar_time_saved_seconds_total", rank).counter.value, 0.5);
    EXPECT_EQ(RankSeries(registry, "stragglar_time_lost_seconds_total", rank).counter.value, 0.125);
    // ring -> stragglar on 4 MiB is one switch; the 100-byte bucket had only stragglar.
    EXPECT_EQ(RankSeries(registry, "stragglar_policy_switches_total", rank).counter.value, 1);
  }
  // Waiting for the last rank: rank 0 waited 1.0 + 0.25, rank 1 0.75 + 0.75, rank 2 0 + 0.
  EXPECT_EQ(RankSeries(registry, "stragglar_wait_seconds_total", 0).counter.value, 1.25);
  EXPECT_EQ(RankSeries(registry, "stragglar_wait_seconds_total", 1).counter.value, 1.5);
  EXPECT_EQ(RankSeries(registry, "stragglar_wait_seconds_total", 2).counter.value, 0);
}

// Each rank exports its own link as the slow-link probe measured it, each way, its fastest batch
// and its slowest; none before a report has speeds (the probe did not look).
TEST(MetricsTest, EachRankExportsItsMeasuredLinkEachWay) {
  prometheus::Registry registry;
  PrometheusObserver observer(registry, "test", 4);
  const auto measured = [&](int rank, const std::string& direction, const std::string& batch) {
    return RankSeries(registry, "stragglar_link_measured_bytes_per_second", rank,
                      {{"direction", direction}, {"batch", batch}})
        .gauge.value;
  };
  observer.OnEpoch(0, EpochReport{});
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name == "stragglar_link_measured_bytes_per_second") {
      EXPECT_TRUE(family.metric.empty());
    }
  }
  EpochReport report;
  for (int rank = 0; rank < 4; ++rank) {
    report.link_speeds.push_back({.send_bytes_per_s = 1e9 + rank,
                                  .receive_bytes_per_s = 2e9 + rank,
                                  .slowest_send_bytes_per_s = 3e8 + rank,
                                  .slowest_receive_bytes_per_s = 4e8 + rank});
  }
  for (int rank = 0; rank < 4; ++rank) observer.OnEpoch(rank, report);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(measured(rank, "send", "fastest"), 1e9 + rank);
    EXPECT_EQ(measured(rank, "receive", "fastest"), 2e9 + rank);
    EXPECT_EQ(measured(rank, "send", "slowest"), 3e8 + rank);
    EXPECT_EQ(measured(rank, "receive", "slowest"), 4e8 + rank);
  }
  // A later probe's speeds replace them.
  report.link_speeds[2].send_bytes_per_s = 5e8;
  observer.OnEpoch(2, report);
  EXPECT_EQ(measured(2, "send", "fastest"), 5e8);
}

TEST(MetricsTest, ExplorationIsNotASwitch) {
  prometheus::Registry registry;
  PrometheusObserver observer(registry, "test", 2);
  const CallDecision ring{.algorithm = Algorithm::kRing};
  const CallDecision stragglar{.algorithm = Algorithm::kStragglar, .straggler = 1};
  CallDecision explored_ring = ring;
  explored_ring.explored = true;
  for (const CallDecision& decision :
       {ring, stragglar, explored_ring, stragglar, stragglar, ring}) {
    observer.OnStart(0, decision, 1 << 20);
    observer.OnCall(0, decision, 1 << 20, {.duration_s = 1e-3});
  }
  EXPECT_EQ(RankSeries(registry, "stragglar_policy_switches_total", 0).counter.value, 2);
  EXPECT_EQ(RankSeries(registry, "stragglar_collective_calls_total", 0, {{"algorithm", "ring"}})
                .counter.value,
            3);
}

// A preload library serves only its own rank, so no two endpoints export the same series.
TEST(MetricsTest, OnlyTheExportedRanksHaveSeries) {
  prometheus::Registry registry;
  PrometheusObserver observer(registry, "test", 4, {2});
  std::set<std::string> ranks;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    for (const prometheus::ClientMetric& metric : family.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "rank") ranks.insert(label.value);
      }
    }
  }
  EXPECT_EQ(ranks, std::set<std::string>{"2"});
  observer.OnStart(1, {.algorithm = Algorithm::kRing}, 4096);  // not exported: ignored
  observer.OnEpoch(1, EpochReport{.straggler = 3});
  observer.OnStart(2, {.algorithm = Algorithm::kRing}, 4096);
  EXPECT_EQ(RankSeries(registry, "stragglar_collective_calls_total", 2, {{"algorithm", "ring"}})
                .counter.value,
            1);
}

// A call that never completes (a hang) is counted on entry, so the ranks that entered it stand
// one call ahead of the one that did not; its duration is not observed.
TEST(MetricsTest, CallsCountOnEntry) {
  prometheus::Registry registry;
  PrometheusObserver observer(registry, "test", 2);
  observer.OnStart(1, {.algorithm = Algorithm::kRing}, 4096);
  EXPECT_EQ(RankSeries(registry, "stragglar_collective_calls_total", 1, {{"algorithm", "ring"}})
                .counter.value,
            1);
  EXPECT_EQ(RankSeries(registry, "stragglar_collective_calls_total", 0, {{"algorithm", "ring"}})
                .counter.value,
            0);
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name == "stragglar_collective_duration_seconds") {
      EXPECT_TRUE(family.metric.empty());
    }
  }
}

// Through the host runtime: every rank's calls and epochs reach the observer.
TEST(MetricsTest, HostCommunicatorFeedsTheObserver) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto observer = std::make_shared<PrometheusObserver>(*registry, "test", 4);
  RuntimeConfig config;
  config.epoch_calls = 8;
  config.candidates = {Algorithm::kRing};  // so every count below is exact
  absl::StatusOr<std::unique_ptr<HostCommunicator>> comm =
      HostCommunicator::Create(4, config, kPaperLink, {observer});
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      std::vector<float> data(1000, 1.0f);
      for (int call = 0; call < 16; ++call) {
        AllReduceArgs args{.send = data.data(),
                           .recv = data.data(),
                           .count = 1000,
                           .type = DataType::kFloat32,
                           .op = ReduceOp::kSum};
        EXPECT_TRUE((*comm)->AllReduce(rank, args).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(
        RankSeries(*registry, "stragglar_collective_calls_total", rank, {{"algorithm", "ring"}})
            .counter.value,
        16);
    EXPECT_EQ(RankSeries(*registry, "stragglar_collective_duration_seconds", rank,
                         {{"algorithm", "ring"}, {"size_bucket", "4KiB"}})
                  .histogram.sample_count,
              16u);
    EXPECT_EQ(RankSeries(*registry, "stragglar_arrival_lag_seconds", rank).histogram.sample_count,
              16u);  // two epochs of 8
    // Fewer calls than the detector's minimum: nobody can be named.
    EXPECT_EQ(RankSeries(*registry, "stragglar_straggler_rank", rank).gauge.value, -1);
  }
}

// A fake environment for MetricsEndpointFromEnv.
const char* port_value = nullptr;
const char* address_value = nullptr;
const char* FakeEnv(const char* name) {
  if (std::string(name) == "STRAGGLAR_METRICS_PORT") return port_value;
  if (std::string(name) == "STRAGGLAR_METRICS_ADDR") return address_value;
  return nullptr;
}

TEST(MetricsConfigTest, PortAndAddressFromTheEnvironment) {
  std::ostringstream log;
  port_value = nullptr;
  EXPECT_FALSE(MetricsEndpointFromEnv(0, log, FakeEnv).has_value());  // unset: no endpoint
  port_value = "9400";
  std::optional<MetricsEndpoint> endpoint = MetricsEndpointFromEnv(3, log, FakeEnv);
  ASSERT_TRUE(endpoint.has_value());
  EXPECT_EQ(endpoint->port, 9403);  // base + local rank
  EXPECT_EQ(endpoint->address, "127.0.0.1");
  address_value = "0.0.0.0";
  EXPECT_EQ(MetricsEndpointFromEnv(0, log, FakeEnv)->address, "0.0.0.0");
  address_value = "::1";
  EXPECT_EQ(MetricsEndpointFromEnv(0, log, FakeEnv)->address, "::1");
  EXPECT_EQ(log.str(), "");

  // Bad values: one line each, naming the variable and what it accepts; then the default.
  address_value = "localhost:80";
  EXPECT_EQ(MetricsEndpointFromEnv(0, log, FakeEnv)->address, "127.0.0.1");
  EXPECT_THAT(log.str(), HasSubstr("STRAGGLAR_METRICS_ADDR=\"localhost:80\" is invalid"));
  EXPECT_THAT(log.str(), HasSubstr("IPv4 or IPv6 address"));
  address_value = nullptr;
  for (const char* bad : {"http", "-1", "0", "65535x", "70000"}) {
    log.str("");
    port_value = bad;
    EXPECT_FALSE(MetricsEndpointFromEnv(0, log, FakeEnv).has_value()) << bad;
    EXPECT_THAT(log.str(), HasSubstr(absl::StrCat("STRAGGLAR_METRICS_PORT=\"", bad)));
    EXPECT_THAT(log.str(), HasSubstr("port number in [1, 65535]"));
    const std::string text = log.str();
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  }
  port_value = "65535";
  EXPECT_FALSE(MetricsEndpointFromEnv(1, log, FakeEnv).has_value());  // 65536 does not exist
}

// A plain HTTP GET of /metrics on 127.0.0.1:port.
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buffer[4096];
  for (ssize_t got; (got = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, got);
  close(fd);
  return response;
}

TEST(MetricsServerTest, ServesTheRegistryAndReportsAPortInUse) {
  auto registry = std::make_shared<prometheus::Registry>();
  PrometheusObserver observer(*registry, "served", 2);
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ((*server)->endpoint(), absl::StrCat("127.0.0.1:", port));
  const std::string page = Scrape(port);
  EXPECT_THAT(page, HasSubstr("200 OK"));
  EXPECT_THAT(page, HasSubstr("stragglar_straggler_rank{comm=\"served\",rank=\"1\"} -1"));
  EXPECT_THAT(page, HasSubstr("# TYPE stragglar_arrival_lag_seconds histogram"));

  // The same port again: a clear error naming it, and the first server keeps serving.
  absl::StatusOr<std::unique_ptr<MetricsServer>> second =
      MetricsServer::Start("127.0.0.1", port, registry);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_THAT(second.status().message(), HasSubstr("in use"));
  EXPECT_THAT(Scrape(port), HasSubstr("stragglar_policy_switches_total"));

  EXPECT_EQ(MetricsServer::Start("127.0.0.1", 70000, registry).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MetricsServer::Start("203.0.113.7", 0, registry).ok());  // not this host's address
}

}  // namespace
}  // namespace stragglar
