// Link profiling in the NCCL preload (STRAGGLAR_LINK_PROFILING=on; docs/pipeline.md). Per user
// communicator, from its creation (a collective call, so every rank is there): rank 0's address
// for the link reports, broadcast once on the communicator; the log of this rank's sends and
// receives; the link profiler; and its exchange thread, which gathers the reports over TCP
// (pipeline/links/tcp_report_transport.h), never over NCCL: NCCL forbids issuing operations to
// independent communicators of one device from several threads, and a gather left waiting on the
// GPU for a rank that has stopped would block the device. The interposed ncclSend and ncclRecv go
// to NCCL unchanged, bracketed by the GPU call timer; inside a user's group the whole group is
// timed as one unit at its ncclGroupEnd, and each transfer in it gets the group's time.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "pipeline/links/link_exchange.h"
#include "pipeline/links/link_profiler.h"
#include "pipeline/links/transfer_log.h"
#include "profiler/gpu_timer.h"
#include "prometheus/registry.h"
#include "runtime/env_config.h"

namespace stragglar {

// One user communicator's link profiling.
class NcclLinks {
 public:
  // Shares rank 0's address on `comm` (every rank of `comm` must call this, right after creating
  // it: it is a collective) and starts the exchange. `timer` (the process's) must outlive this;
  // `metrics` may be null. An error leaves `comm` as it was; the caller logs it and profiles
  // nothing on it.
  static absl::StatusOr<std::unique_ptr<NcclLinks>> Start(ncclComm_t comm, std::string name,
                                                          const PreloadConfig& config,
                                                          GpuCallTimer* timer,
                                                          prometheus::Registry* metrics);
  // Stops the exchange (its connections close) and releases the timer's tickets. No GPU work.
  ~NcclLinks();
  NcclLinks(const NcclLinks&) = delete;
  NcclLinks& operator=(const NcclLinks&) = delete;

  // Stops the exchange thread (at exit, when the process will not destroy its communicators).
  void Stop() { exchanger_->Stop(); }

  // One ncclSend (`send`) or ncclRecv outside a group: `call` is NCCL's, made once, its result
  // returned unchanged. Timed while the exchange runs; indexed always.
  ncclResult_t Timed(bool send, int peer, int64_t bytes, cudaStream_t stream,
                     absl::FunctionRef<ncclResult_t()> call);
  // A send or receive inside a user's group: indexed now, timed with the group.
  TransferSide Indexed(bool send, int peer, int64_t bytes) {
    return {.peer = peer, .send = send, .index = log_.NextIndex(peer, send), .bytes = bytes};
  }
  // The group's sides, timed by `ticket` (Begin before the group's ncclGroupEnd).
  void AddGroup(uint64_t ticket, std::vector<TransferSide> sides) {
    log_.AddTimed(ticket, std::move(sides));
  }
  GpuCallTimer* timer() const { return timer_; }
  // False once the exchange has ended: nothing is timed any more.
  bool exchanging() const { return exchanger_->running(); }

 private:
  NcclLinks() = default;

  GpuCallTimer* timer_ = nullptr;
  TransferLog log_;
  std::unique_ptr<LinkProfiler> profiler_;
  std::unique_ptr<LinkExchanger> exchanger_;
};

// Bytes of one element of `type`: our element size (MapType), 1 for the fp8 types.
int64_t NcclTypeBytes(ncclDataType_t type);

}  // namespace stragglar
