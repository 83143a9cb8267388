#include "runtime/nccl/nccl_links.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "kernels/device_scope.h"
#include "runtime/log.h"
#include "runtime/nccl/nccl_api.h"

namespace stragglar {

// The link reports' all-gather: on the report communicator, on a stream of its own, through
// pinned host buffers, polled so that Cancel() can end a wait for a peer that will not come.
class NcclLinks::Transport final : public ReportTransport {
 public:
  static absl::StatusOr<std::unique_ptr<Transport>> Create(ncclComm_t user_comm, int rank, int size,
                                                           int device, size_t doubles) {
    auto transport = std::unique_ptr<Transport>(new Transport(size, device, doubles));
    DeviceScope scope(device);
    const NcclApi& api = Api();
    if (ncclResult_t code = api.comm_split(user_comm, 0, rank, &transport->comm_, nullptr);
        code != ncclSuccess) {
      transport->comm_ = nullptr;
      return absl::InternalError(absl::StrCat("ncclCommSplit (link reports) failed: ", code));
    }
    const size_t bytes = doubles * sizeof(double);
    if (cudaError_t code = transport->Allocate(bytes); code != cudaSuccess) {
      return absl::InternalError(absl::StrCat("link report buffers: ", cudaGetErrorString(code)));
    }
    return transport;
  }

