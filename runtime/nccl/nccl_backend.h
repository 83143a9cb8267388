// The NCCL backend of the communicator protocol: the protocol's own traffic as small NCCL
// collectives enqueued on the calling stream (the epoch's gather runs behind the calls: the
// protocol defers the exchange), the link probe's rounds, and the GPU call timer's tickets. It
// holds the communicator's two other parts, which each call's work uses
// (runtime/nccl/nccl_allreduce_work.h): the ready ranks' communicators
// (runtime/nccl/nccl_ready_comms.h) and the device executor's host side
// (runtime/nccl/device_executor_host.h), and revokes all of them at once.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "kernels/exec/device/device_executor.h"
#include "kernels/exec/nccl/nccl_executor.h"
#include "profiler/gpu_timer.h"
#include "runtime/comm_backend.h"
#include "runtime/link_probe.h"
#include "runtime/nccl/device_executor_host.h"
#include "runtime/nccl/nccl_ready_comms.h"

namespace stragglar {

class NcclBackend final : public CommBackend {
 public:
  // `timer` (the process's; null: host clocks only) must outlive the backend. The epoch's gather
  // holds up to `epoch_calls` calls.
  NcclBackend(ncclComm_t comm, int rank, int size, int device, GpuCallTimer* timer, int epoch_calls)
      : comm_(comm),
        rank_(rank),
        size_(size),
        device_(device),
        timer_(timer),
        epoch_calls_(epoch_calls),
        ready_comms_(comm, rank, size),
        device_side_(rank, size) {}
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  // STRAGGLAR_EPOCH_CALLS as the ranks agreed on it after the backend was made (it carried the
  // agreement); before the first epoch exchange.
  void set_epoch_calls(int epoch_calls) { epoch_calls_ = epoch_calls; }

  // The stream of the call in progress: the protocol's traffic is enqueued behind the user's
  // work on it. Set before every call into the protocol.
  void set_stream(cudaStream_t stream) { stream_ = stream; }
  int device() const { return device_; }
  ncclComm_t comm() const { return comm_; }
  DeviceScratch& scratch() { return scratch_; }
  GpuCallTimer* timer() const { return timer_; }

  // STRAGGLAR_PRE_ARRIVAL=nccl: the ready ranks' communicators.
  NcclReadyComms& ready_comms() { return ready_comms_; }

  // STRAGGLAR_EXECUTOR=device: sets up the device executor over peer windows exchanged through
  // this communicator (DeviceExecutorHost::Start). Collective: every rank calls it in the same
  // call.
  void StartDeviceExecutor(const PeerWindowsOptions& options, double timeout_s,
                           const std::string& stamps_prefix);
  // nullptr unless StartDeviceExecutor succeeded.
  DeviceExecutor* device_executor() const { return device_side_.executor(); }
  // Frees it; `abort` first makes its kernels stop waiting (a peer may be gone).
  void ReleaseDeviceExecutor(bool abort) { device_side_.Release(abort); }

  // STRAGGLAR_TIMEOUT, from the watchdog's thread while the calling thread may be waiting on the
  // GPU: revokes the user's communicator and the ready ranks' (ncclCommRevoke: their work stops,
  // the user still destroys the communicator) and makes the device executor's kernels give up,
  // so that every wait on this communicator's work ends; the waits of the epoch exchange and of
  // the timer then fail instead of reading what the stopped work left. Safe on any thread, once
  // or more. An error when NCCL cannot revoke (no ncclCommRevoke, e.g. 2.28.3): its work is left
  // waiting.
  absl::Status Revoke();
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }

  double Now() override { return MonotonicSeconds(); }
  absl::Status StartGather(absl::Span<const double> mine) override;
  absl::StatusOr<std::vector<double>> FinishGather() override;
  bool DefersExchange() const override { return true; }
  absl::Status BroadcastFromRankZero(std::string& text) override;
  absl::StatusOr<std::optional<CallTiming>> PollTiming(uint64_t ticket) override;
  absl::StatusOr<CallTiming> WaitTiming(uint64_t ticket) override;
  void ReleaseTiming(uint64_t ticket) override;
  absl::StatusOr<double> RingRoundSeconds(int64_t bytes, int repeats, RingPeers peers) override;
  absl::Status MaxOverRanks(absl::Span<double> values) override;

 private:
  // Aborted once Revoke was called: what a wait that has just returned read is not to be used.
  absl::Status NotRevoked();
  absl::Status CudaFailed(absl::string_view call, cudaError_t code);
  // Values per rank a gather holds: an epoch's 2 per call, or the slow-link probe's (an epoch may
  // be 1 call). Fixed at the first gather, which comes after the agreement set the epoch.
  size_t GatherCapacity() const {
    return std::max(2 * static_cast<size_t>(epoch_calls_),
                    static_cast<size_t>(kSlowLinkGatherValues));
  }
  absl::Status EnsureExchangeBuffers();
  // `bytes` of host memory as rank 0 has them, on every rank (through device scratch).
  absl::Status BroadcastBytes(void* host, size_t bytes);
  // Every rank's `bytes` of host memory, in rank order, on every rank (through device scratch).
  absl::Status GatherBytes(const void* mine, void* all, size_t bytes);
  // The link probe's pieces.
  absl::Status EnsureProbeEvents();
  absl::StatusOr<double> ElapsedSinceProbeStart(int rounds);  // per round, synchronised
  absl::StatusOr<double> DeviceRingRoundSeconds(int64_t bytes, int repeats);

  ncclComm_t comm_;
  int rank_;
  int size_;
  int device_;
  GpuCallTimer* timer_;
  int epoch_calls_;
  cudaStream_t stream_ = nullptr;
  DeviceScratch scratch_;
  NcclReadyComms ready_comms_;
  DeviceExecutorHost device_side_;
  std::atomic<bool> revoked_{false};
  // The gather's buffers: device in/out and their pinned host copies, and the event that says
  // the host copy of the result has landed.
  double* device_exchange_ = nullptr;  // [2 * epoch_calls] this rank's, then [.. * size] all
  double* host_exchange_ = nullptr;    // the same layout, pinned
  cudaEvent_t gathered_event_ = nullptr;
  size_t gathered_values_ = 0;  // of the gather in flight, per rank
  cudaEvent_t probe_start_ = nullptr, probe_stop_ = nullptr;
};

}  // namespace stragglar
