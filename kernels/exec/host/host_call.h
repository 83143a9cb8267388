// One call of a rank's program on the host executor (host_executor.h): its buffers, the chunks it
// lends to peers, and the loans it must see returned before it finishes. It does each step's send
// and receive; its drivers decide their order: host_executor.cc runs the steps in round order,
// host_link_class_queues.h on one queue per link class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/exec/call_buffers.h"
#include "kernels/exec/host/host_executor.h"
#include "kernels/exec/host/host_transport.h"
#include "kernels/program/program.h"

namespace stragglar {

class HostCall {
 public:
  // `program` must have passed the executor's validation for `args` and `transport`; `timeout`
  // bounds each wait for a peer.
  HostCall(const RankProgram& program, const AllReduceArgs& args, absl::Duration timeout,
           HostTransport& transport);
  HostCall(const HostCall&) = delete;
  HostCall& operator=(const HostCall&) = delete;

  const RankProgram& program() const { return program_; }

  // Lends step `index`'s chunks to its send peer as they are now (the plan contract: the value at
  // the start of the round, so the caller must not have applied this round's receive yet).
  // Never blocks.
  void Send(int32_t index);
  // Borrows step `index`'s message, checks it against this rank's call and applies it into the
  // result. Chunks that an earlier send (this step's included) lent and a peer may still be
  // reading go through scratch memory and land once the peer returns them. Every send those
  // chunks wait for must have been made.
  absl::Status Receive(int32_t index);
  // After every step: waits until no peer reads this rank's buffers, then does the finish copies
  // and kAvg's division. Fails (below) on a timeout.
  absl::Status Finish();
  // Aborts the transport so that the peers waiting on this rank, and this rank's other threads
  // waiting in it, return instead of waiting for what will not come. The first reason wins.
  void Abort(const absl::Status& status) { transport_.Abort(status); }
  // Aborts the transport so that the peers waiting on this rank return too, and then waits until
  // no peer is still reading this rank's buffers (the caller may free them). After the abort that
  // wait is bounded by the reads in progress (a reader never blocks while it holds a message), so
  // it needs no timeout, and must not have one. Returns `status`.
  absl::Status Fail(absl::Status status);

 private:
  absl::Status WaitForLoans(absl::Duration timeout);
  bool StillLent(const ProgramExtent& extent) const;

  const RankProgram& program_;
  const AllReduceArgs& args_;
  const CallBuffers buffers_;
  const absl::Duration timeout_;
  HostTransport& transport_;
  const int rank_;
  // The ticket of the last message lent to each peer; channels are FIFO, so once it is returned
  // every earlier one is too.
  std::vector<int64_t> last_loan_;
  std::vector<int64_t> tickets_;  // by step: the ticket of its send's loan
};

}  // namespace stragglar
