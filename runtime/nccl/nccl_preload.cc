// libstragglar.so: the runtime preloaded (LD_PRELOAD) into unmodified NCCL jobs. It defines
// ncclAllReduce and the communicator lifecycle, and reaches the real NCCL through its profiling
// names (pnccl*, found with dlsym(RTLD_NEXT)); its own traffic uses them too, so it never
// re-enters itself. Every function it does not define goes to NCCL directly, and errors from
// NCCL or CUDA are returned to the caller unchanged.
//
// Per communicator, at the first call it handles (a collective call, so every rank is in it): a
// measured link model and the learned state (both agreed on by all ranks), and the same
// RuntimeCore as the host and MPI runtimes. Then per call, everything enqueued on the user's
// stream without waiting for the GPU: Decide (identical on every rank); NCCL's own AllReduce (the
// default algorithm, priced as Ring) or a plan through NcclPlanExecutor (NCCL send/recv and our
// CUDA reduction kernels); the call bracketed by the GPU call timer (CUPTI, or CUDA events).
//
// The epoch exchange is deferred, since a call's timing exists only once the GPU has run it: the
// full epoch is sealed, half an epoch later every rank enqueues a small AllGather of its timings
// of the sealed epoch (copied to pinned host memory), and at the end of the next epoch every
// rank absorbs the result. All of this happens at the same call index on every rank, so every
// rank always takes the same decision; decisions lag the measurements by one epoch.
//
// Passed through untouched: STRAGGLAR_MODE=off, calls inside a user's ncclGroupStart/End, during
// CUDA graph capture, PreMulSum ops, fp8 types, calls under STRAGGLAR_MIN_BYTES, non-blocking
// communicators and communicators of one rank.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kernels/nccl_executor.h"
#include "kernels/nccl_types.h"
#include "profiler/gpu_timer.h"
#include "runtime/env_config.h"
#include "runtime/log.h"
#include "runtime/preload_common.h"
#include "runtime/runtime_core.h"
#include "runtime/state_file.h"

namespace stragglar {
namespace {

constexpr absl::string_view kBackend = "nccl";

// An NCCL that is loaded but not in the global scope: Python imports extension modules with
// RTLD_LOCAL, so PyTorch's libnccl.so.2 (a dependency of libtorch_cuda.so) is invisible to
// RTLD_NEXT, while PyTorch's calls still bind to our definitions, which come first.
void* PrivatelyLoadedNccl() {
  for (const char* soname : {"libnccl.so.2", "libnccl.so"}) {
    if (void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD); handle != nullptr) return handle;
  }
  return nullptr;
}

// The real NCCL function: its pnccl* name (NCCL exports both), or the nccl* one after ours;
// failing that, the one in an NCCL loaded outside the global scope.
template <typename Function>
Function* Real(const char* profiling_name, const char* name) {
  void* symbol = dlsym(RTLD_NEXT, profiling_name);
  if (symbol == nullptr) symbol = dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    // Looked up from the library itself, so the nccl* name is NCCL's and never ours.
    if (void* nccl = PrivatelyLoadedNccl(); nccl != nullptr) {
      symbol = dlsym(nccl, profiling_name);
      if (symbol == nullptr) symbol = dlsym(nccl, name);
    }
  }
  if (symbol == nullptr) {
    LogAlways(LogLevel::kWarn, absl::StrCat("libstragglar.so: ", name,
                                            " not found in the process; is NCCL loaded?"));
  }
  return reinterpret_cast<Function*>(symbol);
}

#define STRAGGLAR_REAL(name) Real<decltype(p##name)>("p" #name, #name)

// The NCCL functions stragglar's own work needs, resolved once.
struct NcclApi {
  decltype(&pncclAllReduce) all_reduce = STRAGGLAR_REAL(ncclAllReduce);
  decltype(&pncclAllGather) all_gather = STRAGGLAR_REAL(ncclAllGather);
  decltype(&pncclBroadcast) broadcast = STRAGGLAR_REAL(ncclBroadcast);
  decltype(&pncclCommCount) comm_count = STRAGGLAR_REAL(ncclCommCount);
  decltype(&pncclCommUserRank) comm_user_rank = STRAGGLAR_REAL(ncclCommUserRank);
  decltype(&pncclCommCuDevice) comm_cu_device = STRAGGLAR_REAL(ncclCommCuDevice);
  // For STRAGGLAR_PRE_ARRIVAL=nccl: the ready ranks' communicators and their collectives.
  decltype(&pncclCommSplit) comm_split = STRAGGLAR_REAL(ncclCommSplit);
  decltype(&pncclCommDestroy) comm_destroy = STRAGGLAR_REAL(ncclCommDestroy);
  decltype(&pncclCommAbort) comm_abort = STRAGGLAR_REAL(ncclCommAbort);
  NcclCollectives collectives{.reduce_scatter = STRAGGLAR_REAL(ncclReduceScatter),
                              .reduce = STRAGGLAR_REAL(ncclReduce)};
  NcclPointToPoint point_to_point{.send = STRAGGLAR_REAL(ncclSend),
                                  .recv = STRAGGLAR_REAL(ncclRecv),
                                  .group_start = STRAGGLAR_REAL(ncclGroupStart),
                                  .group_end = STRAGGLAR_REAL(ncclGroupEnd)};

