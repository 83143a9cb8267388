// One protocol for every backend: the same timings give the same decisions at the same calls,
// whether the ranks exchange epochs at once (ranks as threads, MPI), deferred (the GPU's: calls
// only enqueue work, timings arrive later through a timer's tickets), or a replay feeds them; and
// observers see every call once, in call order, in every backend.
#include "runtime/communicator.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "policy/plan_cache.h"
#include "runtime/host_runtime.h"
#include "runtime/replay/replay.h"
#include "tests/runtime/ranks_as_threads.h"
#include "tests/scripted_calls.h"

namespace stragglar {
namespace {

using testing_threads::GatheringBackend;
using testing_threads::Rendezvous;
using testing_threads::SameDecisions;

const LinkModel kPaperLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 450.0 * (1LL << 30)};
constexpr int kRanks = 4;
constexpr int64_t kBytes = 64 << 20;
constexpr int64_t kCalls = 96;

CallTiming Scripted(int rank, int64_t call, const CallDecision& decision) {
  return scripted::Timing(/*late_rank=*/2, rank, call, decision);
}

RuntimeConfig Config() { return scripted::Config(); }

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
  Rendezvous gathers(kRanks), broadcasts(kRanks);
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
  Rendezvous gathers(kRanks), broadcasts(kRanks);
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
    Rendezvous gathers(kRanks), broadcasts(kRanks);
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
    Rendezvous gathers(kRanks), broadcasts(kRanks);
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

}  // namespace
}  // namespace stragglar
