#include "runtime/nccl/nccl_backend.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_scope.h"
#include "kernels/exec/library_code.h"
#include "runtime/nccl/nccl_api.h"
#include "runtime/nccl/nccl_codes.h"

namespace stragglar {

NcclBackend::~NcclBackend() {
  DeviceScope scope(device_);
  device_side_.Release(/*abort=*/false);
  ready_comms_.Release(/*abort=*/false);
  for (cudaEvent_t event : {gathered_event_, probe_start_, probe_stop_}) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  if (device_exchange_ != nullptr) cudaFree(device_exchange_);
  if (host_exchange_ != nullptr) cudaFreeHost(host_exchange_);
}

absl::Status NcclBackend::CudaFailed(absl::string_view call, cudaError_t code) {
  return WithLibraryCode(absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorString(code))),
                         ncclUnhandledCudaError);
}

absl::Status NcclBackend::Revoke() {
  revoked_.store(true, std::memory_order_release);
  if (DeviceExecutor* executor = device_side_.executor(); executor != nullptr) {
    executor->StopWaits();
  }
  // Resolved here, not with the rest of the API: an NCCL without it is told only when it matters.
  static auto* revoke = STRAGGLAR_REAL(ncclCommRevoke);
  if (revoke == nullptr) {
    return absl::UnimplementedError(
        "this NCCL cannot revoke a communicator (no ncclCommRevoke: 2.28.3 lacks it, 2.28.9 has "
        "it)");
  }
  std::vector<ncclComm_t> comms = ready_comms_.Live();
  comms.insert(comms.begin(), comm_);
  absl::Status first_failure;
  for (ncclComm_t comm : comms) {
    // ncclInProgress: revoked, its work still stopping.
    const ncclResult_t result = revoke(comm, NCCL_REVOKE_DEFAULT);
    if (result != ncclSuccess && result != ncclInProgress && first_failure.ok()) {
      first_failure = absl::InternalError(absl::StrCat("ncclCommRevoke failed: ", result));
    }
  }
  return first_failure;
}

absl::Status NcclBackend::EnsureExchangeBuffers() {
  if (gathered_event_ != nullptr) return absl::OkStatus();
  const size_t values = GatherCapacity() * (size_ + 1);
  if (cudaError_t code = cudaMalloc(&device_exchange_, values * sizeof(double));
      code != cudaSuccess) {
    device_exchange_ = nullptr;
    return CudaFailed("cudaMalloc (epoch exchange)", code);
  }
  if (cudaError_t code = cudaHostAlloc(&host_exchange_, values * sizeof(double), 0);
      code != cudaSuccess) {
    host_exchange_ = nullptr;
    return CudaFailed("cudaHostAlloc (epoch exchange)", code);
  }
  if (cudaError_t code = cudaEventCreateWithFlags(&gathered_event_, cudaEventDisableTiming);
      code != cudaSuccess) {
    gathered_event_ = nullptr;
    return CudaFailed("cudaEventCreate (epoch exchange)", code);
  }
  return absl::OkStatus();
}

// Enqueued behind the calls on the stream: this rank's timings to the device, NCCL's AllGather,
// every rank's back to pinned host memory, and an event that says they have landed.
absl::Status NcclBackend::StartGather(absl::Span<const double> mine) {
  if (absl::Status status = EnsureExchangeBuffers(); !status.ok()) return status;
  const size_t values = mine.size();
  if (values > GatherCapacity()) {
    return absl::InternalError(absl::StrCat("epoch exchange: ", values, " values, more than the ",
                                            GatherCapacity(), " it holds"));
  }
  std::memcpy(host_exchange_, mine.data(), values * sizeof(double));
  double* device_all = device_exchange_ + values;
  double* host_all = host_exchange_ + values;
  if (cudaError_t code = cudaMemcpyAsync(device_exchange_, host_exchange_, values * sizeof(double),
                                         cudaMemcpyHostToDevice, stream_);
      code != cudaSuccess) {
    return CudaFailed("cudaMemcpyAsync (epoch exchange)", code);
  }
  if (ncclResult_t code =
          Api().all_gather(device_exchange_, device_all, values, ncclFloat64, comm_, stream_);
      code != ncclSuccess) {
    return NcclCallFailed("ncclAllGather (epoch exchange)", code);
  }
  if (cudaError_t code = cudaMemcpyAsync(host_all, device_all, values * size_ * sizeof(double),
                                         cudaMemcpyDeviceToHost, stream_);
      code != cudaSuccess) {
    return CudaFailed("cudaMemcpyAsync (epoch exchange)", code);
  }
  if (cudaError_t code = cudaEventRecord(gathered_event_, stream_); code != cudaSuccess) {
    return CudaFailed("cudaEventRecord (epoch exchange)", code);
  }
  gathered_values_ = values;
  return absl::OkStatus();
}