  bool complete() const {
    return all_reduce && all_gather && broadcast && comm_count && comm_user_rank &&
           comm_cu_device && point_to_point.send && point_to_point.recv &&
           point_to_point.group_start && point_to_point.group_end;
  }
};

const NcclApi& Api() {
  static const NcclApi* api = new NcclApi;  // never destroyed: calls may come during exit
  return *api;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// fp8 and anything newer: nullopt.
std::optional<DataType> MapType(ncclDataType_t type) {
  for (DataType ours : kAllDataTypes) {
    if (NcclDataType(ours) == type) return ours;
  }
  return std::nullopt;
}

// PreMulSum handles (>= ncclNumOps): nullopt.
std::optional<ReduceOp> MapOp(ncclRedOp_t op) {
  for (ReduceOp ours : kAllReduceOps) {
    if (NcclRedOp(ours) == op) return ours;
  }
  return std::nullopt;
}

// The node-local rank, for the metrics port: from the launcher (torchrun, OpenMPI, Slurm).
int LocalRankFromEnv() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      return std::atoi(value);
    }
  }
  return 0;
}

// Sets the current CUDA device for a scope and restores the caller's.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) cudaSetDevice(device);
  }
  ~DeviceScope() {
    int current = -1;
    if (previous_ >= 0 && cudaGetDevice(&current) == cudaSuccess && current != previous_) {
      cudaSetDevice(previous_);
    }
  }

 private:
  int previous_ = -1;
};

// A failure of stragglar's own work on a communicator: what to return to the caller.
struct Failure {
  ncclResult_t code = ncclSuccess;
  std::string message;
};

Failure CudaFailure(absl::string_view call, cudaError_t code) {
  return {ncclUnhandledCudaError, absl::StrCat(call, ": ", cudaGetErrorString(code))};
}

// One call of the current or sealed epoch, until its timing has been read.
struct PendingCall {
  CallDecision decision;
  int64_t bytes = 0;
  std::optional<uint64_t> ticket;  // the GPU timer's; none: host clocks only
  double host_arrival_s = 0;
};

class CommState {
 public:
  CommState(ncclComm_t comm, int rank, int size, int device, RuntimeCore core, std::string name,
            bool nccl_pre_arrival)
      : comm_(comm),
        rank_(rank),
        size_(size),
        device_(device),
        core_(std::move(core)),
        name_(std::move(name)),
        nccl_pre_arrival_(nccl_pre_arrival) {}
  ~CommState();

  // Frees the ready ranks' communicators: aborted when the user's communicator is (a peer may be
  // gone, and destroying would wait for it), destroyed otherwise.
  void ReleaseReadyComms(bool abort);

  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int device() const { return device_; }
  RuntimeCore& core() { return core_; }
  CommObservers& observers() { return observers_; }
  const std::shared_ptr<TraceRecorder>& recorder() const { return observers_.recorder(); }

  ncclResult_t AllReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, DataType type, ReduceOp reduce_op,
                         cudaStream_t stream, const PreloadConfig& config, GpuCallTimer* timer);

 private:
  // The deferred epoch exchange's steps, run before the call's own work (see the file comment).
  Failure AdvanceEpoch(cudaStream_t stream, GpuCallTimer* timer);
  Failure GatherSealed(cudaStream_t stream, GpuCallTimer* timer);
  Failure EnsureExchangeBuffers();
  absl::StatusOr<const NcclPlanExecutor*> ExecutorFor(const CallDecision& decision, int64_t bytes);
  // STRAGGLAR_PRE_ARRIVAL=nccl: the ready ranks' communicator for the executor's straggler, split
  // off at its first use (a collective call: every rank, the straggler too, is in the same call).
  // nullopt: the plan's rounds run the pre-arrival phase.
  absl::StatusOr<std::optional<NativePreArrival>> PreArrivalFor(const Plan& plan,
                                                                const NcclPlanExecutor& executor);
  void SaveLearned(bool force);

  ncclComm_t comm_;
  int rank_;
  int size_;
  int device_;
  RuntimeCore core_;
  std::string name_;
  CommObservers observers_;
  DeviceScratch scratch_;
  absl::flat_hash_map<const Plan*, NcclPlanExecutor> executors_;
  bool nccl_pre_arrival_;
  absl::flat_hash_map<int, ncclComm_t> ready_comms_;  // by straggler; nullptr on the straggler
  std::vector<PendingCall> current_;                  // calls of the current epoch
  std::vector<PendingCall> sealed_;                   // calls of the sealed epoch, until gathered
  bool gathered_ = false;  // the sealed epoch's AllGather has been enqueued
  bool disabled_ = false;  // the exchange failed: NCCL's own from now on (on every rank)
  // The exchange's buffers: device in/out and their pinned host copies, and the event that says
  // the host copy of the AllGather's result has landed.
  double* device_exchange_ = nullptr;  // [2 * epoch_calls] this rank's, then [.. * size] all
  double* host_exchange_ = nullptr;    // the same layout, pinned
  cudaEvent_t gathered_event_ = nullptr;
  std::chrono::steady_clock::time_point last_save_{};
};

