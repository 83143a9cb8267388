#include "runtime/nccl/nccl_links.h"

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "pipeline/links/tcp_report_transport.h"
#include "runtime/nccl/nccl_api.h"
#include "runtime/nccl/nccl_text_broadcast.h"

namespace stragglar {

namespace {

constexpr size_t kAddressBytes = 64;  // "host:port" of rank 0's listener, NUL-padded

}  // namespace

absl::StatusOr<std::unique_ptr<NcclLinks>> NcclLinks::Start(ncclComm_t comm, std::string name,
                                                            const PreloadConfig& config,
                                                            GpuCallTimer* timer,
                                                            prometheus::Registry* metrics) {
  const NcclApi& api = Api();
  int size = 0, rank = 0, device = 0;
  if (!api.complete() || api.comm_count(comm, &size) != ncclSuccess ||
      api.comm_user_rank(comm, &rank) != ncclSuccess ||
      api.comm_cu_device(comm, &device) != ncclSuccess) {
    return absl::InternalError("the communicator's rank, size or device is unknown");
  }
  if (size < 2) return absl::FailedPreconditionError("a communicator of one rank has no links");
  // First the collective, which every rank must join whatever happens here afterwards: rank 0's
  // address ("" when it cannot listen). A rank that fails after it only ends its own profiling;
  // the others then see it gone (a closed connection, or a connection that never comes).
  std::unique_ptr<TcpListener> listener;
  std::string advertised;
  if (rank == 0) {
    absl::StatusOr<std::unique_ptr<TcpListener>> opened = TcpListener::Open(config.link_host);
    if (opened.ok()) {
      listener = *std::move(opened);
      advertised = listener->address();
    } else {
      Log(LogLevel::kWarn, absl::StrCat(name, ": ", opened.status().message()));
    }
  }
  absl::StatusOr<std::string> hub =
      BroadcastTextAtCreation(comm, device, advertised, kAddressBytes, "the link report address");
  if (!hub.ok()) return hub.status();
  if (hub->empty()) return absl::UnavailableError("rank 0 could not listen for link reports");
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

  auto links = std::unique_ptr<NcclLinks>(new NcclLinks);
  links->timer_ = timer;
  links->profiler_ = *std::move(profiler);
  NcclLinks* self = links.get();
  LinkExchangeOptions exchange{.size = size};
  exchange.thread_setup = [device] {
    // Bound to the communicator's device before its first CUDA call (the timer's polls), and in
    // the relaxed capture mode, so that a user's graph capture in global mode never sees them.
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&relaxed);
    cudaSetDevice(device);
  };
  links->exchanger_ = std::make_unique<LinkExchanger>(
      std::move(exchange),
      std::make_unique<TcpReportTransport>(TcpTransportOptions{.rank = rank, .size = size},
                                           std::move(listener), *hub),
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
  exchanger_->Stop();
  exchanger_.reset();  // closes the connections: the other ranks learn that this one has gone
  log_.Abandon([this](uint64_t ticket) { timer_->Release(ticket); });
}

ncclResult_t NcclLinks::Timed(bool send, int peer, int64_t bytes, cudaStream_t stream,
                              absl::FunctionRef<ncclResult_t()> call) {
  // Under graph capture the timer's events would be captured too: untimed, but indexed.
  // Once the exchange has ended nothing would read a timing: indexed only.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  absl::StatusOr<uint64_t> ticket = absl::UnavailableError("not timed");
  if (exchanger_->running() && cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
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
  const std::optional<DataType> ours = MapType(type);
  return ours.has_value() ? DataTypeSize(*ours) : 1;  // the fp8 types, and anything newer
}

}  // namespace stragglar
