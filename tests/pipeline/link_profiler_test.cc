// Link profiling as the preload runs it, without a GPU: both ends' timings of each transfer
// (pipeline/links/link_reports.h), the per-communicator profiler behind the link metrics and the
// advice (pipeline/links/link_profiler.h), the log of a rank's calls
// (pipeline/links/transfer_log.h), and the exchange threads that give every rank every rank's
// timings (pipeline/links/link_exchange.h), here over an in-process all-gather with ranks as
// threads.
#include "pipeline/links/link_profiler.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pipeline/links/link_exchange.h"
#include "pipeline/links/link_reports.h"
#include "pipeline/links/tcp_report_transport.h"
#include "pipeline/links/transfer_log.h"
#include "prometheus/registry.h"

namespace stragglar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kBytes = 16 << 20;

// --- Reports -----------------------------------------------------------------------------------

TEST(LinkReportsTest, RoundTripsAndTakesAtMostItsSlots) {
  const std::vector<TransferSide> sides = {
      {.peer = 1, .send = true, .index = 7, .bytes = kBytes, .seconds = 1.5e-3},
      {.peer = 0, .send = false, .index = (uint64_t{1} << 40) + 3, .bytes = 3, .seconds = 0},
      {.peer = 2, .send = true, .index = 0, .bytes = 1, .seconds = 2}};
  std::vector<double> block;
  EXPECT_EQ(EncodeReport(sides, 2, block), 2);
  EXPECT_EQ(block.size(), static_cast<size_t>(ReportDoubles(2)));
  absl::StatusOr<std::vector<TransferSide>> decoded = DecodeReport(block, 2);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(*decoded, ElementsAre(sides[0], sides[1]));
  EXPECT_EQ(EncodeReport({}, 2, block), 0);
  EXPECT_TRUE(DecodeReport(block, 2)->empty());
}

TEST(LinkReportsTest, RejectsABlockThatWentWrong) {
  std::vector<double> block;
  EncodeReport({{.peer = 1, .send = true, .index = 1, .bytes = 8, .seconds = 1e-3}}, 2, block);
  EXPECT_THAT(DecodeReport(block, 3).status().message(), HasSubstr("expected"));
  const auto corrupted = [&](int at, double value) {
    std::vector<double> bad = block;
    bad[at] = value;
    return DecodeReport(bad, 2).status();
  };
  EXPECT_THAT(corrupted(0, 3).message(), HasSubstr("count 3"));      // more than its slots
  EXPECT_THAT(corrupted(0, 0.5).message(), HasSubstr("count"));      // not an integer
  EXPECT_THAT(corrupted(1, -1).message(), HasSubstr("entry 0"));     // a negative peer
  EXPECT_THAT(corrupted(2, 2).message(), HasSubstr("entry 0"));      // a direction other than 0/1
  EXPECT_THAT(corrupted(3, 1.5).message(), HasSubstr("entry 0"));    // a fractional index
  EXPECT_THAT(corrupted(5, -1e-3).message(), HasSubstr("entry 0"));  // a negative time
  EXPECT_THAT(corrupted(5, std::nan("")).message(), HasSubstr("entry 0"));
}

TEST(LinkMatcherTest, ALinkTimeIsTheShorterOfItsTwoSidesMatchedByIndex) {
  LinkMatcher matcher;
  // Rank 0 sent to 1 twice; rank 1's receives come later and in the other order.
  EXPECT_TRUE(matcher
                  .Add(0, {{.peer = 1, .send = true, .index = 0, .bytes = 8, .seconds = 5e-3},
                           {.peer = 1, .send = true, .index = 1, .bytes = 8, .seconds = 1e-3}})
                  .empty());
  EXPECT_EQ(matcher.waiting(), 2);
  const std::vector<LinkTransfer> done =
      matcher.Add(1, {{.peer = 0, .send = false, .index = 1, .bytes = 8, .seconds = 4e-3},
                      {.peer = 0, .send = false, .index = 0, .bytes = 8, .seconds = 2e-3}});
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].link, (Link{0, 1}));
  EXPECT_EQ(done[0].seconds, 1e-3);  // index 1: the send started later
  EXPECT_EQ(done[1].seconds, 2e-3);  // index 0: the receive started later
  EXPECT_EQ(done[1].bytes, 8);
  EXPECT_EQ(matcher.waiting(), 0);
  // The other direction is another link: a receive by 0 from 1 does not match 0's send to 1.
  EXPECT_TRUE(matcher.Add(0, {{.peer = 1, .send = false, .index = 2, .seconds = 1}}).empty());
  EXPECT_TRUE(matcher.Add(0, {{.peer = 1, .send = true, .index = 2, .seconds = 1}}).empty());
  EXPECT_EQ(matcher.Add(1, {{.peer = 0, .send = true, .index = 2, .seconds = 3}})[0].link,
            (Link{1, 0}));
}