void CommState::ReleaseReadyComms(bool abort) {
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

CommState::~CommState() {
  DeviceScope scope(device_);
  ReleaseReadyComms(/*abort=*/false);
  if (gathered_event_ != nullptr) cudaEventDestroy(gathered_event_);
  if (device_exchange_ != nullptr) cudaFree(device_exchange_);
  if (host_exchange_ != nullptr) cudaFreeHost(host_exchange_);
}

absl::StatusOr<const NcclPlanExecutor*> CommState::ExecutorFor(const CallDecision& decision,
                                                               int64_t bytes) {
  absl::StatusOr<const Plan*> plan = core_.PlanFor(decision, bytes);
  if (!plan.ok()) return plan.status();
  auto it = executors_.find(*plan);
  if (it == executors_.end()) {
    absl::StatusOr<NcclPlanExecutor> executor = NcclPlanExecutor::Create(**plan, rank_);
    if (!executor.ok()) return executor.status();
    it = executors_.emplace(*plan, *std::move(executor)).first;
    if (rank_ == 0) Log(LogLevel::kInfo, absl::StrCat(name_, ": ", DescribePlan(**plan, bytes)));
  }
  return &it->second;
}

absl::StatusOr<std::optional<NativePreArrival>> CommState::PreArrivalFor(
    const Plan& plan, const NcclPlanExecutor& executor) {
  if (!nccl_pre_arrival_ || !executor.SupportsNativePreArrival()) return std::nullopt;
  const NcclApi& api = Api();
  if (api.comm_split == nullptr || api.collectives.reduce_scatter == nullptr ||
      api.collectives.reduce == nullptr) {
    return absl::InternalError("ncclCommSplit, ncclReduceScatter or ncclReduce not found");
  }
  const int straggler = *plan.straggler;
  auto it = ready_comms_.find(straggler);
  if (it == ready_comms_.end()) {
    // The key orders the ready ranks by the block each owns, which NCCL's layout then matches.
    const int block = executor.PreArrivalBlock();
    ncclComm_t ready_comm = nullptr;
    if (ncclResult_t code = api.comm_split(comm_, block >= 0 ? 0 : NCCL_SPLIT_NOCOLOR,
                                           std::max(block, 0), &ready_comm, nullptr);
        code != ncclSuccess) {
      return absl::InternalError(absl::StrCat("ncclCommSplit (ready ranks without straggler ",
                                              straggler, ") failed: ", code));
    }
    it = ready_comms_.emplace(straggler, ready_comm).first;
    if (rank_ == 0) {
      Log(LogLevel::kInfo,
          absl::StrCat(name_, ": StragglAR's pre-arrival phase as NCCL collectives on the ",
                       size_ - 1, " ranks other than ", straggler));
    }
  }
  return NativePreArrival{.nccl = api.collectives, .ready_comm = it->second};
}

Failure CommState::EnsureExchangeBuffers() {
  if (gathered_event_ != nullptr) return {};
  const size_t values = 2 * static_cast<size_t>(core_.config().epoch_calls) * (size_ + 1);
  if (cudaError_t code = cudaMalloc(&device_exchange_, values * sizeof(double));
      code != cudaSuccess) {
    device_exchange_ = nullptr;
    return CudaFailure("cudaMalloc (epoch exchange)", code);
  }
  if (cudaError_t code = cudaHostAlloc(&host_exchange_, values * sizeof(double), 0);
      code != cudaSuccess) {
    host_exchange_ = nullptr;
    return CudaFailure("cudaHostAlloc (epoch exchange)", code);
  }
  if (cudaError_t code = cudaEventCreateWithFlags(&gathered_event_, cudaEventDisableTiming);
      code != cudaSuccess) {
    gathered_event_ = nullptr;
    return CudaFailure("cudaEventCreate (epoch exchange)", code);
  }
  return {};
}

// Reads the sealed epoch's timings (its calls finished half an epoch ago, so this normally does
// not wait), hands them to the observers, and enqueues the AllGather of every rank's timings.
Failure CommState::GatherSealed(cudaStream_t stream, GpuCallTimer* timer) {
  if (Failure failure = EnsureExchangeBuffers(); failure.code != ncclSuccess) return failure;
  std::vector<CallTiming> timings;
  timings.reserve(sealed_.size());
  for (const PendingCall& call : sealed_) {
    CallTiming timing{.arrival_s = call.host_arrival_s, .duration_s = 0};
    if (call.ticket.has_value() && timer != nullptr) {
      absl::StatusOr<CallTiming> measured = timer->Wait(*call.ticket);
      timer->Release(*call.ticket);
      if (measured.ok()) {
        timing = *measured;
      } else {
        LogOnce(LogLevel::kWarn, "timer-read",
                absl::StrCat("reading a call's GPU timing failed (", measured.status().message(),
                             "); using the host's arrival time"));
      }
    }
    timings.push_back(timing);
    for (const auto& observer : observers_.all()) {
      observer->OnCall(rank_, call.decision, call.bytes, timing);
    }
  }
  std::vector<double> payload;
  for (const CallTiming& timing : timings) {
    payload.push_back(timing.arrival_s);
    payload.push_back(timing.duration_s);
  }
  const size_t values = payload.size();
  std::memcpy(host_exchange_, payload.data(), values * sizeof(double));
  double* device_all = device_exchange_ + values;
  double* host_all = host_exchange_ + values;
  if (cudaError_t code = cudaMemcpyAsync(device_exchange_, host_exchange_, values * sizeof(double),
                                         cudaMemcpyHostToDevice, stream);
      code != cudaSuccess) {
    return CudaFailure("cudaMemcpyAsync (epoch exchange)", code);
  }
  if (ncclResult_t code =
          Api().all_gather(device_exchange_, device_all, values, ncclFloat64, comm_, stream);
      code != ncclSuccess) {
    return {code, "ncclAllGather (epoch exchange) failed"};
  }
  if (cudaError_t code = cudaMemcpyAsync(host_all, device_all, values * size_ * sizeof(double),
                                         cudaMemcpyDeviceToHost, stream);
      code != cudaSuccess) {
    return CudaFailure("cudaMemcpyAsync (epoch exchange)", code);
  }
  if (cudaError_t code = cudaEventRecord(gathered_event_, stream); code != cudaSuccess) {
    return CudaFailure("cudaEventRecord (epoch exchange)", code);
  }
  gathered_ = true;
  return {};
}

Failure CommState::AdvanceEpoch(cudaStream_t stream, GpuCallTimer* timer) {
  const int epoch_calls = core_.config().epoch_calls;
  if (core_.ExchangeDue()) {
    if (core_.HasSealedEpoch()) {
      // Gathered half an epoch ago (every handled call passes here, so this is only a guard).
      if (!gathered_) {
        if (Failure failure = GatherSealed(stream, timer); failure.code != ncclSuccess) {
          return failure;
        }
      }
      // Enqueued half an epoch ago: normally long finished.
      if (cudaError_t code = cudaEventSynchronize(gathered_event_); code != cudaSuccess) {
        return CudaFailure("cudaEventSynchronize (epoch exchange)", code);
      }
      const size_t values = 2 * static_cast<size_t>(core_.sealed_calls());
      absl::Status status = core_.AbsorbEpoch(
          absl::MakeConstSpan(host_exchange_ + values, values * static_cast<size_t>(size_)));
      if (!status.ok()) return {ncclInternalError, std::string(status.message())};
      for (const auto& observer : observers_.all()) observer->OnEpoch(rank_, core_.last_epoch());
      if (LogEnabled(LogLevel::kTrace)) {
        const std::optional<int> straggler = core_.detector().straggler();
        Log(LogLevel::kTrace, absl::StrCat(name_, " epoch ", core_.epochs(), ": straggler ",
                                           straggler ? absl::StrCat(*straggler) : "none"));
      }
      SaveLearned(/*force=*/false);
    }
    if (absl::Status status = core_.SealEpoch(); !status.ok()) {
      return {ncclInternalError, std::string(status.message())};
    }
    sealed_ = std::move(current_);
    current_.clear();
    gathered_ = false;
  }
  // Half an epoch after sealing (at once for one-call epochs).
  const int64_t since_sealed = core_.calls() - (core_.sealed_first_call() + core_.sealed_calls());
  if (core_.HasSealedEpoch() && !gathered_ && since_sealed >= epoch_calls / 2) {
    return GatherSealed(stream, timer);
  }
  return {};
}

ncclResult_t CommState::AllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, DataType type,
                                  ReduceOp reduce_op, cudaStream_t stream,
                                  const PreloadConfig& config, GpuCallTimer* timer) {
  const NcclApi& api = Api();
  if (disabled_) return api.all_reduce(sendbuff, recvbuff, count, datatype, op, comm_, stream);
  DeviceScope scope(device_);
  if (Failure failure = AdvanceEpoch(stream, timer); failure.code != ncclSuccess) {
    // Every rank runs the same steps, so every rank fails here alike: stop adapting on this
    // communicator and tell the caller, as NCCL would.
    disabled_ = true;
    Log(LogLevel::kWarn, absl::StrCat("epoch exchange on ", name_, " failed: ", failure.message,
                                      "; NCCL's own AllReduce from now on"));
    return failure.code;
  }

  const double arrival = Now();
  const int64_t bytes = static_cast<int64_t>(count) * DataTypeSize(type);
  // The default algorithm is NCCL's own AllReduce unless our Ring is forced.
  const CallStart start = StartCall(core_, config, bytes, observers_, "NCCL's AllReduce");
  const CallDecision& decision = start.decision;
  const bool native = start.native;

  std::optional<uint64_t> ticket;
  if (timer != nullptr) {
    absl::StatusOr<uint64_t> begun = timer->Begin(stream);
    if (begun.ok()) {
      ticket = *begun;
    } else {
      LogOnce(LogLevel::kWarn, "timer-begin",
              absl::StrCat("GPU call timing unavailable (", begun.status().message(),
                           "); timing calls with host clocks"));
    }
  }
  ncclResult_t result = ncclSuccess;
  if (native) {
    result = api.all_reduce(sendbuff, recvbuff, count, datatype, op, comm_, stream);
  } else {
    std::string error;
    absl::StatusOr<const NcclPlanExecutor*> executor = ExecutorFor(decision, bytes);
    absl::StatusOr<std::optional<NativePreArrival>> pre_arrival =
        executor.ok() ? PreArrivalFor(**core_.PlanFor(decision, bytes), **executor)
                      : executor.status();
    if (pre_arrival.ok()) {
      const GpuAllReduceArgs args{.send = sendbuff,
                                  .recv = recvbuff,
                                  .count = static_cast<int64_t>(count),
                                  .type = type,
                                  .op = reduce_op};
      result = (*executor)->Run(args, api.point_to_point, CudaDeviceOps(), comm_, stream, scratch_,
                                &error, pre_arrival->has_value() ? &**pre_arrival : nullptr);
    } else {
      result = ncclInternalError;
      error = std::string(pre_arrival.status().message());
    }
    if (result != ncclSuccess) {
      Log(LogLevel::kWarn, absl::StrCat("ncclAllReduce on ", name_, " (",
                                        AlgorithmName(decision.algorithm), ") failed: ", error));
    }
  }
  if (ticket.has_value()) {
    if (absl::Status ended = timer->End(*ticket, stream); !ended.ok()) {
      timer->Release(*ticket);
      ticket.reset();
    }
  }
  // Recorded even after an error, so that every rank's epoch stays at the same call index; the
  // timing comes when the epoch is gathered.
  core_.Record(CallTiming{}, decision);
  current_.push_back(
      {.decision = decision, .bytes = bytes, .ticket = ticket, .host_arrival_s = arrival});
  return result;
}

