#include "kernels/exec/host/host_executor.h"

#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/exec/host/host_call.h"
#include "kernels/exec/host/host_link_class_queues.h"

namespace stragglar {
namespace {

// What any call checks, whatever its plan: the element type, op, count and buffers.
absl::Status ValidateCallArgs(int rank, const HostAllReduceArgs& args) {
  if (static_cast<size_t>(args.type) >= kAllDataTypes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": unknown data type ", static_cast<int>(args.type)));
  }
  if (static_cast<size_t>(args.op) >= kAllReduceOps.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": unknown reduce op ", static_cast<int>(args.op)));
  }
  if (args.count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": count must be >= 0, got ", args.count));
  }
  if (args.count > std::numeric_limits<int64_t>::max() / DataTypeSize(args.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": count ", args.count, " overflows the byte size"));
  }
  if (args.ranks_per_node < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": ranks per node must be >= 0, got ", args.ranks_per_node));
  }
  if (args.count > 0 && (args.send == nullptr || args.recv == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": ",
                                                   args.send == nullptr ? "send" : "recv",
                                                   " buffer is null with count ", args.count));
  }
  return absl::OkStatus();
}

absl::Status ValidateProgram(const RankProgram& program, const HostAllReduceArgs& args,
                             const HostTransport& transport) {
  if (program.num_ranks != transport.num_ranks()) {
    return absl::InvalidArgumentError(absl::StrCat("plan has ", program.num_ranks,
                                                   " ranks but the transport connects ",
                                                   transport.num_ranks()));
  }
  if (absl::Status status = ValidateCallArgs(program.rank, args); !status.ok()) return status;
  if (args.count > 0 && program.placement.in_place != (args.send == args.recv)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", program.rank, ": the program was lowered for ",
                     program.placement.in_place ? "in-place" : "out-of-place", " buffers"));
  }
  return absl::OkStatus();
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

absl::Status ExecuteProgramOnHost(const RankProgram& program, const HostAllReduceArgs& args,
                                  HostTransport& transport) {
  if (absl::Status status = ValidateProgram(program, args, transport); !status.ok()) {
    // Nothing was lent yet: aborting is all that failing takes.
    transport.Abort(status);
    return status;
  }
  HostCall call(program, args, transport);
  if (args.ranks_per_node > 0) {
    const LinkClassQueues queues = SplitByLinkClass(program, args.ranks_per_node);
    if (!queues.OneClass()) return RunOnLinkClassQueues(queues, call);
  }
  return RunInRoundOrder(call);
}

}  // namespace stragglar
