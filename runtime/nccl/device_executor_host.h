// The device executor's host side for one communicator of the NCCL preload
// (STRAGGLAR_EXECUTOR=device, kernels/exec/device/device_executor.h): its setup over peer windows,
// its timeline (STRAGGLAR_DEVICE_STAMPS), the link probe's Ring program on it, and its end.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/exec/device/device_executor.h"
#include "kernels/exec/device/peer_windows.h"
#include "kernels/program/program.h"

namespace stragglar {

class DeviceExecutorHost {
 public:
  // This process is `rank` of `size` on the communicator.
  DeviceExecutorHost(int rank, int size) : rank_(rank), size_(size) {}
  DeviceExecutorHost(const DeviceExecutorHost&) = delete;
  DeviceExecutorHost& operator=(const DeviceExecutorHost&) = delete;

  // Sets up the device executor over peer windows exchanged through `gather` (over the user's
  // communicator). Collective: every rank calls it in the same call. Where it cannot run, plans
  // keep running over NCCL send/recv, and rank 0 says why once. `stamps_prefix`: where its
  // timeline goes, "" for none.
  void Start(const PeerWindowsOptions& options, double timeout_s, const std::string& stamps_prefix,
             const GatherBytes& gather);
  // nullptr unless Start succeeded.
  DeviceExecutor* executor() const { return executor_.get(); }
  // Frees it, writing its timeline first unless `abort`, which makes its kernels stop waiting
  // first (a peer may be gone).
  void Release(bool abort);

  // The link probe's rounds on the executor: `repeats` calls of our Ring plan, in place, over
  // `count` floats of `buffer`, enqueued on `stream`. Returns the Ring rounds run (every rank of a
  // Ring takes part in each). Only once Start succeeded. PrepareRing first, before the probe's
  // clock starts: the plan is built on the host, and the GPU would wait for it inside the time.
  absl::Status PrepareRing();
  absl::StatusOr<int> RunRing(std::byte* buffer, int64_t count, int repeats, cudaStream_t stream);

 private:
  int rank_;
  int size_;
  std::unique_ptr<DeviceExecutor> executor_;
  std::string stamps_file_;  // the timeline, "" for none
  // The probe's Ring program (this rank's, in place), kept while the executor lives: the executor
  // keys its upload by the program's address.
  std::unique_ptr<RankProgram> ring_program_;
};

}  // namespace stragglar