void CommState::SaveLearned(bool force) {
  if (rank_ != 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_save_ < std::chrono::seconds(10)) return;
  last_save_ = now;
  SaveLearnedState(core_, kBackend);
}

// alpha and beta as a plan sees them: one ring round (every rank sends to the next and receives
// from the previous) of tiny and of large messages, on the communicator, timed with CUDA events;
// the slowest rank's numbers (an AllReduce of them), so that every rank holds the same model.
// Runs on `stream` after the user's work on it, once per communicator.
absl::StatusOr<LinkModel> MeasureNcclLink(ncclComm_t comm, int rank, int size, cudaStream_t stream,
                                          DeviceScratch& scratch) {
  constexpr size_t kLarge = 4 << 20;
  const NcclApi& api = Api();
  cudaError_t code = cudaSuccess;
  std::byte* buffers = scratch.Get(2 * kLarge + 256, &code);
  if (buffers == nullptr)
    return absl::InternalError(absl::StrCat("cudaMalloc: ", cudaGetErrorString(code)));
  cudaEvent_t start = nullptr, stop = nullptr;
  if ((code = cudaEventCreate(&start)) != cudaSuccess ||
      (code = cudaEventCreate(&stop)) != cudaSuccess) {
    if (start != nullptr) cudaEventDestroy(start);
    return absl::InternalError(absl::StrCat("cudaEventCreate: ", cudaGetErrorString(code)));
  }
  auto round = [&](size_t bytes, int repeats) -> absl::StatusOr<double> {
    if (cudaError_t e = cudaEventRecord(start, stream); e != cudaSuccess) {
      return absl::InternalError(cudaGetErrorString(e));
    }
    for (int i = 0; i < repeats; ++i) {
      api.point_to_point.group_start();
      ncclResult_t sent =
          api.point_to_point.send(buffers, bytes, ncclUint8, (rank + 1) % size, comm, stream);
      ncclResult_t received = api.point_to_point.recv(buffers + kLarge, bytes, ncclUint8,
                                                      (rank + size - 1) % size, comm, stream);
      ncclResult_t ended = api.point_to_point.group_end();
      if (sent != ncclSuccess || received != ncclSuccess || ended != ncclSuccess) {
        return absl::InternalError("ncclSend/ncclRecv failed");
      }
    }
    float elapsed_ms = 0;
    if (cudaError_t e = cudaEventRecord(stop, stream); e != cudaSuccess) {
      return absl::InternalError(cudaGetErrorString(e));
    }
    if (cudaError_t e = cudaEventSynchronize(stop); e != cudaSuccess) {
      return absl::InternalError(cudaGetErrorString(e));
    }
    cudaEventElapsedTime(&elapsed_ms, start, stop);
    return elapsed_ms * 1e-3 / repeats;
  };
  absl::StatusOr<double> warm = round(kLarge, 1);  // first touch of the connections
  absl::StatusOr<double> small = warm.ok() ? round(64, 16) : warm;
  absl::StatusOr<double> large = small.ok() ? round(kLarge, 4) : small;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!large.ok()) return large.status();
  double measured[2] = {*small, *large};
  double* device_measured = reinterpret_cast<double*>(buffers + 2 * kLarge);
  if (cudaMemcpyAsync(device_measured, measured, sizeof(measured), cudaMemcpyHostToDevice,
                      stream) != cudaSuccess ||
      api.all_reduce(device_measured, device_measured, 2, ncclFloat64, ncclMax, comm, stream) !=
          ncclSuccess ||
      cudaMemcpyAsync(measured, device_measured, sizeof(measured), cudaMemcpyDeviceToHost,
                      stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess) {
    return absl::InternalError("agreeing on the link model failed");
  }
  const double per_byte = std::max(measured[1] - measured[0], 1e-15) / kLarge;
  return LinkModel{.alpha_s = std::max(measured[0], 1e-7), .bandwidth_bytes_per_s = 1 / per_byte};
}

