// The host executor's driver of a program on link-class queues (program/link_class_queues.h):
// the caller's thread serves one class and a helper thread the other, each in round order. Sends
// never block: whichever thread completes a send's last write lends it, in its class's round
// order.
#pragma once

#include "absl/status/status.h"
#include "kernels/exec/host/host_call.h"
#include "kernels/program/link_class_queues.h"

namespace stragglar {

// Runs `call`'s program on `queues` (SplitByLinkClass of it): the caller's thread serves one
// class's receives, and a helper thread the other's. The helper belongs to the calling thread: it
// starts on that thread's first call and ends when the thread does, so a rank's thread keeps one.
// Returns as running in round order would: call.Finish()'s status, or the first error after
// call.Fail (which aborts the transport, so the other threads and ranks return too).
absl::Status RunOnLinkClassQueues(const LinkClassQueues& queues, HostCall& call);

}  // namespace stragglar