// Enqueued half an epoch ago: normally long finished.
absl::StatusOr<std::vector<double>> NcclBackend::FinishGather() {
  if (gathered_event_ == nullptr) return absl::FailedPreconditionError("no gather was started");
  if (cudaError_t code = cudaEventSynchronize(gathered_event_); code != cudaSuccess) {
    return CudaFailed("cudaEventSynchronize (epoch exchange)", code);
  }
  if (absl::Status status = NotRevoked(); !status.ok()) return status;
  const double* all = host_exchange_ + gathered_values_;
  return std::vector<double>(all, all + gathered_values_ * size_);
}

absl::Status NcclBackend::BroadcastBytes(void* host, size_t bytes) {
  cudaError_t code = cudaSuccess;
  std::byte* device = scratch_.Get(bytes, &code);
  if (device == nullptr) return CudaFailed("cudaMalloc (broadcast)", code);
  if (cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_) != cudaSuccess ||
      Api().broadcast(device, device, bytes, ncclUint8, 0, comm_, stream_) != ncclSuccess ||
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_) != cudaSuccess ||
      cudaStreamSynchronize(stream_) != cudaSuccess) {
    return absl::InternalError("broadcast from rank 0 failed");
  }
  return absl::OkStatus();
}

absl::Status NcclBackend::GatherBytes(const void* mine, void* all, size_t bytes) {
  cudaError_t code = cudaSuccess;
  std::byte* device = scratch_.Get(bytes * (size_ + 1), &code);
  if (device == nullptr) return CudaFailed("cudaMalloc (gather)", code);
  std::byte* gathered = device + bytes;
  if (cudaMemcpyAsync(device, mine, bytes, cudaMemcpyHostToDevice, stream_) != cudaSuccess ||
      Api().all_gather(device, gathered, bytes, ncclUint8, comm_, stream_) != ncclSuccess ||
      cudaMemcpyAsync(all, gathered, bytes * size_, cudaMemcpyDeviceToHost, stream_) !=
          cudaSuccess ||
      cudaStreamSynchronize(stream_) != cudaSuccess) {
    return absl::InternalError("gather failed");
  }
  return absl::OkStatus();
}

void NcclBackend::StartDeviceExecutor(const PeerWindowsOptions& options, double timeout_s,
                                      const std::string& stamps_prefix) {
  device_side_.Start(
      options, timeout_s, stamps_prefix,
      [this](const void* mine, void* all, size_t bytes) { return GatherBytes(mine, all, bytes); });
}

absl::Status NcclBackend::BroadcastFromRankZero(std::string& text) {
  int64_t length = static_cast<int64_t>(text.size());
  if (absl::Status status = BroadcastBytes(&length, sizeof(length)); !status.ok()) return status;
  text.resize(length);
  if (length == 0) return absl::OkStatus();
  return BroadcastBytes(text.data(), length);
}

absl::Status NcclBackend::NotRevoked() {
  if (!revoked()) return absl::OkStatus();
  return absl::AbortedError("the communicator was revoked (STRAGGLAR_TIMEOUT)");
}

absl::StatusOr<std::optional<CallTiming>> NcclBackend::PollTiming(uint64_t ticket) {
  if (timer_ == nullptr) return absl::FailedPreconditionError("no GPU call timer");
  absl::StatusOr<std::optional<CallTiming>> timing = timer_->Poll(ticket);
  if (absl::Status status = NotRevoked(); !status.ok()) return status;
  return timing;
}

absl::StatusOr<CallTiming> NcclBackend::WaitTiming(uint64_t ticket) {
  if (timer_ == nullptr) return absl::FailedPreconditionError("no GPU call timer");
  absl::StatusOr<CallTiming> timing = timer_->Wait(ticket);
  if (absl::Status status = NotRevoked(); !status.ok()) return status;
  return timing;
}

void NcclBackend::ReleaseTiming(uint64_t ticket) {
  if (timer_ != nullptr) timer_->Release(ticket);
}