// `bytes` of host memory as rank 0 has them, on every rank (through device scratch).
absl::Status BroadcastFromRankZero(void* host, size_t bytes, ncclComm_t comm, cudaStream_t stream,
                                   DeviceScratch& scratch) {
  cudaError_t code = cudaSuccess;
  std::byte* device = scratch.Get(bytes, &code);
  if (device == nullptr) return absl::InternalError(cudaGetErrorString(code));
  if (cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream) != cudaSuccess ||
      Api().broadcast(device, device, bytes, ncclUint8, 0, comm, stream) != ncclSuccess ||
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess) {
    return absl::InternalError("broadcast from rank 0 failed");
  }
  return absl::OkStatus();
}

// STRAGGLAR_STATE_FILE as rank 0 reads it, broadcast so that every rank starts from the same
// state (and so decides the same). Empty when there is none; rank 0 logs why.
absl::StatusOr<std::string> BroadcastStateText(const std::string& path, ncclComm_t comm, int rank,
                                               cudaStream_t stream, DeviceScratch& scratch) {
  std::string text;
  if (rank == 0) {
    absl::StatusOr<std::string> read = ReadStateText(path);
    if (read.ok()) {
      text = *std::move(read);
    } else {
      Log(LogLevel::kInfo, absl::StrCat(read.status().message(), "; starting fresh"));
    }
  }
  int64_t length = static_cast<int64_t>(text.size());
  if (absl::Status status = BroadcastFromRankZero(&length, sizeof(length), comm, stream, scratch);
      !status.ok()) {
    return status;
  }
  if (length == 0) return std::string();
  text.resize(length);
  if (absl::Status status = BroadcastFromRankZero(text.data(), length, comm, stream, scratch);
      !status.ok()) {
    return status;
  }
  return text;
}

