// One protocol for every backend: the same timings give the same decisions at the same calls,
// whether the ranks exchange epochs at once (ranks as threads, MPI), deferred (the GPU's: calls
// only enqueue work, timings arrive later through a timer's tickets), or a replay feeds them; and
// observers see every call once, in call order, in every backend.
#include "runtime/communicator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/plan_cache.h"
#include "runtime/host_runtime.h"
#include "runtime/replay/replay.h"
#include "tests/scripted_calls.h"

namespace stragglar {
namespace {

const LinkModel kPaperLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
constexpr int kRanks = 4;
constexpr int64_t kBytes = 64 << 20;
constexpr int64_t kCalls = 96;

CallTiming Scripted(int rank, int64_t call, const CallDecision& decision) {
  return scripted::Timing(/*late_rank=*/2, rank, call, decision);
}

RuntimeConfig Config() { return scripted::Config(); }

// The k-th collective of every rank meets the k-th of the others.
class Rendezvous {
 public:
  void Deposit(int64_t round, int rank, std::vector<double> values) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::vector<double>>& slots = rounds_[round];
    slots.resize(kRanks);
    slots[rank] = std::move(values);
    ++counts_[round];
    changed_.notify_all();
  }
  std::vector<double> Collect(int64_t round) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return counts_[round] == kRanks; });
    std::vector<double> all;
    for (const std::vector<double>& each : rounds_[round]) {
      all.insert(all.end(), each.begin(), each.end());
    }
    return all;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, std::vector<std::vector<double>>> rounds_;
  std::map<int64_t, int> counts_;
};

// One rank of ranks as threads: the k-th gather of every rank meets the k-th of the others.
class GatheringBackend : public CommBackend {
 public:
  GatheringBackend(int rank, Rendezvous& gathers) : rank_(rank), gathers_(gathers) {}
  double Now() override { return 0; }
  absl::Status StartGather(absl::Span<const double> mine) override {
    gathers_.Deposit(started_++, rank_, {mine.begin(), mine.end()});
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> FinishGather() override {
    return gathers_.Collect(finished_++);
  }

 protected:
  int rank() const { return rank_; }

 private:
  int rank_;
  Rendezvous& gathers_;
  int64_t started_ = 0, finished_ = 0;
};

// A backend of ranks as threads whose calls are timed by the script: at once, or (deferred)
// through tickets that a poll answers only a few calls later, as a GPU timer would.
class ScriptedBackend final : public GatheringBackend {
 public:
  ScriptedBackend(int rank, bool deferred, Rendezvous& gathers, Rendezvous& broadcasts)
      : GatheringBackend(rank, gathers), deferred_(deferred), broadcasts_(broadcasts) {}

  bool DefersExchange() const override { return deferred_; }
  absl::Status BroadcastFromRankZero(std::string& text) override {
    std::vector<double> bytes(text.begin(), text.end());
    broadcasts_.Deposit(broadcast_, rank(), rank() == 0 ? bytes : std::vector<double>{});
    const std::vector<double> all = broadcasts_.Collect(broadcast_++);
    text.assign(all.begin(), all.end());
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<CallTiming>> PollTiming(uint64_t ticket) override {
    // Still running: a poll learns a call's timing only 6 calls later, after the gather of its
    // epoch has started (half an epoch after it was sealed), which must therefore wait for it.
    if (static_cast<int64_t>(ticket) + 6 > calls_run_) return std::nullopt;
    return WaitTiming(ticket);
  }
  absl::StatusOr<CallTiming> WaitTiming(uint64_t ticket) override {
    return Scripted(rank(), static_cast<int64_t>(ticket), ran_.at(ticket));
  }
  void ReleaseTiming(uint64_t ticket) override { ++released_; }

  void Ran(const CallDecision& decision) {
    ran_[decision.call] = decision;
    ++calls_run_;
  }
  int64_t released() const { return released_; }

 private:
  bool deferred_;
  Rendezvous& broadcasts_;
  int64_t broadcast_ = 0;
  int64_t calls_run_ = 0;
  int64_t released_ = 0;
  std::map<uint64_t, CallDecision> ran_;
};

class ScriptedWork final : public CallWork {
 public:
  ScriptedWork(int rank, ScriptedBackend& backend, bool deferred, bool runs_plans)
      : rank_(rank), backend_(backend), deferred_(deferred), runs_plans_(runs_plans) {}
  CallOutcome Run(const CallDecision& decision, const RankProgram* program) override {
    // No library collective here: every call runs a program, unless the work runs none.
    EXPECT_EQ(program != nullptr, runs_plans_);
    backend_.Ran(decision);
    if (deferred_) return {.ticket = static_cast<uint64_t>(decision.call)};
    return {.timing = Scripted(rank_, decision.call, decision)};
  }

