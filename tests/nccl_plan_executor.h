// A plan lowered for one rank in every placement, run over NCCL: what the NCCL executor's tests
// do (the runtime lowers once per plan and placement it meets, and calls nccl::Run).
#pragma once

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "kernels/exec/nccl/nccl_executor.h"
#include "kernels/plan/plan.h"
#include "kernels/program/program.h"

namespace stragglar {

class NcclPlanExecutor {
 public:
  // InvalidArgument for a plan this rank cannot execute (see LowerPlan).
  static absl::StatusOr<NcclPlanExecutor> Create(const Plan& plan, int rank) {
    NcclPlanExecutor executor;
    for (bool in_place : {false, true}) {
      for (bool native : {false, true}) {
        absl::StatusOr<RankProgram> program =
            LowerPlan(plan, rank, {.in_place = in_place, .native_pre_arrival = native});
        if (!program.ok()) return program.status();
        (native ? executor.native_ : executor.rounds_)[in_place] = *std::move(program);
      }
    }
    return executor;
  }

  // nccl::Run with the program for args' placement, and with the pre-arrival phase as
  // NCCL collectives when `native` is given and the plan allows it.
  absl::Status Run(const AllReduceArgs& args, const NcclPointToPoint& nccl, const DeviceOps& device,
                   ncclComm_t comm, cudaStream_t stream, ScratchSpace& scratch,
                   const NativePreArrival* native = nullptr) const {
    const bool in_place = args.send == args.recv;
    const bool use_native = native != nullptr && SupportsNativePreArrival();
    return nccl::Run(
        use_native ? native_[in_place] : rounds_[in_place], args,
        {.nccl = nccl, .device = device, .comm = comm, .stream = stream, .scratch = scratch},
        native);
  }

  // True for StragglAR plans whose pre-arrival rounds end with every ready rank owning one block
  // of equally many adjacent chunks (what the synthesizer's ring ReduceScatter leaves).
  bool SupportsNativePreArrival() const { return native_[0].placement.native_pre_arrival; }
  // The block this rank owns after the pre-arrival phase, in [0, ready ranks); -1 on the straggler
  // or without SupportsNativePreArrival().
  int PreArrivalBlock() const { return native_[0].pre_arrival_block; }

 private:
  // [in place]: the plan's own rounds, and with the pre-arrival phase left to NCCL.
  RankProgram rounds_[2];
  RankProgram native_[2];
};

}  // namespace stragglar