TEST(LinkMatcherTest, ASideWhoseOtherEndNeverComesIsDroppedAfterTheWindow) {
  LinkMatcher matcher(/*window=*/4);
  matcher.Add(0, {{.peer = 1, .send = true, .index = 0, .seconds = 1}});  // never received
  for (uint64_t k = 1; k <= 5; ++k) {
    matcher.Add(0, {{.peer = 1, .send = true, .index = k, .seconds = 1}});
    EXPECT_EQ(matcher.Add(1, {{.peer = 0, .send = false, .index = k, .seconds = 2}}).size(), 1u);
  }
  EXPECT_EQ(matcher.dropped(), 1);
  EXPECT_EQ(matcher.waiting(), 0);
}

// --- The transfer log --------------------------------------------------------------------------

TEST(TransferLogTest, IndexesEachPeerAndDirectionAndHandsOverWhatTheGpuHasRun) {
  TransferLog log;
  EXPECT_EQ(log.NextIndex(1, true), 0u);
  EXPECT_EQ(log.NextIndex(1, true), 1u);
  EXPECT_EQ(log.NextIndex(1, false), 0u);
  EXPECT_EQ(log.NextIndex(2, true), 0u);
  log.AddTimed(10, {{.peer = 1, .send = true, .index = 0}});
  log.AddTimed(11, {{.peer = 1, .send = true, .index = 1}, {.peer = 1, .send = false}});  // a group
  log.AddTimed(12, {{.peer = 2, .send = true, .index = 0}});
  log.AddTimed(13, {{.peer = 2, .send = true, .index = 1}});
  std::map<uint64_t, absl::StatusOr<std::optional<double>>> gpu = {
      {10, std::optional<double>(1e-3)},
      {11, std::optional<double>(2e-3)},
      {12, absl::InternalError("timer failed")},
      {13, std::optional<double>()}};  // not run yet
  std::set<uint64_t> released;
  const auto poll = [&](uint64_t ticket) { return gpu.at(ticket); };
  const auto release = [&](uint64_t ticket) { released.insert(ticket); };
  std::vector<TransferSide> taken = log.TakeTimed(2, poll, release);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].seconds, 1e-3);
  EXPECT_EQ(taken[1].seconds, 2e-3);  // a group's sides share its time
  EXPECT_THAT(released, ElementsAre(10, 11, 12));
  EXPECT_EQ(log.abandoned(), 1);
  taken = log.TakeTimed(8, poll, release);  // the group's second side; 13 has not run
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_FALSE(taken[0].send);
  gpu[13] = std::optional<double>(4e-3);
  taken = log.TakeTimed(8, poll, release);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].index, 1u);
  log.AddTimed(14, {{.peer = 1}});
  log.Abandon(release);
  EXPECT_TRUE(released.contains(14));
  EXPECT_EQ(log.abandoned(), 2);
}

// The interposer's thread logs while the exchange thread takes: every side arrives once, in order.
TEST(TransferLogTest, TakesWhileAnotherThreadLogs) {
  TransferLog log;
  constexpr int kCalls = 20000;
  std::thread caller([&log] {
    for (int k = 0; k < kCalls; ++k) {
      log.AddTimed(k, {{.peer = 1, .send = true, .index = log.NextIndex(1, true)}});
    }
  });
  std::vector<TransferSide> taken;
  const auto poll = [](uint64_t ticket) -> absl::StatusOr<std::optional<double>> {
    return 1e-6 * static_cast<double>(ticket);
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (static_cast<int>(taken.size()) < kCalls && std::chrono::steady_clock::now() < deadline) {
    for (const TransferSide& side : log.TakeTimed(256, poll, [](uint64_t) {})) {
      taken.push_back(side);
    }
  }
  caller.join();
  ASSERT_EQ(taken.size(), static_cast<size_t>(kCalls));
  for (int k = 0; k < kCalls; ++k) {
    EXPECT_EQ(taken[k].index, static_cast<uint64_t>(k));
    EXPECT_EQ(taken[k].seconds, 1e-6 * k);
  }
}

// An exchange that has fallen behind: beyond kMaxWaiting timed sides the oldest go, counted.
TEST(TransferLogTest, KeepsAtMostItsLimitOfTimedSides) {
  TransferLog log;
  const int64_t calls = TransferLog::kMaxWaiting + 1000;
  for (int64_t k = 0; k < calls; ++k) {
    log.AddTimed(k, {{.peer = 1, .index = static_cast<uint64_t>(k)}});
  }
  const auto poll = [](uint64_t) -> absl::StatusOr<std::optional<double>> { return 1e-3; };
  const std::vector<TransferSide> taken = log.TakeTimed(1, poll, [](uint64_t) {});
  EXPECT_EQ(log.dropped(), 1000);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].index, 1000u);  // the oldest kept
}

