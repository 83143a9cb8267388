#include "runtime/nccl/nccl_link_groups.h"

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/links/transfer_log.h"
#include "profiler/gpu_timer.h"

namespace stragglar {
namespace {

thread_local int group_depth = 0;

// The sends and receives of the user's open group on this thread.
struct GroupSide {
  std::shared_ptr<NcclLinks> links;
  bool send;
  int peer;
  int64_t bytes;
};
struct OpenGroup {
  cudaStream_t stream = nullptr;
  bool untimed = false;
  std::vector<GroupSide> sides;
};
thread_local OpenGroup open_group;

// The outermost ncclGroupEnd of a group with profiled sends or receives.
ncclResult_t EndGroupWithSides(absl::FunctionRef<ncclResult_t()> group_end) {
  OpenGroup group = std::move(open_group);
  open_group = {};
  NcclLinks& links = *group.sides.front().links;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const bool timed = !group.untimed && links.exchanging() &&
                     cudaStreamIsCapturing(group.stream, &capture) == cudaSuccess &&
                     capture == cudaStreamCaptureStatusNone;
  GpuCallTimer* timer = links.timer();
  const absl::StatusOr<uint64_t> ticket =
      timed ? timer->Begin(group.stream) : absl::UnavailableError("not timed");
  const ncclResult_t result = group_end();
  if (result != ncclSuccess) {  // NCCL took none of it: no indices
    if (ticket.ok()) timer->Release(*ticket);
    return result;
  }
  std::vector<TransferSide> sides;
  for (const GroupSide& side : group.sides) {
    sides.push_back(side.links->Indexed(side.send, side.peer, side.bytes));
  }
  if (ticket.ok() && timer->End(*ticket, group.stream).ok()) {
    links.AddGroup(*ticket, std::move(sides));
  } else if (ticket.ok()) {
    timer->Release(*ticket);
  }
  return result;
}

}  // namespace

int GroupDepth() { return group_depth; }

void GroupStarted() { ++group_depth; }

void NoteOtherGroupWork() {
  if (group_depth > 0) open_group.untimed = true;
}

ncclResult_t PointToPoint(std::shared_ptr<NcclLinks> links, bool send, int peer, int64_t bytes,
                          cudaStream_t stream, absl::FunctionRef<ncclResult_t()> call) {
  if (links == nullptr) {
    NoteOtherGroupWork();
    return call();
  }
  if (group_depth == 0) return links->Timed(send, peer, bytes, stream, call);
  const ncclResult_t result = call();
  if (result != ncclSuccess) return result;
  if (!open_group.sides.empty()) {
    const GroupSide& first = open_group.sides.front();
    if (first.links != links || first.peer != peer || open_group.stream != stream) {
      open_group.untimed = true;
    }
  }
  open_group.stream = stream;
  open_group.sides.push_back({std::move(links), send, peer, bytes});
  return result;
}

ncclResult_t EndGroup(absl::FunctionRef<ncclResult_t()> group_end) {
  if (group_depth == 1 && !open_group.sides.empty()) {
    group_depth = 0;
    return EndGroupWithSides(group_end);
  }
  if (group_depth > 0) --group_depth;
  if (group_depth == 0) open_group = {};
  return group_end();
}

void GroupSimulated() {
  if (group_depth > 0) --group_depth;
  if (group_depth == 0) open_group = {};
}

}  // namespace stragglar