absl::Status NcclBackend::EnsureProbeEvents() {
  for (cudaEvent_t* event : {&probe_start_, &probe_stop_}) {
    if (cudaError_t code = cudaSuccess;
        *event == nullptr && (code = cudaEventCreate(event)) != cudaSuccess) {
      *event = nullptr;
      return CudaFailed("cudaEventCreate (link probe)", code);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> NcclBackend::ElapsedSinceProbeStart(int rounds) {
  cudaError_t code = cudaSuccess;
  if ((code = cudaEventRecord(probe_stop_, stream_)) != cudaSuccess ||
      (code = cudaEventSynchronize(probe_stop_)) != cudaSuccess) {
    return CudaFailed("cudaEventSynchronize (link probe)", code);
  }
  float elapsed_ms = 0;
  cudaEventElapsedTime(&elapsed_ms, probe_start_, probe_stop_);
  return elapsed_ms * 1e-3 / rounds;
}

// The device executor's rounds (DeviceExecutorHost::RunRing) over `bytes` per chunk.
absl::StatusOr<double> NcclBackend::DeviceRingRoundSeconds(int64_t bytes, int repeats) {
  if (absl::Status prepared = device_side_.PrepareRing(); !prepared.ok()) return prepared;
  const int64_t count = bytes / static_cast<int64_t>(sizeof(float)) * size_;
  cudaError_t code = cudaSuccess;
  std::byte* buffer = scratch_.Get(count * sizeof(float), &code);
  if (buffer == nullptr) return CudaFailed("cudaMalloc (link probe)", code);
  if (absl::Status status = EnsureProbeEvents(); !status.ok()) return status;
  if ((code = cudaEventRecord(probe_start_, stream_)) != cudaSuccess) {
    return CudaFailed("cudaEventRecord (link probe)", code);
  }
  absl::StatusOr<int> rounds = device_side_.RunRing(buffer, count, repeats, stream_);
  if (!rounds.ok()) return rounds.status();
  return ElapsedSinceProbeStart(*rounds);
}

// Timed with CUDA events on the stream, after the user's work on it, once per communicator: NCCL
// send/recv, or the device executor's rounds when it runs the plans. The device executor works
// over peer memory, inside one node, so it times only the ring through every rank; a probe of one
// link class (rings inside nodes, or along rails) goes through NCCL.
absl::StatusOr<double> NcclBackend::RingRoundSeconds(int64_t bytes, int repeats, RingPeers peers) {
  const RingPeers flat{.next = (rank_ + 1) % size_, .previous = (rank_ + size_ - 1) % size_};
  if (device_executor() != nullptr && peers == flat) return DeviceRingRoundSeconds(bytes, repeats);
  const NcclApi& api = Api();
  cudaError_t code = cudaSuccess;
  std::byte* buffers = scratch_.Get(2 * bytes, &code);
  if (buffers == nullptr) return CudaFailed("cudaMalloc (link probe)", code);
  if (absl::Status status = EnsureProbeEvents(); !status.ok()) return status;
  if ((code = cudaEventRecord(probe_start_, stream_)) != cudaSuccess) {
    return CudaFailed("cudaEventRecord (link probe)", code);
  }
  for (int i = 0; i < repeats; ++i) {
    api.point_to_point.group_start();
    const ncclResult_t sent =
        api.point_to_point.send(buffers, bytes, ncclUint8, peers.next, comm_, stream_);
    const ncclResult_t received =
        api.point_to_point.recv(buffers + bytes, bytes, ncclUint8, peers.previous, comm_, stream_);
    const ncclResult_t ended = api.point_to_point.group_end();
    for (ncclResult_t result : {sent, received, ended}) {
      if (result != ncclSuccess) return NcclCallFailed("ncclSend/ncclRecv (link probe)", result);
    }
  }
  return ElapsedSinceProbeStart(repeats);
}

absl::Status NcclBackend::MaxOverRanks(absl::Span<double> values) {
  const size_t bytes = values.size() * sizeof(double);
  cudaError_t code = cudaSuccess;
  std::byte* device = scratch_.Get(bytes, &code);
  if (device == nullptr) return CudaFailed("cudaMalloc (link probe)", code);
  if (cudaMemcpyAsync(device, values.data(), bytes, cudaMemcpyHostToDevice, stream_) !=
          cudaSuccess ||
      Api().all_reduce(device, device, values.size(), ncclFloat64, ncclMax, comm_, stream_) !=
          ncclSuccess ||
      cudaMemcpyAsync(values.data(), device, bytes, cudaMemcpyDeviceToHost, stream_) !=
          cudaSuccess ||
      cudaStreamSynchronize(stream_) != cudaSuccess) {
    return absl::InternalError("agreeing on the link model failed");
  }
  return absl::OkStatus();
}

}  // namespace stragglar
