// Link profiling in the NCCL preload (STRAGGLAR_LINK_PROFILING=on; docs/pipeline.md). Per user
// communicator, from its creation (a collective call, so every rank splits together): a second
// communicator of stragglar's own for the link reports, the log of this rank's sends and
// receives, the link profiler and its exchange thread. The interposed ncclSend and ncclRecv go
// to NCCL unchanged, bracketed by the GPU call timer; inside a user's group the whole group is
// timed as one unit at its ncclGroupEnd, and each transfer in it gets the group's time.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "profiler/gpu_timer.h"
#include "prometheus/registry.h"
#include "runtime/env_config.h"
#include "runtime/link_exchange.h"
#include "runtime/link_profiler.h"
#include "runtime/transfer_log.h"

namespace stragglar {

// One user communicator's link profiling.
class NcclLinks {
 public:
  // Splits the report communicator off `comm` (every rank of `comm` must call this, right after
  // creating it) and starts the exchange. `timer` (the process's) must outlive this; `metrics` may
  // be null. An error leaves `comm` untouched; the caller logs it and passes the communicator
  // through.
  static absl::StatusOr<std::unique_ptr<NcclLinks>> Start(ncclComm_t comm, std::string name,
                                                          const PreloadConfig& config,
                                                          GpuCallTimer* timer,
                                                          prometheus::Registry* metrics);
  // Stops the exchange and frees the report communicator: aborted when a gather is in flight or
  // `aborting` (a peer may be gone), destroyed otherwise.
  ~NcclLinks();
  NcclLinks(const NcclLinks&) = delete;
  NcclLinks& operator=(const NcclLinks&) = delete;

  // Stops the exchange thread (at exit, when the process will not destroy its communicators).
  void Stop() { exchanger_->Stop(); }
  void set_aborting() { aborting_ = true; }

  // One ncclSend (`send`) or ncclRecv outside a group: `call` is NCCL's, made once, its result
  // returned unchanged.
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

 private:
  class Transport;
  NcclLinks() = default;

  GpuCallTimer* timer_ = nullptr;
  bool aborting_ = false;
  TransferLog log_;
  std::unique_ptr<LinkProfiler> profiler_;
  Transport* transport_ = nullptr;  // owned by exchanger_
  std::unique_ptr<LinkExchanger> exchanger_;
};

// Bytes of one element of `type` (1 for the fp8 types).
int64_t NcclTypeBytes(ncclDataType_t type);

}  // namespace stragglar