  bool RunsPlans() const override { return runs_plans_; }

 private:
  int rank_;
  ScriptedBackend& backend_;
  bool deferred_;
  bool runs_plans_;
};

// What rank 0's observers saw.
class Watcher final : public CollectiveObserver {
 public:
  void OnStart(int rank, const CallDecision& decision, int64_t bytes) override {
    started.push_back(decision.call);
  }
  void OnCall(int rank, const CallDecision& decision, int64_t bytes,
              const CallTiming& timing) override {
    EXPECT_EQ(timing.duration_s, Scripted(rank, decision.call, decision).duration_s);
    delivered.push_back(decision.call);
  }
  void OnEpoch(int rank, const EpochReport& report) override { epochs.push_back(report); }

  std::vector<int64_t> started, delivered;
  std::vector<EpochReport> epochs;
};

struct ScriptedRun {
  std::vector<std::vector<CallDecision>> decisions;  // [rank][call]
  std::vector<DetectionEvent> detections;            // rank 0's
  std::string calibration;                           // rank 0's, as JSON
  std::shared_ptr<Watcher> watcher;                  // rank 0's
};

ScriptedRun RunThreads(bool deferred, bool runs_plans = true) {
  Rendezvous gathers, broadcasts;
  ScriptedRun run{.decisions = std::vector<std::vector<CallDecision>>(kRanks),
                  .watcher = std::make_shared<Watcher>()};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      ScriptedBackend backend(rank, deferred, gathers, broadcasts);
      absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(
          rank, kRanks, {.runtime = Config(), .name = "scripted", .link = kPaperLink}, backend);
      ASSERT_TRUE(comm.ok()) << comm.status();
      if (rank == 0) (*comm)->observers().Add(run.watcher);
      for (int64_t call = 0; call < kCalls; ++call) {
        ScriptedWork work(rank, backend, deferred, runs_plans);
        absl::StatusOr<CallDecision> decision = (*comm)->AllReduce(kBytes, false, work);
        ASSERT_TRUE(decision.ok()) << decision.status();
        EXPECT_EQ(decision->call, call);
        run.decisions[rank].push_back(*decision);
      }
      if (rank == 0) {
        run.detections = (*comm)->core().detections();
        run.calibration = (*comm)->core().calibration().ToJson().dump();
      }
      // Every ticket a deferred call took is given back once its timing was read: every call of
      // an absorbed epoch, and the others as the polls found them.
      if (deferred) {
        EXPECT_GE(backend.released(), (*comm)->core().epochs() * 8);
      }
      if (deferred && rank == 0) {
        EXPECT_EQ(backend.released(), static_cast<int64_t>(run.watcher->delivered.size()));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return run;
}

ScriptedRun RunReplay(bool deferred) {
  ScriptedRun run{.decisions = std::vector<std::vector<CallDecision>>(1)};
  PolicyReplayer replayer = *PolicyReplayer::Create(Config(), kRanks, kPaperLink, deferred);
  for (int64_t call = 0; call < kCalls; ++call) {
    absl::StatusOr<CallDecision> decision = replayer.Call(kBytes, [&](const CallDecision& decided) {
      ReplayedTimings timings;
      for (int rank = 0; rank < kRanks; ++rank) {
        timings.by_rank.push_back(Scripted(rank, decided.call, decided));
      }
      return timings;
    });
    EXPECT_TRUE(decision.ok()) << decision.status();
    run.decisions[0].push_back(decision.value_or(CallDecision{}));
  }
  run.detections = replayer.core().detections();
  run.calibration = replayer.core().calibration().ToJson().dump();
  return run;
}

::testing::AssertionResult SameDecisions(const std::vector<CallDecision>& a,
                                         const std::vector<CallDecision>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size();
  for (size_t call = 0; call < a.size(); ++call) {
    if (a[call].call != b[call].call || a[call].algorithm != b[call].algorithm ||
        a[call].straggler != b[call].straggler || a[call].explored != b[call].explored ||
        a[call].predicted_s != b[call].predicted_s) {
      return ::testing::AssertionFailure()
             << "call " << call << ": " << AlgorithmName(a[call].algorithm) << " vs "
             << AlgorithmName(b[call].algorithm);
    }
  }
  return ::testing::AssertionSuccess();
}

void ExpectSameRun(const ScriptedRun& online, const ScriptedRun& replayed) {
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(SameDecisions(online.decisions[rank], online.decisions[0])) << "rank " << rank;
  }
  EXPECT_TRUE(SameDecisions(online.decisions[0], replayed.decisions[0]));
  ASSERT_EQ(online.detections.size(), replayed.detections.size());
  for (size_t i = 0; i < online.detections.size(); ++i) {
    EXPECT_EQ(online.detections[i].call, replayed.detections[i].call);
    EXPECT_EQ(online.detections[i].straggler, replayed.detections[i].straggler);
  }
  EXPECT_EQ(online.calibration, replayed.calibration);
}

int64_t FirstStragglar(const std::vector<CallDecision>& decisions) {
  for (const CallDecision& decision : decisions) {
    if (decision.algorithm == Algorithm::kStragglar && !decision.explored) return decision.call;
  }
  return -1;
}

TEST(CommunicatorTest, ImmediateExchangeDecidesAsTheReplay) {
  const ScriptedRun online = RunThreads(/*deferred=*/false);
  const ScriptedRun replayed = RunReplay(/*deferred=*/false);
  ExpectSameRun(online, replayed);
  ASSERT_EQ(online.detections.size(), 1u);
  EXPECT_EQ(online.detections[0].straggler, 2);
  EXPECT_GT(FirstStragglar(online.decisions[0]), 20);
  // Observers: every call once, in order, its timing known at once.
  std::vector<int64_t> every(kCalls);
  for (int64_t call = 0; call < kCalls; ++call) every[call] = call;
  EXPECT_EQ(online.watcher->started, every);
  EXPECT_EQ(online.watcher->delivered, every);
  EXPECT_EQ(online.watcher->epochs.size(), static_cast<size_t>(kCalls / 8));
}

// Work that runs no plan (a replay's) is given none, so no plan is lowered or built whole for it,
// and every decision, detection and calibration is the same.
TEST(CommunicatorTest, WorkThatRunsNoPlanIsGivenNoneAndDecidesAlike) {
  ExpectSameRun(RunThreads(/*deferred=*/false), RunThreads(/*deferred=*/false,
                                                           /*runs_plans=*/false));
}

// Speeds given with the link (runtime/mpi/link_cache.h's) are reported as a setup probe's are.
TEST(CommunicatorTest, SpeedsGivenWithTheLinkAreReportedEveryEpoch) {
  const std::vector<RankLinkSpeed> speeds = {
      {1e6, 2e6, 3e6, 4e6}, {5e6, 6e6, 7e6, 8e6}, {9e6, 1e7, 2e7, 3e7}, {4e7, 5e7, 6e7, 7e7}};
  Rendezvous gathers, broadcasts;
  auto watcher = std::make_shared<Watcher>();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      ScriptedBackend backend(rank, /*deferred=*/false, gathers, broadcasts);
      absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(
          rank, kRanks,
          {.runtime = Config(), .name = "cached", .link = kPaperLink, .link_speeds = speeds},
          backend);
      ASSERT_TRUE(comm.ok()) << comm.status();
      EXPECT_EQ((*comm)->core().link_speeds(), speeds);
      if (rank == 0) (*comm)->observers().Add(watcher);
      for (int64_t call = 0; call < 16; ++call) {
        ScriptedWork work(rank, backend, /*deferred=*/false, /*runs_plans=*/true);
        ASSERT_TRUE((*comm)->AllReduce(kBytes, false, work).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(watcher->epochs.size(), 2u);
  for (const EpochReport& epoch : watcher->epochs) EXPECT_EQ(epoch.link_speeds, speeds);
}

// A GPU backend: decisions come from the epochs absorbed an epoch late, and the replay told to
// exchange that way reproduces them call by call.
TEST(CommunicatorTest, DeferredExchangeDecidesAsTheDeferredReplay) {
  const ScriptedRun online = RunThreads(/*deferred=*/true);
  const ScriptedRun replayed = RunReplay(/*deferred=*/true);
  ExpectSameRun(online, replayed);
  const ScriptedRun immediate = RunReplay(/*deferred=*/false);
  EXPECT_GE(FirstStragglar(online.decisions[0]), FirstStragglar(immediate.decisions[0]) + 8);
  // Observers: every call once, in call order, each once its timing is known (a few calls
  // later), and every call of an absorbed epoch before that epoch's report.
  std::vector<int64_t> ordered = online.watcher->delivered;
  std::sort(ordered.begin(), ordered.end());
  EXPECT_EQ(ordered, online.watcher->delivered);
  EXPECT_EQ(std::adjacent_find(ordered.begin(), ordered.end()), ordered.end());
  EXPECT_GE(ordered.size(), static_cast<size_t>(kCalls - 8));
  for (const EpochReport& report : online.watcher->epochs) {
    EXPECT_GE(static_cast<int64_t>(ordered.size()), report.first_call + 8);
  }
  // Absorbed at calls 16, 24, ..., 88: the last two epochs are still sealed or open.
  EXPECT_EQ(online.watcher->epochs.size(), static_cast<size_t>(kCalls / 8 - 2));
}

// Records each call's decision and the program it was given (the communicator keeps programs for
// its lifetime).
class ProgramRecordingWork final : public CallWork {
 public:
  CallOutcome Run(const CallDecision& decision, const RankProgram* program) override {
    calls.push_back({decision, program});
    return {.timing = Scripted(0, decision.call, decision)};
  }
  bool RunsPlans() const override { return true; }

  struct Call {
    CallDecision decision;
    const RankProgram* program;
  };
  std::vector<Call> calls;
};

// The plan of `decision` that `program` was lowered from, among what a plan cache gives for it:
// its shape, or without one the flat schedule in any number of pieces. Null when none is.
const Plan* PlanOfProgram(PlanCache& cache, const CallDecision& decision,
                          const RankProgram& program) {
  std::vector<absl::StatusOr<PricedPlan>> candidates;
  if (decision.shape.has_value()) {
    candidates.push_back(
        cache.WithShape(Algorithm::kStragglar, decision.straggler, *decision.shape));
  } else {
    for (int pieces : {1, 2, 4, 8, 16}) {
      candidates.push_back(cache.WithPieces(Algorithm::kStragglar, decision.straggler, pieces));
    }
  }
  for (absl::StatusOr<PricedPlan>& plan : candidates) {
    if (!plan.ok()) continue;
    absl::StatusOr<const Plan*> whole = cache.Materialized(*plan);
    if (!whole.ok()) continue;
    absl::StatusOr<RankProgram> lowered = LowerPlan(**whole, program.rank, program.placement);
    if (lowered.ok() && *lowered == program) return *whole;
  }
  return nullptr;
}

// A forced StragglAR family (STRAGGLAR_ALGORITHM) runs that family's plan, in the shape the chooser
// would price, around the forced straggler on every rank; hierarchical StragglAR on one machine
// runs the plan cache's StragglAR (the flat schedule) instead.
TEST(CommunicatorTest, AForcedFamilyRunsThatFamilysPlanOnEveryRank) {
  using Forced = PreloadConfig::Forced;
  struct Case {
    Forced forced;
    std::optional<Topology> topology;
    PlanVariant want;
  };
  for (const Case& c :
       {Case{Forced::kStragglarLogDepth, std::nullopt, PlanVariant::kLogDepth},
        Case{Forced::kStragglarHierarchical, Topology{.nodes = 2, .ranks_per_node = 2},
             PlanVariant::kHierarchical},
        Case{Forced::kStragglarHierarchical, std::nullopt, PlanVariant::kFlat},
        Case{Forced::kStragglar, Topology{.nodes = 2, .ranks_per_node = 2}, PlanVariant::kFlat}}) {
    SCOPED_TRACE(ForcedAlgorithmName(c.forced));
    Rendezvous gathers, broadcasts;
    std::vector<std::thread> threads;
    for (int rank = 0; rank < kRanks; ++rank) {
      threads.emplace_back([&, rank] {
        ScriptedBackend backend(rank, /*deferred=*/false, gathers, broadcasts);
        RuntimeConfig config = Config();
        config.topology = c.topology;
        absl::StatusOr<std::unique_ptr<Communicator>> comm =
            Communicator::Create(rank, kRanks,
                                 {.runtime = config,
                                  .name = "forced",
                                  .link = kPaperLink,
                                  .forced = c.forced,
                                  .forced_straggler = 1},
                                 backend);
        ASSERT_TRUE(comm.ok()) << comm.status();
        ProgramRecordingWork work;
        for (int64_t call = 0; call < 16; ++call) {
          absl::StatusOr<CallDecision> decision = (*comm)->AllReduce(kBytes, false, work);
          ASSERT_TRUE(decision.ok()) << decision.status();
          EXPECT_EQ(decision->algorithm, Algorithm::kStragglar);
          EXPECT_EQ(decision->straggler, 1);
          EXPECT_EQ(decision->shape.has_value(),
                    c.want != PlanVariant::kFlat || c.topology.has_value());
        }
        PlanCache cache(kRanks, 0, {.topology = c.topology.value_or(Topology::Flat(kRanks))});
        ASSERT_EQ(work.calls.size(), 16u);
        for (const ProgramRecordingWork::Call& call : work.calls) {
          ASSERT_NE(call.program, nullptr);
          const Plan* plan = PlanOfProgram(cache, call.decision, *call.program);
          ASSERT_NE(plan, nullptr) << "rank " << rank << " call " << call.decision.call;
          EXPECT_EQ(plan->variant, c.want) << "rank " << rank;
          EXPECT_EQ(plan->straggler, 1) << "rank " << rank;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
}

// Work that runs programs on buffers of its own (the device executor's windows) gets them lowered
// in place and with their pre-arrival rounds, whatever the call's buffers and the communicator's
// pre-arrival setting; other work gets the call's placement.
class InPlaceWork final : public CallWork {
 public:
  explicit InPlaceWork(bool in_place) : in_place_(in_place) {}
  CallOutcome Run(const CallDecision& decision, const RankProgram* program) override {
    if (program != nullptr) placements.push_back(program->placement);
    return {.timing = Scripted(0, decision.call, decision)};
  }
  bool RunsInPlace() const override { return in_place_; }
  std::vector<Placement> placements;

 private:
  bool in_place_;
};

TEST(CommunicatorTest, WorkThatRunsInPlaceGetsProgramsLoweredInPlace) {
  for (bool runs_in_place : {false, true}) {
    Rendezvous gathers, broadcasts;
    std::vector<std::thread> threads;
    for (int rank = 0; rank < kRanks; ++rank) {
      threads.emplace_back([&, rank] {
        ScriptedBackend backend(rank, /*deferred=*/false, gathers, broadcasts);
        absl::StatusOr<std::unique_ptr<Communicator>> comm =
            Communicator::Create(rank, kRanks,
                                 {.runtime = Config(),
                                  .name = "in-place",
                                  .link = kPaperLink,
                                  .forced = PreloadConfig::Forced::kStragglar,
                                  .forced_straggler = 1,
                                  .native_pre_arrival = true},
                                 backend);
        ASSERT_TRUE(comm.ok()) << comm.status();
        InPlaceWork work(runs_in_place);
        for (int64_t call = 0; call < 4; ++call) {
          ASSERT_TRUE((*comm)->AllReduce(kBytes, /*in_place=*/false, work).ok());
        }
        const Placement want = runs_in_place
                                   ? Placement{.in_place = true}
                                   : Placement{.in_place = false, .native_pre_arrival = true};
        EXPECT_EQ(work.placements.size(), 4u);
        for (const Placement& placement : work.placements) {
          EXPECT_EQ(placement, want) << "rank " << rank << " runs in place " << runs_in_place;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
}

// The host backend with real threads, a real transport and real plans: the timings it recorded,
// replayed, give the decisions it took.
TEST(CommunicatorTest, HostRuntimeDecidesAsTheReplayOfItsTimings) {
  RuntimeConfig config = Config();
  absl::StatusOr<std::unique_ptr<HostCommunicator>> host =
      HostCommunicator::Create(kRanks, config, kPaperLink);
  ASSERT_TRUE(host.ok()) << host.status();
  constexpr int64_t kCount = 4096;
  std::vector<std::vector<CallTiming>> timings(48, std::vector<CallTiming>(kRanks));
  std::vector<CallDecision> decisions(48);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      std::vector<float> data(kCount, 1.0f);
      for (int call = 0; call < 48; ++call) {
        if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(3));
        absl::StatusOr<CallDecision> decision =
            (*host)->AllReduce(rank, {.send = data.data(), .recv = data.data(), .count = kCount},
                               &timings[call][rank]);
        ASSERT_TRUE(decision.ok()) << decision.status();
        if (rank == 0) decisions[call] = *decision;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  PolicyReplayer replayer = *PolicyReplayer::Create(config, kRanks, kPaperLink);
  std::vector<CallDecision> replayed;
  for (int call = 0; call < 48; ++call) {
    replayed.push_back(*replayer.Call(kCount * sizeof(float), [&](const CallDecision&) {
      return ReplayedTimings{.by_rank = timings[call]};
    }));
  }
  EXPECT_TRUE(SameDecisions(decisions, replayed));
  EXPECT_EQ(replayer.core().detections().size(), (*host)->core(0).detections().size());
}

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
  Rendezvous gathers;
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
    Rendezvous gathers;
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