// STRAGGLAR_PRE_ARRIVAL as rank 0 has it: the ranks must agree, or the ready ranks would wait
// for each other in different calls. A rank whose own setting differs says so once.
absl::StatusOr<bool> AgreedNcclPreArrival(bool mine, ncclComm_t comm, cudaStream_t stream,
                                          DeviceScratch& scratch) {
  int32_t agreed = mine ? 1 : 0;
  if (absl::Status status = BroadcastFromRankZero(&agreed, sizeof(agreed), comm, stream, scratch);
      !status.ok()) {
    return status;
  }
  if ((agreed != 0) != mine) {
    LogOnce(LogLevel::kWarn, "pre-arrival-differs",
            absl::StrCat("STRAGGLAR_PRE_ARRIVAL is ", mine ? "nccl" : "rounds",
                         " here but rank 0's is ", agreed != 0 ? "nccl" : "rounds",
                         "; every rank uses rank 0's"));
  }
  return agreed != 0;
}

struct Global {
  std::mutex mutex;
  PreloadConfig config;
  std::once_flag configured;
  MetricsSetup metrics;
  std::once_flag timer_once;
  std::unique_ptr<GpuCallTimer> timer;
  std::map<ncclComm_t, std::unique_ptr<CommState>> comms;  // nullptr: pass this one through
  std::set<ncclComm_t> nonblocking;  // created with blocking = 0: passed through
  bool traced = false;               // the communicator that traces has been chosen
  int next_comm_index = 0;
};

// Never destroyed: NCCL calls may come from other threads while the process exits.
Global& G() {
  static Global* global = new Global;
  return *global;
}

void WriteOutputsAtExit();

const PreloadConfig& Config() {
  Global& g = G();
  std::call_once(g.configured, [&g] {
    g.config = PreloadConfigFromEnv();
    SetLogLevel(g.config.debug);
    Log(LogLevel::kInfo, absl::StrCat("libstragglar.so loaded: ", DescribeConfig(g.config)));
    if (g.config.mode != RuntimeMode::kOff) {
      g.metrics = StartMetricsFromEnv(LocalRankFromEnv());
      std::atexit(WriteOutputsAtExit);
    }
  });
  return g.config;
}