// --- The profiler ------------------------------------------------------------------------------

// Both ends' sides of one iteration of a 4-stage pipeline: 32 micro-batches over each of the 6
// links, each transfer 0.5 ms with 5% log-normal noise plus `link_delay_s` on 1 -> 2. From
// `slow_stage_iteration` on, stage 2 computes 30 ms late, so stage 3's receives from it wait 30 ms
// for each send to be posted: the link is fine, but the receiving side alone would say otherwise.
std::vector<std::vector<TransferSide>> Iteration(int iteration, double link_delay_s,
                                                 bool slow_stage, std::mt19937& random) {
  constexpr int kStages = 4, kMicrobatches = 32;
  std::lognormal_distribution<double> noise(0, 0.05);
  std::uniform_real_distribution<double> small_wait(0, 50e-6);
  std::vector<std::vector<TransferSide>> by_rank(kStages);
  for (const Link& link : PipelineLinks(kStages)) {
    for (int k = 0; k < kMicrobatches; ++k) {
      const uint64_t index = static_cast<uint64_t>(iteration) * kMicrobatches + k;
      const double link_s = 0.5e-3 * noise(random) + (link == Link{1, 2} ? link_delay_s : 0);
      const double receive_wait = slow_stage && link == Link{2, 3} ? 30e-3 : small_wait(random);
      by_rank[link.src].push_back({.peer = link.dst,
                                   .send = true,
                                   .index = index,
                                   .bytes = kBytes,
                                   .seconds = link_s + small_wait(random)});
      by_rank[link.dst].push_back({.peer = link.src,
                                   .send = false,
                                   .index = index,
                                   .bytes = kBytes,
                                   .seconds = link_s + receive_wait});
    }
  }
  return by_rank;
}

