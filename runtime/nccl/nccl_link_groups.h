// STRAGGLAR_LINK_PROFILING=on: the user's ncclSend and ncclRecv timed per link
// (runtime/nccl/nccl_links.h), alone or in the groups they are made in, and the nesting of the
// calling thread's ncclGroupStart/End, which decides what the preload leaves to NCCL.
//
// NCCL runs a group's work at its outermost ncclGroupEnd, so that is where the group is timed, as
// one unit, and where its calls take their indices (only if NCCL accepted the group). It is timed
// only when its calls all use one profiled communicator, one stream and one peer, and nothing else
// is in it: then both ends of that link are in it and its time is the link's; otherwise a third
// rank's or other work's time would be blamed on the link.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "runtime/nccl/nccl_links.h"

namespace stragglar {

// ncclGroupStart/End nesting on this thread: calls inside a user's group are NCCL's business.
int GroupDepth();
// After NCCL accepted an ncclGroupStart.
void GroupStarted();
// ncclGroupEnd, NCCL's `group_end`, its result returned unchanged: the outermost end of a group
// with profiled sends or receives times it.
ncclResult_t EndGroup(absl::FunctionRef<ncclResult_t()> group_end);
// ncclGroupSimulateEnd: the group ends without running (NCCL only estimates it), and nothing in
// it is indexed.
void GroupSimulated();
// Something in the open group that is not a profiled send or receive.
void NoteOtherGroupWork();
// ncclSend (`send`) or ncclRecv of `bytes` with `peer`, on a communicator whose links are `links`
// (nullptr: not profiled): NCCL's `call`, made once, its result returned unchanged.
ncclResult_t PointToPoint(std::shared_ptr<NcclLinks> links, bool send, int peer, int64_t bytes,
                          cudaStream_t stream, absl::FunctionRef<ncclResult_t()> call);

}  // namespace stragglar