// The process's GPU call timer, created on first use (CUPTI unless STRAGGLAR_PROFILER=events,
// else CUDA events).
GpuCallTimer* Timer(Global& g) {
  std::call_once(g.timer_once, [&g] {
    std::string reason;
    g.timer = GpuCallTimer::Create(g.config.prefer_cupti, &reason);
    if (!reason.empty()) LogOnce(LogLevel::kInfo, "timer", reason);
    if (g.timer != nullptr) {
      Log(LogLevel::kInfo,
          absl::StrCat("timing calls with ", GpuTimerSourceName(g.timer->source())));
    }
  });
  return g.timer.get();
}

// The state of `comm`, created at its first handled call (every rank is in the same call).
// nullptr: pass this communicator through.
CommState* StateFor(Global& g, ncclComm_t comm, cudaStream_t stream) {
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    auto it = g.comms.find(comm);
    if (it != g.comms.end()) return it->second.get();
    if (g.nonblocking.contains(comm)) return nullptr;
  }
  // Communicators are named in the order of their first handled call, the same on every rank
  // when the ranks create and use them in the same order (as NCCL requires).
  std::string name;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    name = absl::StrCat("comm", g.next_comm_index++);
  }
  const NcclApi& api = Api();
  int size = 0, rank = 0, device = 0;
  std::unique_ptr<CommState> state;
  if (api.complete() && api.comm_count(comm, &size) == ncclSuccess &&
      api.comm_user_rank(comm, &rank) == ncclSuccess &&
      api.comm_cu_device(comm, &device) == ncclSuccess && size >= 2) {
    DeviceScope scope(device);
    auto scratch = std::make_unique<DeviceScratch>();
    absl::StatusOr<LinkModel> link = MeasureNcclLink(comm, rank, size, stream, *scratch);
    if (link.ok() && rank == 0) Log(LogLevel::kInfo, absl::StrCat(name, ": ", DescribeLink(*link)));
    RuntimeConfig config = ToRuntimeConfig(g.config);
    config.default_algorithm = Algorithm::kRing;  // priced as Ring; runs NCCL's own AllReduce
    config.candidates = {Algorithm::kRing, Algorithm::kStragglar};
    config.lag_source = LagSource::kDuration;  // clock-free: right across hosts too
    absl::StatusOr<RuntimeCore> core =
        link.ok() ? RuntimeCore::Create(config, rank, size, *link) : link.status();
    absl::StatusOr<bool> nccl_pre_arrival =
        core.ok() ? AgreedNcclPreArrival(g.config.nccl_pre_arrival, comm, stream, *scratch)
                  : core.status();
    if (nccl_pre_arrival.ok()) {
      state = std::make_unique<CommState>(comm, rank, size, device, *std::move(core), name,
                                          *nccl_pre_arrival);
      if (!config.state_file.empty()) {
        absl::StatusOr<std::string> text =
            BroadcastStateText(config.state_file, comm, rank, stream, *scratch);
        if (text.ok() && !text->empty()) {
          absl::StatusOr<LearnedState> learned =
              ParseState(*text, config.state_file, size, MachineId(kBackend));
          if (learned.ok() && state->core().ImportState(*learned).ok()) {
            if (rank == 0) Log(LogLevel::kInfo, "loaded the learned state " + config.state_file);
          } else if (rank == 0) {
            Log(LogLevel::kWarn, absl::StrCat(learned.status().message(), "; starting fresh"));
          }
        }
      }
    } else {
      Log(LogLevel::kWarn,
          absl::StrCat("passing communicator through: ", nccl_pre_arrival.status().message()));
    }
  }
  std::lock_guard<std::mutex> lock(g.mutex);
  if (state != nullptr) {
    if (g.metrics.registry != nullptr) {
      state->observers().Add(std::make_shared<PrometheusObserver>(
          *g.metrics.registry, state->name(), size, std::vector<int>{rank}));
    }
    // The trace and the end-of-run summary follow the first communicator (usually the world's).
    if (!g.traced) {
      g.traced = true;
      state->observers().SetRecorder(std::make_shared<TraceRecorder>(0));
    }
  }
  return g.comms.emplace(comm, std::move(state)).first->second.get();
}

void WriteOutputs(Global& g, CommState& state) {
  if (state.recorder() == nullptr || state.rank() != 0) return;
  WriteRunOutputs(*state.recorder(), g.config, state.name(), "stragglar (NCCL)");
}

void WriteOutputsAtExit() {
  Global& g = G();
  std::lock_guard<std::mutex> lock(g.mutex);
  for (auto& [comm, state] : g.comms) {
    if (state != nullptr) WriteOutputs(g, *state);
  }
}

// The communicator is going away (`aborting`: aborted or revoked): save, write its outputs, forget
// it. Its device memory and the communicators split off it are freed here, before NCCL frees it.
void Forget(ncclComm_t comm, bool aborting) {
  Global& g = G();
  std::unique_ptr<CommState> state;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    g.nonblocking.erase(comm);
    auto it = g.comms.find(comm);
    if (it == g.comms.end()) return;
    state = std::move(it->second);
    g.comms.erase(it);
  }
  if (state == nullptr) return;
  {
    DeviceScope scope(state->device());
    state->ReleaseReadyComms(aborting);
  }
  SaveLearnedState(state->core(), kBackend);
  WriteOutputs(g, *state);
}

