// Executes any plan on ranks that are threads of one process, over an in-process transport. A rank
// waits only for the messages it needs: there is no global barrier per round.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kernels/plan.h"
#include "kernels/reduce.h"

namespace stragglar {

// Point-to-point FIFO channels between every ordered pair of ranks. Sends never block (the
// payload is copied); receives block until a message is there, the timeout passes, or the
// transport is aborted. Thread-safe.
class HostTransport {
 public:
  explicit HostTransport(int num_ranks);
  HostTransport(const HostTransport&) = delete;
  HostTransport& operator=(const HostTransport&) = delete;

  int num_ranks() const { return num_ranks_; }

  // Queues a copy of `payload` on the src->dst channel. src and dst must be in [0, num_ranks).
  void Send(int src, int dst, absl::Span<const std::byte> payload);
  // Queues one message that is the concatenation of `pieces` (a gather send: the executor hands
  // over a header and chunks in place, so each byte is copied once). Same contract as Send.
  void SendGather(int src, int dst, absl::Span<const absl::Span<const std::byte>> pieces);
  // Takes the oldest message on src->dst. DeadlineExceeded names both ranks when `timeout`
  // passes ("rank 3 waited 10s for a message from rank 5"); Aborted, with the abort reason in its
  // message, after Abort() (queued messages are dropped).
  absl::StatusOr<std::vector<std::byte>> Receive(int src, int dst, absl::Duration timeout);
  // Wakes every waiting and future Receive with `reason`, so one failing rank cannot hang the
  // others. The first reason wins.
  void Abort(absl::Status reason);

 private:
  struct Channel {
    // std::mutex rather than absl::Mutex: ThreadSanitizer understands pthread primitives, while
    // the distribution's Abseil is not instrumented and would produce false race reports.
    std::mutex mutex;
    std::condition_variable arrived;  // a message was queued or the transport was aborted
    std::deque<std::vector<std::byte>> messages ABSL_GUARDED_BY(mutex);
    // Set by Abort() under `mutex`, so a receiver's wait condition sees it and wakes up.
    bool aborted ABSL_GUARDED_BY(mutex) = false;
  };
  Channel& channel(int src, int dst) { return *channels_[src * num_ranks_ + dst]; }

  const int num_ranks_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::mutex abort_mutex_;
  absl::Status abort_reason_ ABSL_GUARDED_BY(abort_mutex_);
};

struct HostAllReduceArgs {
  const void* send = nullptr;  // never modified; may equal `recv` (in place)
  void* recv = nullptr;
  int64_t count = 0;  // elements per rank, >= 0, the same on every rank
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  absl::Duration timeout = absl::Seconds(60);  // per receive
};

// Runs `plan` as `rank`. Chunk i covers ChunkElements(count, plan.num_chunks, i). Round semantics
// as the plan contract: a rank sends the value it holds at the start of the round and applies what
// it receives afterwards (reduce: ReduceInto; copy: overwrite); kAvg divides once at the end.
// Rank-local errors (rank out of range, null buffers with count > 0, negative count, a plan that
// does not fit the transport) return InvalidArgument before anything is written. Every message
// carries the sender's count, type and op; a receiver never applies a message that disagrees with
// its own and returns InvalidArgument naming both ("mismatched counts across ranks"). On any
// error the transport is aborted so that the other ranks return instead of hanging. Every transfer
// is one message, even when its chunks are empty (count < num_chunks), so channel order and the
// header check hold for any count. `send` and `recv` must be equal or not overlap.
absl::Status ExecutePlanOnHost(const Plan& plan, int rank, const HostAllReduceArgs& args,
                               HostTransport& transport);

}  // namespace stragglar
