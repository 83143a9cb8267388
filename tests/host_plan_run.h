// Lowers a plan for one rank and runs it on the host executor, what the tests do (the runtime
// lowers once per plan and placement, and runs the cached program with host::Run).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/exec/host/host_executor.h"
#include "kernels/plan/plan.h"
#include "kernels/program/program.h"

namespace stragglar {

// host::Run's errors, plus LowerPlan's (a rank outside the plan, a plan this rank
// cannot execute), which abort the transport too, so that the other ranks return.
inline absl::Status ExecutePlanOnHost(const Plan& plan, int rank, const AllReduceArgs& args,
                                      HostTransport& transport,
                                      const HostExecutorOptions& options = {}) {
  absl::StatusOr<RankProgram> program = LowerPlan(plan, rank, {.in_place = args.send == args.recv});
  if (!program.ok()) {
    // Nothing was lent yet: aborting is all that failing takes.
    transport.Abort(program.status());
    return program.status();
  }
  return host::Run(*program, args, options, transport);
}

}  // namespace stragglar