// A communicator created non-blocking returns ncclInProgress from its calls; stragglar's
// multi-step work assumes blocking calls, so it passes such communicators through.
void NoteCreated(ncclResult_t result, const ncclComm_t* comm, const ncclConfig_t* config) {
  if (comm == nullptr || (result != ncclSuccess && result != ncclInProgress)) return;
  if (config != nullptr && config->blocking == 0) {
    Global& g = G();
    std::lock_guard<std::mutex> lock(g.mutex);
    g.nonblocking.insert(*comm);
  }
}

// ncclGroupStart/End nesting on this thread: calls inside a user's group are NCCL's business.
thread_local int group_depth = 0;

}  // namespace
}  // namespace stragglar

using stragglar::Config;
using stragglar::Real;

extern "C" {

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  static auto* real = STRAGGLAR_REAL(ncclCommInitRank);
  Config();
  return real == nullptr ? ncclInternalError : real(comm, nranks, id, rank);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  static auto* real = STRAGGLAR_REAL(ncclCommInitRankConfig);
  Config();
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real(comm, nranks, id, rank, config);
  stragglar::NoteCreated(result, comm, config);
  return result;
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int n_ids,
                                      ncclUniqueId* ids, ncclConfig_t* config) {
  static auto* real = STRAGGLAR_REAL(ncclCommInitRankScalable);
  Config();
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real(comm, nranks, rank, n_ids, ids, config);
  stragglar::NoteCreated(result, comm, config);
  return result;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  static auto* real = STRAGGLAR_REAL(ncclCommInitAll);
  Config();
  return real == nullptr ? ncclInternalError : real(comms, ndev, devlist);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  static auto* real = STRAGGLAR_REAL(ncclCommSplit);
  Config();
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real(comm, color, key, newcomm, config);
  stragglar::NoteCreated(result, newcomm, config);
  return result;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude_ranks, int exclude_count,
                            ncclComm_t* newcomm, ncclConfig_t* config, int flags) {
  static auto* real = STRAGGLAR_REAL(ncclCommShrink);
  Config();
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real(comm, exclude_ranks, exclude_count, newcomm, config, flags);
  stragglar::NoteCreated(result, newcomm, config);
  return result;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  static auto* real = STRAGGLAR_REAL(ncclCommFinalize);
  if (real == nullptr) return ncclInternalError;
  stragglar::Forget(comm, /*aborting=*/false);
  return real(comm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  static auto* real = STRAGGLAR_REAL(ncclCommDestroy);
  if (real == nullptr) return ncclInternalError;
  stragglar::Forget(comm, /*aborting=*/false);
  return real(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  static auto* real = STRAGGLAR_REAL(ncclCommAbort);
  if (real == nullptr) return ncclInternalError;
  stragglar::Forget(comm, /*aborting=*/true);
  return real(comm);
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revoke_flags) {
  static auto* real = STRAGGLAR_REAL(ncclCommRevoke);
  if (real == nullptr) return ncclInternalError;
  stragglar::Forget(comm, /*aborting=*/true);
  return real(comm, revoke_flags);
}

ncclResult_t ncclGroupStart() {
  static auto* real = STRAGGLAR_REAL(ncclGroupStart);
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real();
  if (result == ncclSuccess) ++stragglar::group_depth;
  return result;
}

ncclResult_t ncclGroupEnd() {
  static auto* real = STRAGGLAR_REAL(ncclGroupEnd);
  if (real == nullptr) return ncclInternalError;
  if (stragglar::group_depth > 0) --stragglar::group_depth;
  return real();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  static auto* real = STRAGGLAR_REAL(ncclAllReduce);
  if (real == nullptr) return ncclInternalError;
  const stragglar::PreloadConfig& config = Config();
  const std::optional<stragglar::DataType> type = stragglar::MapType(datatype);
  const std::optional<stragglar::ReduceOp> reduce_op = stragglar::MapOp(op);
  if (config.mode == stragglar::RuntimeMode::kOff || stragglar::group_depth > 0 || count == 0 ||
      comm == nullptr || !type.has_value() || !reduce_op.has_value() ||
      static_cast<int64_t>(count) * stragglar::DataTypeSize(*type) < config.min_bytes) {
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  // Under CUDA graph capture the host-side choice would be frozen into the graph: NCCL's own.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
      capture != cudaStreamCaptureStatusNone) {
    stragglar::LogOnce(stragglar::LogLevel::kInfo, "capture",
                       "ncclAllReduce under CUDA graph capture: passed through to NCCL");
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  stragglar::Global& g = stragglar::G();
  stragglar::CommState* state = stragglar::StateFor(g, comm, stream);
  if (state == nullptr) return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  return state->AllReduce(sendbuff, recvbuff, count, datatype, op, *type, *reduce_op, stream,
                          config, stragglar::Timer(g));
}

}  // extern "C"
