// One ncclAllReduce's work for the communicator protocol (runtime/communicator.h): NCCL's own
// AllReduce, or this rank's program over NCCL send/recv and our CUDA kernels
// (kernels/exec/nccl/nccl_executor.h), optionally with StragglAR's pre-arrival phase as NCCL
// collectives on a communicator of the ready ranks, or on the device executor; enqueued on the
// caller's stream and bracketed by the GPU call timer.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/exec/all_reduce_args.h"
#include "kernels/reduce/reduce.h"
#include "runtime/comm_backend.h"
#include "runtime/nccl/nccl_backend.h"

namespace stragglar {

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