PipelineSpec FourStages() {
  return {.microbatches = 32,
          .forward_s = {2e-3, 2e-3, 2e-3, 2e-3},
          .backward_s = {4e-3, 4e-3, 4e-3, 4e-3},
          .link_delay_s = {0, 0, 0}};
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(LinkProfilerTest, NamesTheSlowLinkNotTheSlowStageAndAdvises) {
  const std::string advice_file =
      (std::filesystem::temp_directory_path() / "link_profiler_test_advice.json").string();
  std::filesystem::remove(advice_file);
  absl::StatusOr<std::unique_ptr<LinkProfiler>> profiler =
      LinkProfiler::Create({.stages = 4,
                            .comm = "comm0",
                            .advice_file = advice_file,
                            .configured_stages = FourStages()});
  ASSERT_TRUE(profiler.ok()) << profiler.status();
  std::mt19937 random(7);
  // Healthy, then a slow stage 2 (its receivers wait): nobody is named.
  for (int iteration = 0; iteration < 8; ++iteration) {
    ASSERT_TRUE((*profiler)->Absorb(Iteration(iteration, 0, iteration >= 2, random)).ok());
    EXPECT_FALSE((*profiler)->slow_link().has_value()) << iteration;
  }
  EXPECT_FALSE(std::filesystem::exists(advice_file));
  // Link 1 -> 2 10 ms slow: named within 2 epochs, with advice in the file.
  int named_at = -1;
  for (int iteration = 8; iteration < 16; ++iteration) {
    ASSERT_TRUE((*profiler)->Absorb(Iteration(iteration, 10e-3, true, random)).ok());
    if (named_at < 0 && (*profiler)->slow_link().has_value()) named_at = iteration;
    if (named_at >= 0) {
      EXPECT_EQ((*profiler)->slow_link(), (Link{1, 2})) << iteration;
    }
  }
  EXPECT_GE(named_at, 8);
  EXPECT_LE(named_at, 9);
  ASSERT_TRUE((*profiler)->advice().has_value());
  const nlohmann::json advice = nlohmann::json::parse(ReadFile(advice_file));
  EXPECT_EQ(advice["slow_link"]["src"], 1);
  EXPECT_EQ(advice["slow_link"]["dst"], 2);
  EXPECT_NEAR(advice["delay_s"].get<double>(), 10e-3, 1e-3);
  EXPECT_EQ(advice["warmup"].get<std::vector<int>>(), (*profiler)->advice()->warmup);
  EXPECT_NE((*profiler)->advice()->warmup, (*profiler)->advice()->default_warmup);
  EXPECT_EQ((*profiler)->epochs(), 16);
  EXPECT_EQ((*profiler)->transfers(), 16 * 6 * 32);
  EXPECT_EQ((*profiler)->matcher().waiting(), 0);
  // It recovers: cleared within 2 epochs.
  int cleared_at = -1;
  for (int iteration = 16; iteration < 20 && cleared_at < 0; ++iteration) {
    ASSERT_TRUE((*profiler)->Absorb(Iteration(iteration, 0, true, random)).ok());
    if (!(*profiler)->slow_link().has_value()) cleared_at = iteration;
  }
  EXPECT_GE(cleared_at, 16);
  EXPECT_LE(cleared_at, 17);
  std::filesystem::remove(advice_file);
}

TEST(LinkProfilerTest, EachRankExportsTheLinksItSendsOn) {
  prometheus::Registry registry;
  absl::StatusOr<std::unique_ptr<LinkProfiler>> profiler =
      LinkProfiler::Create({.stages = 4,
                            .comm = "comm3",
                            .metrics = &registry,
                            .exporting_rank = 1,
                            .configured_stages = FourStages()});
  ASSERT_TRUE(profiler.ok()) << profiler.status();
  std::mt19937 random(1);
  for (int iteration = 0; iteration < 12; ++iteration) {
    ASSERT_TRUE(
        (*profiler)->Absorb(Iteration(iteration, iteration >= 4 ? 10e-3 : 0, false, random)).ok());
  }
  ASSERT_EQ((*profiler)->slow_link(), (Link{1, 2}));
  std::map<std::string, std::set<std::string>> series;  // name -> "src->dst" or "stage s"
  std::map<std::string, double> values;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& label : metric.label) labels[label.name] = label.value;
      EXPECT_EQ(labels["comm"], "comm3");
      EXPECT_EQ(labels["rank"], "1");
      const std::string key = labels.contains("stage") ? "stage " + labels["stage"]
                                                       : labels["src"] + "->" + labels["dst"];
      series[family.name].insert(key);
      values[family.name + " " + key] = metric.gauge.value;
    }
  }
  EXPECT_THAT(series["stragglar_link_transfer_seconds"], ElementsAre("1->0", "1->2"));
  EXPECT_THAT(series["stragglar_slow_link"], ElementsAre("1->0", "1->2"));
  EXPECT_EQ(values["stragglar_slow_link 1->2"], 1);
  EXPECT_EQ(values["stragglar_slow_link 1->0"], 0);
  EXPECT_NEAR(values["stragglar_link_delay_seconds 1->2"], 10e-3, 1e-3);
  EXPECT_THAT(series["stragglar_pipeline_warmup_forwards"], ElementsAre("stage 1"));
  EXPECT_EQ(values["stragglar_pipeline_warmup_forwards stage 1"], (*profiler)->advice()->warmup[1]);
}

TEST(LinkProfilerTest, CountsTransfersBetweenNonAdjacentRanksAndRejectsBadSetups) {
  absl::StatusOr<std::unique_ptr<LinkProfiler>> profiler = LinkProfiler::Create({.stages = 4});
  ASSERT_TRUE(profiler.ok());
  (*profiler)->Record({.link = {0, 2}, .bytes = 8, .seconds = 1e-3});
  (*profiler)->Record({.link = {2, 1}, .bytes = 8, .seconds = 1e-3});
  EXPECT_EQ((*profiler)->off_pipeline(), 1);
  EXPECT_EQ((*profiler)->transfers(), 1);
  EXPECT_THAT(LinkProfiler::Create({.stages = 1}).status().message(), HasSubstr("2 stages"));
  EXPECT_THAT(
      LinkProfiler::Create({.stages = 3, .configured_stages = FourStages()}).status().message(),
      HasSubstr("4 stages, but the communicator has 3 ranks"));
  PipelineSpec negative = FourStages();
  negative.forward_s[2] = -1;
  EXPECT_FALSE(LinkProfiler::Create({.stages = 4, .configured_stages = negative}).ok());
}

