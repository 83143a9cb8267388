// The NCCL backend of the communicator protocol: the protocol's own traffic as small NCCL
// collectives enqueued on the calling stream (the epoch's gather runs behind the calls: the
// protocol defers the exchange), the GPU call timer's tickets, and each ncclAllReduce's work:
// NCCL's own AllReduce, or this rank's program over NCCL send/recv and our CUDA kernels
// (kernels/exec/nccl/nccl_executor.h), optionally with StragglAR's pre-arrival phase as NCCL
// collectives on a communicator of the ready ranks.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kernels/exec/device/device_executor.h"
#include "kernels/exec/nccl/nccl_executor.h"
#include "profiler/gpu_timer.h"
#include "runtime/comm_backend.h"
#include "runtime/link_probe.h"

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
        epoch_calls_(epoch_calls) {}
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

  // STRAGGLAR_PRE_ARRIVAL=nccl: the communicator of the ready ranks when `straggler` is late, each
  // at the index of the block it owns (`block`; -1 on the straggler, which gets nullptr), split
  // off at its first use (a collective call: every rank, the straggler too, is in the same call).
  absl::StatusOr<ncclComm_t> ReadyComm(int straggler, int block);
  // Frees the ready ranks' communicators: aborted when the user's communicator is (a peer may be
  // gone, and destroying would wait for it), destroyed otherwise.
  void ReleaseReadyComms(bool abort);

  // STRAGGLAR_EXECUTOR=device: sets up the device executor (kernels/exec/device/device_executor.h)
  // over peer windows exchanged through this communicator. Collective: every rank calls it in the
  // same call. Where it cannot run, plans keep running over NCCL send/recv, and rank 0 says why
  // once.
  // `stamps_prefix`: where its timeline goes (STRAGGLAR_DEVICE_STAMPS), "" for none.
  void StartDeviceExecutor(const PeerWindowsOptions& options, double timeout_s,
                           const std::string& stamps_prefix);
  // nullptr unless StartDeviceExecutor succeeded.
  DeviceExecutor* device_executor() const { return device_executor_.get(); }
  // Frees it; `abort` first makes its kernels stop waiting (a peer may be gone).
  void ReleaseDeviceExecutor(bool abort);

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
  absl::Status NcclFailed(absl::string_view call, ncclResult_t code);
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
  // By straggler; nullptr on the straggler. Under ready_mutex_: Revoke reads it from another
  // thread.
  std::mutex ready_mutex_;
  absl::flat_hash_map<int, ncclComm_t> ready_comms_;
  std::atomic<bool> revoked_{false};
  // The gather's buffers: device in/out and their pinned host copies, and the event that says
  // the host copy of the result has landed.
  double* device_exchange_ = nullptr;  // [2 * epoch_calls] this rank's, then [.. * size] all
  double* host_exchange_ = nullptr;    // the same layout, pinned
  cudaEvent_t gathered_event_ = nullptr;
  size_t gathered_values_ = 0;  // of the gather in flight, per rank
  cudaEvent_t probe_start_ = nullptr, probe_stop_ = nullptr;
  std::unique_ptr<DeviceExecutor> device_executor_;
  std::string stamps_file_;  // the device executor's timeline, "" for none
  // The device link probe's Ring program (this rank's, in place), kept while the executor lives:
  // the executor keys its upload by the program's address.
  std::unique_ptr<RankProgram> ring_program_;
};

// One ncclAllReduce's work, bracketed by the GPU call timer. Its failures carry NCCL's code where
// NCCL or CUDA gave one (kernels/exec/library_code.h); NcclCodeOf (nccl_codes.h) makes the
// caller's code.
class NcclAllReduceWork final : public CallWork {
 public:
  NcclAllReduceWork(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                    ncclRedOp_t op, DataType type, ReduceOp reduce_op, cudaStream_t stream,
                    NcclBackend& backend)
      : args_{.send = sendbuff,
              .recv = recvbuff,
              .count = static_cast<int64_t>(count),
              .type = type,
              .op = reduce_op},
        count_(count),
        datatype_(datatype),
        op_(op),
        stream_(stream),
        backend_(backend) {}

  CallOutcome Run(const CallDecision& decision, const RankProgram* program) override;
  // On the device executor, programs run in its windows: lowered in place whatever the buffers.
  bool RunsInPlace() const override { return backend_.device_executor() != nullptr; }

 private:
  absl::Status RunProgram(const CallDecision& decision, const RankProgram& program);
  absl::Status RunOnDevice(DeviceExecutor& executor, const RankProgram& program);

  const AllReduceArgs args_;
  // NCCL's own names of the count, type and op, for its own AllReduce.
  size_t count_;
  ncclDataType_t datatype_;
  ncclRedOp_t op_;
  cudaStream_t stream_;
  NcclBackend& backend_;
};

}  // namespace stragglar
