#include "runtime/nccl/nccl_allreduce_work.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "kernels/exec/library_code.h"
#include "kernels/exec/nccl/nccl_executor.h"
#include "runtime/nccl/nccl_api.h"
#include "runtime/nccl/nccl_codes.h"

namespace stragglar {

absl::Status NcclAllReduceWork::RunOnDevice(DeviceExecutor& executor, const RankProgram& program) {
  const absl::Status status = executor.Run(program, args_, stream_);
  return status.ok() ? status : WithDeviceExecutorCode(status);
}

absl::Status NcclAllReduceWork::RunProgram(const CallDecision& decision,
                                           const RankProgram& program) {
  std::optional<NativePreArrival> native;
  if (program.placement.native_pre_arrival) {
    absl::StatusOr<ncclComm_t> ready =
        backend_.ready_comms().Get(decision.straggler.value_or(-1), program.pre_arrival_block);
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