TEST(LinkProfilerTest, AnAdviceFileThatCannotBeWrittenIsAnErrorAndTheAdviceStands) {
  absl::StatusOr<std::unique_ptr<LinkProfiler>> profiler =
      LinkProfiler::Create({.stages = 4,
                            .advice_file = "/nonexistent-dir/advice.json",
                            .configured_stages = FourStages()});
  ASSERT_TRUE(profiler.ok());
  std::mt19937 random(2);
  absl::Status last;
  for (int iteration = 0; iteration < 8; ++iteration) {
    last = (*profiler)->Absorb(Iteration(iteration, iteration >= 3 ? 10e-3 : 0, false, random));
  }
  EXPECT_THAT(last.message(), HasSubstr("advice file"));
  EXPECT_TRUE((*profiler)->advice().has_value());
}

// --- The exchange ------------------------------------------------------------------------------

// An all-gather among threads: the k-th call of every rank is the k-th gather.
class ThreadWorld {
 public:
  explicit ThreadWorld(int size) : size_(size) {}

  absl::StatusOr<std::vector<double>> AllGather(int rank, int round, absl::Span<const double> mine,
                                                const std::atomic<bool>& cancelled) {
    std::unique_lock<std::mutex> lock(mutex_);
    Round& r = rounds_[round];
    r.blocks.resize(size_);
    r.blocks[rank].assign(mine.begin(), mine.end());
    ++r.arrived;
    changed_.notify_all();
    while (r.arrived < size_) {
      if (cancelled) return absl::CancelledError("cancelled");
      changed_.wait_for(lock, std::chrono::milliseconds(1));
    }
    std::vector<double> all;
    for (const std::vector<double>& block : r.blocks)
      all.insert(all.end(), block.begin(), block.end());
    if (corrupt_rank_ == rank) all[0] = -1;  // a planted corruption of what this rank received
    return all;
  }
  void CorruptWhatRankReceives(int rank) { corrupt_rank_ = rank; }

 private:
  struct Round {
    std::vector<std::vector<double>> blocks;
    int arrived = 0;
  };
  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, Round> rounds_;
  std::atomic<int> corrupt_rank_{-1};
};

class ThreadTransport final : public ReportTransport {
 public:
  ThreadTransport(ThreadWorld& world, int rank) : world_(world), rank_(rank) {}
  absl::StatusOr<std::vector<double>> AllGather(absl::Span<const double> mine) override {
    if (cancelled_) return absl::CancelledError("cancelled");
    return world_.AllGather(rank_, round_++, mine, cancelled_);
  }
  void Cancel() override { cancelled_ = true; }

 private:
  ThreadWorld& world_;
  int rank_;
  int round_ = 0;
  std::atomic<bool> cancelled_{false};
};

// Each rank's sides, handed to its exchanger a few at a time as its GPU would finish them.
class RankSides {
 public:
  void Add(std::vector<TransferSide> sides) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.insert(queue_.end(), sides.begin(), sides.end());
  }
  std::vector<TransferSide> Take(int max) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t n = std::min<size_t>(queue_.size(), max);
    std::vector<TransferSide> taken(queue_.begin(), queue_.begin() + n);
    queue_.erase(queue_.begin(), queue_.begin() + n);
    return taken;
  }
  bool empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.empty();
  }

 private:
  std::mutex mutex_;
  std::vector<TransferSide> queue_;
};

constexpr int kRanks = 4;

