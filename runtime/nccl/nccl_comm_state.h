// One communicator the NCCL preload handles: its backend, the protocol over it, what the watchdog
// sees of its calls, and the gate between its calls and what other threads do to it.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>

#include "kernels/reduce/reduce.h"
#include "runtime/call_gate.h"
#include "runtime/communicator.h"
#include "runtime/nccl/nccl_backend.h"
#include "runtime/nccl/nccl_call_watch.h"

namespace stragglar {

struct CommState {
  std::unique_ptr<NcclBackend> backend;
  std::unique_ptr<Communicator> comm;    // after `backend`, which it uses
  std::unique_ptr<NcclCallWatch> watch;  // with the watchdog; reset before `comm` and `backend`
  // Entered by each call in AllReduce. What another thread does to this state (STRAGGLAR_TIMEOUT's
  // ending writes the outputs; an abort frees it) runs when no call is inside, or on the calling
  // thread as it leaves (runtime/call_gate.h).
  CallGate gate;
  bool torn_down = false;  // under `gate`: the preload's teardown ran; it only awaits its owners

  // One handled ncclAllReduce, through the gate.
  ncclResult_t AllReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, DataType type, ReduceOp reduce_op,
                         cudaStream_t stream);
};

}  // namespace stragglar
