// The MPI backend runs the same protocol as every other: each rank creates a communicator over
// MpiBackend (its link probed over MPI, the epochs gathered with MPI_Allgather) and makes calls
// whose timings are scripted (rank 1 turns 20 ms late at call 20); every rank must take the same
// decisions, and they must be the ones `stragglar replay`'s replayer takes on the same timings
// with the same link, call by call. Prints one line; exit status 0 when they agree.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/mpi/mpi_backend.h"
#include "runtime/replay/replay.h"
#include "tests/scripted_calls.h"

namespace stragglar {
namespace {

constexpr int64_t kBytes = 64 << 20;
constexpr int64_t kCalls = 96;

CallTiming Scripted(int rank, int64_t call, const CallDecision& decision) {
  return scripted::Timing(/*late_rank=*/1, rank, call, decision);
}

class ScriptedWork final : public CallWork {
 public:
  explicit ScriptedWork(int rank) : rank_(rank) {}
  CallOutcome Run(const CallDecision& decision, const RankProgram* program) override {
    return {.timing = Scripted(rank_, decision.call, decision)};
  }

 private:
  int rank_;
};

RuntimeConfig Config() { return scripted::Config(); }

// Algorithm, straggler and exploration of a decision in one number, to gather and compare.
int Code(const CallDecision& decision) {
  return static_cast<int>(decision.algorithm) * 1000 + decision.straggler.value_or(-1) * 10 +
         decision.explored;
}

int Check(int rank, int size) {
  MPI_Comm own = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &own);
  MpiBackend backend(own, rank, size);
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      Communicator::Create(rank, size, {.runtime = Config(), .name = "check"}, backend);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, std::string(comm.status().message()).c_str());
    return 1;
  }
  std::vector<int> mine;
  for (int64_t call = 0; call < kCalls; ++call) {
    ScriptedWork work(rank);
    absl::StatusOr<CallDecision> decision = (*comm)->AllReduce(kBytes, false, work);
    mine.push_back(decision.ok() ? Code(*decision) : -1);
  }
  std::vector<int> all(rank == 0 ? kCalls * size : 0);
  MPI_Gather(mine.data(), kCalls, MPI_INT, all.data(), kCalls, MPI_INT, 0, MPI_COMM_WORLD);
  int failures = 0;
  if (rank == 0) {
    PolicyReplayer replayer = *PolicyReplayer::Create(Config(), size, (*comm)->link());
    for (int64_t call = 0; call < kCalls; ++call) {
      const absl::StatusOr<CallDecision> replayed =
          replayer.Call(kBytes, [&](const CallDecision& decided) {
            ReplayedTimings timings;
            for (int r = 0; r < size; ++r) timings.by_rank.push_back(Scripted(r, call, decided));
            return timings;
          });
      for (int r = 0; r < size; ++r) {
        if (!replayed.ok() || all[r * kCalls + call] != Code(*replayed)) {
          if (++failures <= 5) {
            std::printf("call %ld: rank %d decided %d, the replay %d\n", static_cast<long>(call), r,
                        all[r * kCalls + call], replayed.ok() ? Code(*replayed) : -1);
          }
        }
      }
    }
    const bool named =
        replayer.core().detections().size() == 1 && replayer.core().detections()[0].straggler == 1;
    std::printf(
        "protocol_check: %d ranks, %ld calls, %s; straggler %s\n", size, static_cast<long>(kCalls),
        failures == 0 ? "decisions identical on every rank and in the replay" : "DECISIONS DIFFER",
        named ? "named" : "NOT NAMED");
    failures += named ? 0 : 1;
  }
  MPI_Bcast(&failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
  comm->reset();
  MPI_Comm_free(&own);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace stragglar

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int result = stragglar::Check(rank, size);
  MPI_Finalize();
  return result;
}
