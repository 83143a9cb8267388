// Plans lowered as the communicator lowers them for work that runs in place (the device
// executor's): each rank's program in place with its pre-arrival rounds.
#pragma once

#include <deque>
#include <mutex>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/plan/plan.h"
#include "kernels/program/device_program.h"
#include "kernels/program/program.h"

namespace stragglar {

// LowerPlan in place, then LowerForDevice.
inline absl::StatusOr<DeviceProgram> LowerPlanForDevice(const Plan& plan, int rank) {
  absl::StatusOr<RankProgram> program = LowerPlan(plan, rank, {.in_place = true});
  if (!program.ok()) return program.status();
  return LowerForDevice(*program);
}

// Each rank's in-place program of a plan, kept at one address while this lives, one per distinct
// program: the device executor keys its uploads by a program's address, as it does the
// communicator's, so this must outlive the executors it feeds. Safe from several threads.
class InPlacePrograms {
 public:
  const RankProgram& Of(const Plan& plan, int rank) {
    absl::StatusOr<RankProgram> program = LowerPlan(plan, rank, {.in_place = true});
    EXPECT_TRUE(program.ok()) << program.status();
    if (!program.ok()) program = RankProgram{.rank = rank, .num_ranks = plan.num_ranks};
    std::lock_guard<std::mutex> lock(mutex_);
    for (const RankProgram& kept : programs_) {
      if (kept == *program) return kept;
    }
    return programs_.emplace_back(*std::move(program));
  }

 private:
  // std::mutex rather than absl::Mutex: ThreadSanitizer understands pthread primitives, and
  // Debian's Abseil is not built for it.
  std::mutex mutex_;
  std::deque<RankProgram> programs_;  // guarded by mutex_
};

}  // namespace stragglar
