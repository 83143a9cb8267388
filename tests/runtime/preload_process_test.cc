#include "runtime/preload_process.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/runtime/ranks_as_threads.h"
#include "tests/scripted_calls.h"

namespace stragglar {
namespace {

using testing_threads::GatheringBackend;
using testing_threads::Rendezvous;

constexpr int kRanks = 2;
constexpr int64_t kCalls = 8;
const LinkModel kLink{.alpha_s = 3e-6, .bandwidth_bytes_per_s = 1e10};

class Backend final : public GatheringBackend {
 public:
  using GatheringBackend::GatheringBackend;
  absl::Status BroadcastFromRankZero(std::string&) override { return absl::OkStatus(); }
};

// Each call reports the scripted timing of its rank: rank 1 turns late from call 20, never here.
class ScriptedWork final : public CallWork {
 public:
  explicit ScriptedWork(int rank) : rank_(rank) {}
  CallOutcome Run(const CallDecision& decision, const RankProgram*) override {
    return {.timing = scripted::Timing(/*late_rank=*/1, rank_, decision.call, decision)};
  }
  bool RunsPlans() const override { return false; }

 private:
  int rank_;
};

std::string Read(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// Three communicators on every rank, made in the same order: "sub" (not world-sized, so it may not
// trace), then "world" and "again". Each rank's process is its own, as each rank is a process.
TEST(PreloadProcessTest, TheFirstCommunicatorThatMayTraceTracesAndItsRankZeroWritesTheOutputs) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("preload_process_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  Rendezvous gathers(kRanks);
  std::vector<std::vector<bool>> traced(kRanks);  // per rank, per communicator
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      PreloadConfig config;
      config.trace_file = absl::StrCat(dir, "/trace", rank, ".json");
      config.summary_file = absl::StrCat(dir, "/summary", rank, ".json");
      PreloadProcess process("stragglar (test)");
      process.Configure(config, {.version = "0.0.1", .backend = "test"});
      Backend backend(rank, gathers);
      std::vector<std::unique_ptr<Communicator>> comms;
      for (const auto& [name, may_trace] : std::vector<std::pair<std::string, bool>>{
               {"sub", false}, {"world", true}, {"again", true}}) {
        absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(
            rank, kRanks, {.runtime = scripted::Config(), .name = name, .link = kLink}, backend);
        ASSERT_TRUE(comm.ok()) << comm.status();
        process.AddObservers(**comm, kRanks, may_trace);
        traced[rank].push_back((*comm)->observers().recorder() != nullptr);
        comms.push_back(*std::move(comm));
      }
      for (const std::unique_ptr<Communicator>& comm : comms) {
        for (int64_t call = 0; call < kCalls; ++call) {
          ScriptedWork work(rank);
          ASSERT_TRUE(comm->AllReduce(1 << 20, false, work).ok());
        }
      }
      for (const std::unique_ptr<Communicator>& comm : comms) process.WriteOutputs(*comm);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(traced[rank], (std::vector<bool>{false, true, false})) << "rank " << rank;
  }
  // Rank 0 of the traced communicator writes both files, labelled with its name; rank 1 nothing.
  const nlohmann::json summary = nlohmann::json::parse(Read(dir + "/summary0.json"));
  EXPECT_EQ(summary["comm"], "world");
  EXPECT_EQ(summary["calls"], kCalls);
  EXPECT_NE(Read(dir + "/trace0.json").find("stragglar (test)"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/summary1.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/trace1.json"));
  std::filesystem::remove_all(dir);
}

// Without STRAGGLAR_WARN_AFTER and STRAGGLAR_TIMEOUT there is no watchdog; with either there is
// one, until it is ended. Without STRAGGLAR_METRICS_PORT no endpoint runs.
TEST(PreloadProcessTest, StartsAWatchdogOnlyWhenAsked) {
  PreloadProcess quiet("stragglar (test)");
  PreloadConfig config;
  config.warn_after_s = 0;
  config.timeout_s = 0;
  quiet.Configure(config, {});
  quiet.Start(0, [](const std::string&) {});
  EXPECT_EQ(quiet.watchdog(), nullptr);
  EXPECT_EQ(quiet.registry(), nullptr);
  quiet.StopWatchdog();  // nothing to stop

  PreloadProcess watched("stragglar (test)");
  config.warn_after_s = 30;
  watched.Configure(config, {});
  watched.Start(0, [](const std::string&) {});
  ASSERT_NE(watched.watchdog(), nullptr);
  watched.StopWatchdog();
  EXPECT_NE(watched.watchdog(), nullptr);  // stopped, still there for Unwatch
  watched.EndWatchdog();
  EXPECT_EQ(watched.watchdog(), nullptr);
}

}  // namespace
}  // namespace stragglar
