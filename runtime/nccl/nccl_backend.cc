#include "runtime/nccl/nccl_backend.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/units.h"
#include "kernels/cuda/cuda_peer_memory.h"
#include "kernels/cuda/device_scope.h"
#include "kernels/exec/device/device_kernel.h"
#include "kernels/exec/library_code.h"
#include "kernels/synth/synthesizers.h"
#include "runtime/nccl/nccl_api.h"
#include "runtime/nccl/nccl_codes.h"

namespace stragglar {
namespace {

// The calls a device executor's timeline keeps (STRAGGLAR_DEVICE_STAMPS): 2 MiB of host-mapped
// memory, more than a benchmark's timed calls.
constexpr int32_t kDeviceTimelineCalls = 1024;

// Equal on every process of one boot of one host: its name and boot id, hashed (std::hash is
// not seeded per process, and every rank runs this same library).
uint64_t HostIdentity() {
  std::string boot_id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, boot_id);
  return std::hash<std::string>()(absl::StrCat(HostName(), "/", boot_id));
}

}  // namespace

NcclBackend::~NcclBackend() {
  DeviceScope scope(device_);
  ReleaseDeviceExecutor(/*abort=*/false);
  ReleaseReadyComms(/*abort=*/false);
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

absl::Status NcclBackend::NcclFailed(absl::string_view call, ncclResult_t code) {
  return WithLibraryCode(absl::InternalError(absl::StrCat(call, " failed: ", code)), code);
}

void NcclBackend::ReleaseReadyComms(bool abort) {
  std::lock_guard<std::mutex> lock(ready_mutex_);
  for (const auto& [straggler, ready_comm] : ready_comms_) {
    if (ready_comm == nullptr) continue;
    if (abort && Api().comm_abort != nullptr) {
      Api().comm_abort(ready_comm);
    } else if (Api().comm_destroy != nullptr) {
      Api().comm_destroy(ready_comm);
    }
  }
  ready_comms_.clear();
}

absl::Status NcclBackend::Revoke() {
  revoked_.store(true, std::memory_order_release);
  if (device_executor_ != nullptr) device_executor_->StopWaits();
  // Resolved here, not with the rest of the API: an NCCL without it is told only when it matters.
  static auto* revoke = STRAGGLAR_REAL(ncclCommRevoke);
  if (revoke == nullptr) {
    return absl::UnimplementedError(
        "this NCCL cannot revoke a communicator (no ncclCommRevoke: 2.28.3 lacks it, 2.28.9 has "
        "it)");
  }
  std::vector<ncclComm_t> comms = {comm_};
  {
    std::lock_guard<std::mutex> lock(ready_mutex_);
    for (const auto& [straggler, ready_comm] : ready_comms_) {
      if (ready_comm != nullptr) comms.push_back(ready_comm);
    }
  }
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

absl::StatusOr<ncclComm_t> NcclBackend::ReadyComm(int straggler, int block) {
  {
    std::lock_guard<std::mutex> lock(ready_mutex_);
    if (auto it = ready_comms_.find(straggler); it != ready_comms_.end()) return it->second;
  }
  const NcclApi& api = Api();
  if (api.comm_split == nullptr || api.collectives.reduce_scatter == nullptr ||
      api.collectives.reduce == nullptr) {
    return absl::InternalError("ncclCommSplit, ncclReduceScatter or ncclReduce not found");
  }
  // The key orders the ready ranks by the block each owns, which NCCL's layout then matches.
  ncclComm_t ready_comm = nullptr;
  if (ncclResult_t code = api.comm_split(comm_, block >= 0 ? 0 : NCCL_SPLIT_NOCOLOR,
                                         std::max(block, 0), &ready_comm, nullptr);
      code != ncclSuccess) {
    return NcclFailed(absl::StrCat("ncclCommSplit (ready ranks without straggler ", straggler, ")"),
                      code);
  }
  {
    std::lock_guard<std::mutex> lock(ready_mutex_);
    ready_comms_.emplace(straggler, ready_comm);
  }
  if (rank_ == 0) {
    Log(LogLevel::kInfo, absl::StrCat("StragglAR's pre-arrival phase as NCCL collectives on the ",
                                      size_ - 1, " ranks other than ", straggler));
  }
  return ready_comm;
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
    return NcclFailed("ncclAllGather (epoch exchange)", code);
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
  static CudaPeerMemory memory;
  static CudaDeviceLauncher launcher;
  absl::StatusOr<std::unique_ptr<PeerWindows>> windows = PeerWindows::Create(
      rank_, size_, HostIdentity(), options, memory,
      [this](const void* mine, void* all, size_t bytes) { return GatherBytes(mine, all, bytes); });
  if (!windows.ok()) {
    // The same verdict on every rank: rank 0 says it, and so does the rank it names (with its own
    // detail, e.g. CUDA's error).
    if (rank_ == 0 || absl::StrContains(windows.status().message(),
                                        absl::StrCat("unavailable: rank ", rank_, " "))) {
      LogOnce(LogLevel::kWarn, "device-executor",
              absl::StrCat(windows.status().message(), "; plans run over NCCL send/recv"));
    }
    return;
  }
  device_executor_ = std::make_unique<DeviceExecutor>(*std::move(windows), memory, launcher,
                                                      static_cast<uint64_t>(timeout_s * 1e9));
  if (!stamps_prefix.empty()) {
    if (absl::Status status = device_executor_->StartTimeline(kDeviceTimelineCalls); status.ok()) {
      stamps_file_ = absl::StrCat(stamps_prefix, "-rank", rank_, ".csv");
    } else {
      LogOnce(LogLevel::kWarn, "device-stamps",
              absl::StrCat("STRAGGLAR_DEVICE_STAMPS: no timeline: ", status.message()));
    }
  }
  if (rank_ == 0) {
    Log(LogLevel::kInfo, absl::StrCat("device executor: ", size_, " ranks, ",
                                      FormatBytes(static_cast<double>(options.window_bytes)),
                                      " windows, ", options.ctas, " CTAs per call"));
  }
}

void NcclBackend::ReleaseDeviceExecutor(bool abort) {
  if (device_executor_ == nullptr) return;
  if (abort) device_executor_->Abort();
  if (!stamps_file_.empty() && !abort) {
    absl::StatusOr<DeviceTimeline::Written> written = device_executor_->WriteTimeline(stamps_file_);
    if (!written.ok()) {
      Log(LogLevel::kWarn, absl::StrCat("STRAGGLAR_DEVICE_STAMPS: ", written.status().message()));
    } else {
      Log(LogLevel::kInfo,
          absl::StrCat("device executor: the timeline of the last ", written->calls, " calls in ",
                       stamps_file_,
                       written->stamps_not_kept == 0
                           ? ""
                           : absl::StrCat(" (", written->stamps_not_kept,
                                          " stamps past a call's capacity not kept)")));
    }
  }
  device_executor_.reset();
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

// The device executor's rounds: `repeats` calls of our Ring plan over `bytes` per chunk, in
// place. A round's share of the call's copies in and out of the window is in the time, as it is
// in every plan's call on this executor.
absl::StatusOr<double> NcclBackend::DeviceRingRoundSeconds(int64_t bytes, int repeats) {
  if (ring_program_ == nullptr) {
    absl::StatusOr<Plan> ring = SynthesizeRing(size_);
    if (!ring.ok()) return ring.status();
    absl::StatusOr<RankProgram> program = LowerPlan(*ring, rank_, {.in_place = true});
    if (!program.ok()) return program.status();
    ring_program_ = std::make_unique<RankProgram>(*std::move(program));
  }
  const int64_t count = bytes / static_cast<int64_t>(sizeof(float)) * size_;
  cudaError_t code = cudaSuccess;
  std::byte* buffer = scratch_.Get(count * sizeof(float), &code);
  if (buffer == nullptr) return CudaFailed("cudaMalloc (link probe)", code);
  if (absl::Status status = EnsureProbeEvents(); !status.ok()) return status;
  if ((code = cudaEventRecord(probe_start_, stream_)) != cudaSuccess) {
    return CudaFailed("cudaEventRecord (link probe)", code);
  }
  for (int i = 0; i < repeats; ++i) {
    const absl::Status status = device_executor_->Run(
        *ring_program_, {.send = buffer, .recv = buffer, .count = count}, stream_);
    if (!status.ok()) return WithDeviceExecutorCode(status);
  }
  // The plan's rounds: every rank of a Ring takes part in each.
  const int ring_rounds = ring_program_->steps.empty() ? 0 : ring_program_->steps.back().round + 1;
  return ElapsedSinceProbeStart(repeats * ring_rounds);
}

// Timed with CUDA events on the stream, after the user's work on it, once per communicator: NCCL
// send/recv, or the device executor's rounds when it runs the plans. The device executor works
// over peer memory, inside one node, so it times only the ring through every rank; a probe of one
// link class (rings inside nodes, or along rails) goes through NCCL.
absl::StatusOr<double> NcclBackend::RingRoundSeconds(int64_t bytes, int repeats, RingPeers peers) {
  const RingPeers flat{.next = (rank_ + 1) % size_, .previous = (rank_ + size_ - 1) % size_};
  if (device_executor_ != nullptr && peers == flat) return DeviceRingRoundSeconds(bytes, repeats);
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
      if (result != ncclSuccess) return NcclFailed("ncclSend/ncclRecv (link probe)", result);
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

absl::Status NcclAllReduceWork::RunOnDevice(DeviceExecutor& executor, const RankProgram& program) {
  const absl::Status status = executor.Run(program, args_, stream_);
  return status.ok() ? status : WithDeviceExecutorCode(status);
}

absl::Status NcclAllReduceWork::RunProgram(const CallDecision& decision,
                                           const RankProgram& program) {
  std::optional<NativePreArrival> native;
  if (program.placement.native_pre_arrival) {
    absl::StatusOr<ncclComm_t> ready =
        backend_.ReadyComm(decision.straggler.value_or(-1), program.pre_arrival_block);
    if (!ready.ok()) return ready.status();
    native = NativePreArrival{.nccl = Api().collectives, .ready_comm = *ready};
  }
  absl::Status status = nccl::Run(program, args_,
                                  {.nccl = Api().point_to_point,
                                   .device = CudaDeviceOps(),
                                   .comm = backend_.comm(),
                                   .stream = stream_,
                                   .scratch = backend_.scratch()},
                                  native.has_value() ? &*native : nullptr);
  // The executor's own check of the call's arguments: the caller's mistake, as NCCL says it.
  if (status.code() == absl::StatusCode::kInvalidArgument && !LibraryCode(status).has_value()) {
    return WithLibraryCode(std::move(status), ncclInvalidArgument);
  }
  return status;
}

CallOutcome NcclAllReduceWork::Run(const CallDecision& decision, const RankProgram* program) {
  GpuCallTimer* timer = backend_.timer();
  std::optional<uint64_t> ticket;
  if (timer != nullptr) {
    absl::StatusOr<uint64_t> begun = timer->Begin(stream_);
    if (begun.ok()) {
      ticket = *begun;
    } else {
      LogOnce(LogLevel::kWarn, "timer-begin",
              absl::StrCat("GPU call timing unavailable (", begun.status().message(),
                           "); timing calls with host clocks"));
    }
  }
  absl::Status status;
  if (program == nullptr) {
    if (const ncclResult_t code = Api().all_reduce(args_.send, args_.recv, count_, datatype_, op_,
                                                   backend_.comm(), stream_);
        code != ncclSuccess) {
      status =
          WithLibraryCode(absl::InternalError(absl::StrCat("ncclAllReduce failed: ", code)), code);
    }
  } else if (DeviceExecutor* executor = backend_.device_executor(); executor != nullptr) {
    status = RunOnDevice(*executor, *program);
  } else {
    status = RunProgram(decision, *program);
  }
  if (ticket.has_value()) {
    if (absl::Status ended = timer->End(*ticket, stream_); !ended.ok()) {
      timer->Release(*ticket);
      ticket.reset();
    }
  }
  // The call is only enqueued: its timing is the GPU's, or just its arrival.
  return {.status = std::move(status), .ticket = ticket, .host_duration = false};
}

}  // namespace stragglar
