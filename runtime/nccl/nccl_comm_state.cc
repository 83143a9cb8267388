#include "runtime/nccl/nccl_comm_state.h"

#include "absl/status/statusor.h"
#include "kernels/cuda/device_scope.h"
#include "runtime/nccl/nccl_allreduce_work.h"
#include "runtime/nccl/nccl_codes.h"

namespace stragglar {

ncclResult_t CommState::AllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, DataType type,
                                  ReduceOp reduce_op, cudaStream_t stream) {
  CallGate::Call call(gate);
  // Aborted or destroyed by another thread before this call came in: a call on a freed
  // communicator, which NCCL itself would not survive.
  if (torn_down) return ncclInvalidUsage;
  // Revoked by the watchdog (STRAGGLAR_TIMEOUT, said in its line): every call fails, as NCCL's own
  // calls on a revoked communicator do, until the user destroys it.
  if (backend->revoked()) return ncclRemoteError;
  DeviceScope scope(backend->device());
  backend->set_stream(stream);
  NcclAllReduceWork work(sendbuff, recvbuff, count, datatype, op, type, reduce_op, stream,
                         *backend);
  const absl::StatusOr<CallDecision> ran = comm->AllReduce(
      static_cast<int64_t>(count) * DataTypeSize(type), /*in_place=*/sendbuff == recvbuff, work);
  // Revoked while it ran: its work may have been stopped, so it is not a success.
  if (backend->revoked()) return ncclRemoteError;
  if (ran.ok() && watch != nullptr) watch->Enqueued(*ran, stream);
  return NcclCodeOf(ran.status());
}

}  // namespace stragglar