  ~Transport() override {
    DeviceScope scope(device_);
    if (comm_ != nullptr) {
      // A gather left in flight waits for peers that may never come: only abort ends it.
      (in_flight_ || aborting_) ? Api().comm_abort(comm_) : Api().comm_destroy(comm_);
    }
    if (done_ != nullptr) cudaEventDestroy(done_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    for (double* buffer : {device_mine_, device_all_}) {
      if (buffer != nullptr) cudaFree(buffer);
    }
    for (double* buffer : {host_mine_, host_all_}) {
      if (buffer != nullptr) cudaFreeHost(buffer);
    }
  }

  absl::StatusOr<std::vector<double>> AllGather(absl::Span<const double> mine) override {
    if (cancelled_) return absl::CancelledError("link profiling stopped");
    if (!thread_set_up_) {
      // A user's CUDA graph capture in global mode must not see this thread's calls as unsafe.
      cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
      cudaThreadExchangeStreamCaptureMode(&relaxed);
      thread_set_up_ = true;
    }
    DeviceScope scope(device_);
    const size_t bytes = doubles_ * sizeof(double);
    if (mine.size() != doubles_) return absl::InternalError("link report of the wrong size");
    std::copy(mine.begin(), mine.end(), host_mine_);
    cudaError_t cuda =
        cudaMemcpyAsync(device_mine_, host_mine_, bytes, cudaMemcpyHostToDevice, stream_);
    if (cuda != cudaSuccess) return Cuda("cudaMemcpyAsync", cuda);
    if (ncclResult_t code =
            Api().all_gather(device_mine_, device_all_, doubles_, ncclFloat64, comm_, stream_);
        code != ncclSuccess) {
      return absl::InternalError(absl::StrCat("ncclAllGather (link reports) failed: ", code));
    }
    in_flight_ = true;
    cuda = cudaMemcpyAsync(host_all_, device_all_, bytes * size_, cudaMemcpyDeviceToHost, stream_);
    if (cuda == cudaSuccess) cuda = cudaEventRecord(done_, stream_);
    if (cuda != cudaSuccess) return Cuda("cudaMemcpyAsync", cuda);
    while ((cuda = cudaEventQuery(done_)) == cudaErrorNotReady) {
      if (cancelled_) return absl::CancelledError("link profiling stopped");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (cuda != cudaSuccess) return Cuda("cudaEventQuery", cuda);
    in_flight_ = false;
    return std::vector<double>(host_all_, host_all_ + doubles_ * size_);
  }

  void Cancel() override { cancelled_ = true; }
  void set_aborting() { aborting_ = true; }

 private:
  Transport(int size, int device, size_t doubles)
      : size_(size), device_(device), doubles_(doubles) {}

  cudaError_t Allocate(size_t bytes) {
    cudaError_t code = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (code == cudaSuccess) code = cudaEventCreateWithFlags(&done_, cudaEventDisableTiming);
    if (code == cudaSuccess) code = cudaMalloc(&device_mine_, bytes);
    if (code == cudaSuccess) code = cudaMalloc(&device_all_, bytes * size_);
    if (code == cudaSuccess) code = cudaMallocHost(&host_mine_, bytes);
    if (code == cudaSuccess) code = cudaMallocHost(&host_all_, bytes * size_);
    return code;
  }
  absl::Status Cuda(absl::string_view call, cudaError_t code) {
    return absl::InternalError(absl::StrCat(call, " (link reports): ", cudaGetErrorString(code)));
  }

  int size_;
  int device_;
  size_t doubles_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  double *device_mine_ = nullptr, *device_all_ = nullptr;
  double *host_mine_ = nullptr, *host_all_ = nullptr;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> aborting_{false};
  bool in_flight_ = false;      // the exchange thread's; read after it has been joined
  bool thread_set_up_ = false;  // the exchange thread's
};

absl::StatusOr<std::unique_ptr<NcclLinks>> NcclLinks::Start(ncclComm_t comm, std::string name,
                                                            const PreloadConfig& config,
                                                            GpuCallTimer* timer,
                                                            prometheus::Registry* metrics) {
  const NcclApi& api = Api();
  int size = 0, rank = 0, device = 0;
  if (!api.complete() || api.comm_split == nullptr || api.comm_abort == nullptr ||
      api.comm_destroy == nullptr) {
    return absl::FailedPreconditionError("NCCL lacks a function link profiling needs");
  }
  if (api.comm_count(comm, &size) != ncclSuccess ||
      api.comm_user_rank(comm, &rank) != ncclSuccess ||
      api.comm_cu_device(comm, &device) != ncclSuccess) {
    return absl::InternalError("the communicator's rank, size or device is unknown");
  }
  if (size < 2) return absl::FailedPreconditionError("a communicator of one rank has no links");
  if (timer == nullptr) return absl::FailedPreconditionError("no GPU timer");
  LinkProfilerOptions options{.stages = size,
                              .comm = std::move(name),
                              .metrics = metrics,
                              .exporting_rank = rank,
                              .memory_microbatches = config.pipeline.memory_microbatches};
  if (rank == 0) options.advice_file = config.pipeline_advice_file;  // stage 0 writes it
  if (config.pipeline.complete()) {
    absl::StatusOr<PipelineSpec> stages = PipelineSpecFor(config.pipeline, size);
    if (!stages.ok()) return stages.status();
    options.configured_stages = *std::move(stages);
  }
  absl::StatusOr<std::unique_ptr<LinkProfiler>> profiler = LinkProfiler::Create(std::move(options));
  if (!profiler.ok()) return profiler.status();
  const LinkExchangeOptions exchange{.size = size};
  absl::StatusOr<std::unique_ptr<Transport>> transport =
      Transport::Create(comm, rank, size, device, ReportDoubles(exchange.slots));
  if (!transport.ok()) return transport.status();

  auto links = std::unique_ptr<NcclLinks>(new NcclLinks);
  links->timer_ = timer;
  links->profiler_ = *std::move(profiler);
  links->transport_ = transport->get();
  NcclLinks* self = links.get();
  links->exchanger_ = std::make_unique<LinkExchanger>(
      exchange, *std::move(transport),
      [self](int max) {
        return self->log_.TakeTimed(
            max,
            [self](uint64_t ticket) -> absl::StatusOr<std::optional<double>> {
              absl::StatusOr<std::optional<CallTiming>> timing = self->timer_->Poll(ticket);
              if (!timing.ok()) return timing.status();
              if (!timing->has_value()) return std::nullopt;
              return (*timing)->duration_s;
            },
            [self](uint64_t ticket) { self->timer_->Release(ticket); });
      },
      *links->profiler_);
  return links;
}

NcclLinks::~NcclLinks() {
  if (exchanger_ == nullptr) return;
  if (aborting_) transport_->set_aborting();
  exchanger_->Stop();
  exchanger_.reset();  // frees the transport: the report communicator goes
  log_.Abandon([this](uint64_t ticket) { timer_->Release(ticket); });
}

ncclResult_t NcclLinks::Timed(bool send, int peer, int64_t bytes, cudaStream_t stream,
                              absl::FunctionRef<ncclResult_t()> call) {
  // Under graph capture the timer's events would be captured too: untimed, but indexed.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  absl::StatusOr<uint64_t> ticket = absl::UnavailableError("capturing");
  if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
      capture == cudaStreamCaptureStatusNone) {
    ticket = timer_->Begin(stream);
  }
  const ncclResult_t result = call();
  if (result != ncclSuccess) {  // nothing was enqueued: no index taken
    if (ticket.ok()) timer_->Release(*ticket);
    return result;
  }
  const TransferSide side = Indexed(send, peer, bytes);
  if (ticket.ok() && timer_->End(*ticket, stream).ok()) {
    log_.AddTimed(*ticket, {side});
  } else if (ticket.ok()) {
    timer_->Release(*ticket);
  }
  return result;
}

int64_t NcclTypeBytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 1;  // the fp8 types, and anything newer: sized per element byte
  }
}

}  // namespace stragglar