// 4 ranks' exchangers over `transport_of(rank)` fed 16 iterations of the pipeline above, link
// 1 -> 2 10 ms slow from the fifth: every rank must name it and advise the same counts.
void ExpectEveryRankAgrees(
    const std::function<std::unique_ptr<ReportTransport>(int rank)>& transport_of) {
  std::vector<RankSides> sides(kRanks);
  std::vector<std::unique_ptr<LinkProfiler>> profilers;
  std::vector<std::unique_ptr<LinkExchanger>> exchangers;
  for (int rank = 0; rank < kRanks; ++rank) {
    profilers.push_back(*LinkProfiler::Create(
        {.stages = kRanks, .exporting_rank = rank, .configured_stages = FourStages()}));
    // 100 slots: an iteration's 64-128 sides per rank take one or two exchanges.
    exchangers.push_back(std::make_unique<LinkExchanger>(
        LinkExchangeOptions{.size = kRanks, .slots = 100, .interval = std::chrono::milliseconds(2)},
        transport_of(rank), [&sides, rank](int max) { return sides[rank].Take(max); },
        *profilers[rank]));
  }
  std::mt19937 random(5);
  for (int iteration = 0; iteration < 16; ++iteration) {
    std::vector<std::vector<TransferSide>> by_rank =
        Iteration(iteration, iteration >= 4 ? 10e-3 : 0, false, random);
    for (int rank = 0; rank < kRanks; ++rank) sides[rank].Add(by_rank[rank]);
  }
  // Until every side has been taken; then one more exchange each, which absorbs the last taken.
  // (The profilers belong to the exchange threads until Stop: only their counters are read here.)
  const auto drained = [&sides] {
    for (RankSides& s : sides) {
      if (!s.empty()) return false;
    }
    return true;
  };
  for (int wait = 0; wait < 10000 && !drained(); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<int> at_drain;
  for (auto& exchanger : exchangers) at_drain.push_back(exchanger->exchanges());
  for (int rank = 0; rank < kRanks; ++rank) {
    for (int wait = 0; wait < 10000 && exchangers[rank]->exchanges() <= at_drain[rank]; ++wait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (auto& exchanger : exchangers) exchanger->Stop();
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE(rank);
    EXPECT_TRUE(exchangers[rank]->running() == false);
    EXPECT_GT(exchangers[rank]->exchanges(), 0);
    EXPECT_EQ(profilers[rank]->transfers(), 16 * 6 * 32);
    EXPECT_EQ(profilers[rank]->epochs(), profilers[0]->epochs());
    EXPECT_EQ(profilers[rank]->slow_link(), (Link{1, 2}));
    ASSERT_TRUE(profilers[rank]->advice().has_value());
    EXPECT_EQ(profilers[rank]->advice()->warmup, profilers[0]->advice()->warmup);
    EXPECT_EQ(profilers[rank]->advice()->delay_s, profilers[0]->advice()->delay_s);
  }
}

TEST(LinkExchangerTest, EveryRankNamesTheSameLinkAndAdvisesTheSameCounts) {
  ThreadWorld world(kRanks);
  ExpectEveryRankAgrees(
      [&world](int rank) { return std::make_unique<ThreadTransport>(world, rank); });
}

// The same over TCP between the ranks, as the preload runs it.
TEST(LinkExchangerTest, OverTcpEveryRankNamesTheSameLinkToo) {
  std::unique_ptr<TcpListener> listener = *TcpListener::Open("127.0.0.1");
  const std::string hub = listener->address();
  ExpectEveryRankAgrees([&](int rank) {
    return std::make_unique<TcpReportTransport>(TcpTransportOptions{.rank = rank, .size = kRanks},
                                                rank == 0 ? std::move(listener) : nullptr, hub);
  });
}

TEST(LinkExchangerTest, StopEndsAGatherThatAPeerWillNeverJoin) {
  ThreadWorld world(2);
  std::unique_ptr<LinkProfiler> profiler = *LinkProfiler::Create({.stages = 2});
  // Rank 1 never starts: rank 0's first gather waits for it until Stop.
  LinkExchanger exchanger(
      {.size = 2, .slots = 4, .interval = std::chrono::milliseconds(1)},
      std::make_unique<ThreadTransport>(world, 0), [](int) { return std::vector<TransferSide>{}; },
      *profiler);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(exchanger.exchanges(), 0);
  exchanger.Stop();
  EXPECT_FALSE(exchanger.running());
}

TEST(LinkExchangerTest, AReportThatWentWrongEndsTheProfilingOfThatRank) {
  ThreadWorld world(2);
  world.CorruptWhatRankReceives(1);
  std::vector<std::unique_ptr<LinkProfiler>> profilers;
  std::vector<std::unique_ptr<LinkExchanger>> exchangers;
  for (int rank = 0; rank < 2; ++rank) {
    profilers.push_back(*LinkProfiler::Create({.stages = 2}));
    exchangers.push_back(std::make_unique<LinkExchanger>(
        LinkExchangeOptions{.size = 2, .slots = 4, .interval = std::chrono::milliseconds(1)},
        std::make_unique<ThreadTransport>(world, rank),
        [](int) { return std::vector<TransferSide>{}; }, *profilers[rank]));
  }
  for (int wait = 0; wait < 5000 && exchangers[1]->running(); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(exchangers[1]->running());
  EXPECT_EQ(exchangers[1]->exchanges(), 0);
  for (auto& exchanger : exchangers) exchanger->Stop();  // rank 0 was waiting for round 2
}

}  // namespace
}  // namespace stragglar
