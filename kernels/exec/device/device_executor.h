// The device-resident executor of one communicator: each call is one kernel launch on the
// caller's stream (kernels/exec/device/device_kernel.h) that runs this rank's whole program over
// the peer windows (kernels/exec/device/peer_windows.h). The launch is injectable (DeviceLauncher),
// so that CI runs everything but CUDA itself with ranks and CTAs as CPU threads.
//
// Calls never wait for the GPU. A kernel whose wait gave up (the abort word, the timeout, or a
// peer's signal of a later slice: out of step) leaves a record that the next call reads: that
// call, and every one after it, fails with an error naming the rank the kernel waited for, and
// kernels launched meanwhile exit without writing. The windows' signals are then out of step
// between the ranks, so the executor stays failed; the caller reports it as NCCL reports an
// asynchronous error, and the job aborts the communicator. A failure of this rank alone (a bad
// buffer, a failed upload or launch) is final in the same way: its peers then give up waiting
// for it, and never take a later call's signal for the one they await.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/exec/all_reduce_args.h"
#include "kernels/exec/device/device_rank.h"
#include "kernels/exec/device/device_timeline.h"
#include "kernels/exec/device/peer_windows.h"
#include "kernels/program/device_program.h"
#include "kernels/program/program.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {

class DeviceLauncher {
 public:
  virtual ~DeviceLauncher() = default;
  // Enqueues `ctas` CTAs of the kernel on `stream` (a cudaStream_t), after the previous launch
  // with the same `order` whatever its stream: NCCL lets consecutive calls of a communicator use
  // different streams, and two kernels sharing the windows must never overlap. `*order` starts
  // null and belongs to the launcher (ReleaseOrder). Errors say what failed.
  virtual absl::Status Launch(DataType type, ReduceOp op, const DeviceProgramView& program,
                              const DeviceCall& call, const DeviceWatch& watch, int ctas,
                              void* stream, void** order) = 0;
  virtual void ReleaseOrder(void* order) {}
};

class DeviceExecutor {
 public:
  // `windows` set up for this communicator; `memory` and `launcher` must outlive the executor.
  // `timeout_ns` bounds every wait of the kernel (0: none).
  DeviceExecutor(std::unique_ptr<PeerWindows> windows, PeerMemory& memory, DeviceLauncher& launcher,
                 uint64_t timeout_ns);
  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor&) = delete;
  DeviceExecutor& operator=(const DeviceExecutor&) = delete;

  // Enqueues one call of `program` (lowered in place with its pre-arrival rounds, LowerForDevice;
  // lowered for the device and uploaded at its first call, and kept while the executor lives:
  // programs must outlive it, as the communicator's do). Every rank must make the same calls.
  // InvalidArgument, with nothing done, for arguments every rank sees alike (a count below 0, a
  // program of another rank, size or placement, or whose chunks do not fit the window). Final
  // errors (Unavailable from then on): null buffers, a failed upload or launch, a kernel that
  // gave up, Abort().
  absl::Status Run(const RankProgram& program, const AllReduceArgs& args, void* stream);

  // Makes this rank's kernels give up, now and later, and every later call fail (ncclCommAbort).
  void Abort();
  // Makes this rank's kernels give up, now and later: Abort's word alone, safe on any thread (the
  // watchdog's) while another runs calls; those calls fail once they read the kernels' record.
  void StopWaits();

  // Calls so far whose kernel was launched.
  int64_t launches() const { return launches_; }

  // The kernel's own timeline of the next calls (kernels/exec/device/device_timeline.h), the last
  // `calls_kept` of them kept: for finding where a call's time goes, at a small cost per wait.
  absl::Status StartTimeline(int32_t calls_kept);
  // Waits for this process's work on the device, then writes the timeline's CSV to `path`.
  // FailedPrecondition without StartTimeline.
  absl::StatusOr<DeviceTimeline::Written> WriteTimeline(const std::string& path);

 private:
  absl::StatusOr<DeviceProgramView> Prepare(const RankProgram& program);
  // The record of a kernel that gave up, turned into the executor's lasting error.
  absl::Status CheckEarlierCalls();

  std::unique_ptr<PeerWindows> windows_;
  PeerMemory& memory_;
  DeviceLauncher& launcher_;
  const uint64_t timeout_ns_;
  // A failure after which this rank is out of step with its peers: `status` now, Unavailable
  // later.
  absl::Status Fail(absl::Status status);

  // Uploaded programs, by the program they were lowered from: in the windows' program arena, or
  // (once it is full) in memory of their own.
  absl::flat_hash_map<const RankProgram*, DeviceProgramView> programs_;
  int64_t arena_used_ = 0;
  std::vector<void*> overflow_;
  void* launch_order_ = nullptr;              // the launcher's
  std::unique_ptr<DeviceTimeline> timeline_;  // null unless StartTimeline
  uint32_t next_sequence_ = 1;
  int64_t launches_ = 0;
  absl::Status failed_;  // final: this rank is out of step
};

}  // namespace stragglar
