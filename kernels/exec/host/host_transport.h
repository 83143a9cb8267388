// Point-to-point channels between ranks that are threads of one process: what the host executor
// moves chunks over and the host runtime exchanges epochs over.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace stragglar {

// Point-to-point FIFO channels between every ordered pair of ranks. Two ways to send:
// - Send/SendGather copy the payload and never block (small control messages);
// - Lend queues a header copy plus views of the sender's memory (zero copy): the receiver reads
//   the payload in place through Borrow, and the sender keeps that memory unchanged until
//   WaitReturned says the receiver is done with it. The executor's chunks travel this way, so
//   each byte is moved once, by the receiver, straight into its result.
// Receives block until a message is there, the timeout passes, or the transport is aborted.
// Thread-safe; each channel has one sending and one receiving thread.
class HostTransport {
 public:
  // A message as its receiver sees it while borrowing it: the header (copied when it was sent)
  // and the payload spans, which may point into the sender's memory.
  struct BorrowedMessage {
    absl::Span<const std::byte> header;
    absl::Span<const absl::Span<const std::byte>> spans;
  };

  explicit HostTransport(int num_ranks);
  HostTransport(const HostTransport&) = delete;

  // An emulated machine of nodes (`stragglar run --topology`): ranks [k*ranks_per_node,
  // (k+1)*ranks_per_node) are node k, and a message between nodes becomes readable only when an
  // emulated NIC would have delivered it: alpha after its last byte leaves the sender's NIC, which
  // sends one message at a time at `bytes_per_s`. Messages inside a node move at memory speed.
  struct NodeEmulation {
    int ranks_per_node = 0;  // 0: no emulation
    double alpha_s = 0;
    double bytes_per_s = 0;
  };
  // Before any message. InvalidArgument for ranks_per_node outside [1, num_ranks] or a
  // non-finite or negative alpha or non-positive bandwidth, changing nothing.
  absl::Status EmulateNodes(const NodeEmulation& emulation);
  HostTransport& operator=(const HostTransport&) = delete;

  int num_ranks() const { return num_ranks_; }

  // Queues a copy of `payload` on the src->dst channel. src and dst must be in [0, num_ranks).
  void Send(int src, int dst, absl::Span<const std::byte> payload);
  // Queues one message that is a copy of the concatenation of `spans`. Same contract as Send.
  void SendGather(int src, int dst, absl::Span<const absl::Span<const std::byte>> spans);
  // Queues a message made of a copy of `header` and the memory of `spans`, which the caller must
  // keep valid and unchanged until WaitReturned(src, dst, ticket) returns. Returns the ticket.
  int64_t Lend(int src, int dst, absl::Span<const std::byte> header,
               absl::Span<const absl::Span<const std::byte>> spans);
  // Takes the oldest message on src->dst, as a copy (header and spans concatenated).
  // DeadlineExceeded names both ranks when `timeout` passes ("rank 3 waited 10s for a message
  // from rank 5"); Aborted, with the abort reason in its message, after Abort() (queued messages
  // are dropped).
  absl::StatusOr<std::vector<std::byte>> Receive(int src, int dst, absl::Duration timeout);
  // Like Receive, without copying: the view stays valid until Return(src, dst), which must follow
  // (it is what lets the sender reuse its memory). One borrowed message per channel at a time.
  absl::StatusOr<BorrowedMessage> Borrow(int src, int dst, absl::Duration timeout);
  void Return(int src, int dst);
  // Blocks until the receiver has returned every message up to `ticket` on src->dst. After
  // Abort() it returns Aborted as soon as no receiver is reading src's memory on that channel
  // (messages not yet borrowed are dropped), so the caller may then free it.
  absl::Status WaitReturned(int src, int dst, int64_t ticket, absl::Duration timeout);
  // Wakes every waiting and future Receive/Borrow/WaitReturned with `reason`, so one failing rank
  // cannot hang the others. The first reason wins.
  void Abort(absl::Status reason);

 private:
  struct Message {
    // When the receiver may read it (emulated NICs); the epoch of the clock: at once.
    std::chrono::steady_clock::time_point readable_at;
    absl::InlinedVector<std::byte, 16> header;
    absl::InlinedVector<absl::Span<const std::byte>, 4> spans;
    std::vector<std::byte> owned;  // Send's copy of the payload; `spans` views it
  };
  struct Channel {
    // std::mutex rather than absl::Mutex: ThreadSanitizer understands pthread primitives, while
    // the distribution's Abseil is not instrumented and would produce false race reports.
    std::mutex mutex;
    std::condition_variable arrived;   // a message was queued, or the transport was aborted
    std::condition_variable returned;  // a message was returned, or the transport was aborted
    // std::deque keeps references to the borrowed front valid while others are queued behind it.
    std::deque<Message> messages ABSL_GUARDED_BY(mutex);
    int64_t queued ABSL_GUARDED_BY(mutex) = 0;  // messages ever queued; the next ticket
    int64_t returned_count ABSL_GUARDED_BY(mutex) = 0;
    bool borrowed ABSL_GUARDED_BY(mutex) = false;  // the front message is being read
    // Set by Abort() under `mutex`, so waiters' conditions see it and wake up.
    bool aborted ABSL_GUARDED_BY(mutex) = false;
  };
  Channel& channel(int src, int dst) { return *channels_[src * num_ranks_ + dst]; }
  int64_t Queue(int src, int dst, Message message);
  absl::Status AbortedStatus(int src, int dst);

  // When `message` from src to dst becomes readable: at once, or through the emulated NICs.
  std::chrono::steady_clock::time_point ReadableAt(int src, int dst, const Message& message);

  const int num_ranks_;
  std::vector<std::unique_ptr<Channel>> channels_;
  NodeEmulation emulation_;
  std::mutex nic_mutex_;
  // Per rank: when its emulated NIC has sent everything queued on it so far.
  std::vector<std::chrono::steady_clock::time_point> nic_free_ ABSL_GUARDED_BY(nic_mutex_);
  std::mutex abort_mutex_;
  absl::Status abort_reason_ ABSL_GUARDED_BY(abort_mutex_);
};

}  // namespace stragglar
