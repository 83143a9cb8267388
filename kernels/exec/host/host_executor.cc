#include "kernels/exec/host/host_executor.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/exec/host/host_call.h"
#include "kernels/exec/host/host_link_class_queues.h"

namespace stragglar {
namespace {

absl::Status ValidateProgram(const RankProgram& program, const AllReduceArgs& args,
                             const HostExecutorOptions& options, const HostTransport& transport) {
  if (program.num_ranks != transport.num_ranks()) {
    return absl::InvalidArgumentError(absl::StrCat("plan has ", program.num_ranks,
                                                   " ranks but the transport connects ",
                                                   transport.num_ranks()));
  }
  if (options.ranks_per_node < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", program.rank, ": ranks per node must be >= 0, got ", options.ranks_per_node));
  }
  return CheckAllReduceArgs(program, args);
}

// The steps one after the other, each send before its receive: one queue for every peer.
absl::Status RunInRoundOrder(HostCall& call) {
  const std::vector<ProgramStep>& steps = call.program().steps;
  for (int32_t index = 0; index < static_cast<int32_t>(steps.size()); ++index) {
    if (steps[index].send_peer >= 0) call.Send(index);
    if (steps[index].receive_peer < 0) continue;
    if (absl::Status status = call.Receive(index); !status.ok())
      return call.Fail(std::move(status));
  }
  return call.Finish();
}

}  // namespace

absl::Status host::Run(const RankProgram& program, const AllReduceArgs& args,
                       const HostExecutorOptions& options, HostTransport& transport) {
  if (absl::Status status = ValidateProgram(program, args, options, transport); !status.ok()) {
    // Nothing was lent yet: aborting is all that failing takes.
    transport.Abort(status);
    return status;
  }
  HostCall call(program, args, options.timeout, transport);
  if (options.ranks_per_node > 0) {
    const LinkClassQueues queues = SplitByLinkClass(program, options.ranks_per_node);
    if (!queues.OneClass()) return RunOnLinkClassQueues(queues, call);
  }
  return RunInRoundOrder(call);
}

}  // namespace stragglar
