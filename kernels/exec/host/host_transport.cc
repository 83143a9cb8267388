#include "kernels/exec/host/host_transport.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

// Misuse of the transport's API (not data errors): fail loudly instead of corrupting memory.
void CheckRanks(int src, int dst, int num_ranks) {
  if (src < 0 || src >= num_ranks || dst < 0 || dst >= num_ranks) {
    std::fprintf(stderr, "HostTransport: channel %d->%d outside [0, %d)\n", src, dst, num_ranks);
    std::abort();
  }
}

// condition_variable::wait_for with an absl::Duration; an infinite (or absurdly long) timeout
// waits without a deadline, since now + max nanoseconds would overflow the clock.
template <typename Predicate>
bool WaitFor(std::condition_variable& condition, std::unique_lock<std::mutex>& lock,
             absl::Duration timeout, Predicate predicate) {
  if (timeout >= absl::Hours(24 * 365)) {
    condition.wait(lock, predicate);
    return true;
  }
  return condition.wait_for(lock, absl::ToChronoNanoseconds(timeout), predicate);
}

}  // namespace

HostTransport::HostTransport(int num_ranks) : num_ranks_(num_ranks < 0 ? 0 : num_ranks) {
  channels_.reserve(static_cast<size_t>(num_ranks_) * num_ranks_);
  for (int i = 0; i < num_ranks_ * num_ranks_; ++i)
    channels_.push_back(std::make_unique<Channel>());
}

absl::Status HostTransport::EmulateNodes(const NodeEmulation& emulation) {
  if (emulation.ranks_per_node < 1 || emulation.ranks_per_node > num_ranks_ ||
      !(emulation.alpha_s >= 0) || !std::isfinite(emulation.alpha_s) ||
      !(emulation.bytes_per_s > 0) || !std::isfinite(emulation.bytes_per_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "emulated nodes need 1 to ", num_ranks_, " ranks per node, alpha >= 0 and bandwidth > 0"));
  }
  emulation_ = emulation;
  std::lock_guard<std::mutex> lock(nic_mutex_);
  nic_free_.assign(static_cast<size_t>(num_ranks_), std::chrono::steady_clock::time_point());
  return absl::OkStatus();
}

std::chrono::steady_clock::time_point HostTransport::ReadableAt(int src, int dst,
                                                                const Message& message) {
  const int per_node = emulation_.ranks_per_node;
  if (per_node == 0 || src / per_node == dst / per_node) return {};
  size_t bytes = message.header.size();
  for (absl::Span<const std::byte> span : message.spans) bytes += span.size();
  bytes += message.owned.size();
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(s));
  };
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(nic_mutex_);
  std::chrono::steady_clock::time_point& free = nic_free_[src];
  free = std::max(free, now) + seconds(static_cast<double>(bytes) / emulation_.bytes_per_s);
  return free + seconds(emulation_.alpha_s);
}

int64_t HostTransport::Queue(int src, int dst, Message message) {
  Channel& target = channel(src, dst);
  message.readable_at = ReadableAt(src, dst, message);
  int64_t ticket;
  {
    std::lock_guard<std::mutex> lock(target.mutex);
    ticket = target.queued++;
    // Nobody reads an aborted channel again; dropping the message frees its memory early.
    if (target.aborted) return ticket;
    target.messages.push_back(std::move(message));
    Message& queued = target.messages.back();
    // Views into the moved vector's heap buffer stay valid; set them once it is in place anyway.
    if (!queued.owned.empty()) queued.spans.assign({absl::MakeConstSpan(queued.owned)});
  }
  target.arrived.notify_one();
  return ticket;
}

void HostTransport::Send(int src, int dst, absl::Span<const std::byte> payload) {
  SendGather(src, dst, {payload});
}

void HostTransport::SendGather(int src, int dst,
                               absl::Span<const absl::Span<const std::byte>> spans) {
  CheckRanks(src, dst, num_ranks_);
  // Build the message outside the lock; reserve + insert avoids zero-filling it first.
  size_t total = 0;
  for (absl::Span<const std::byte> span : spans) total += span.size();
  Message message;
  message.owned.reserve(total);
  for (absl::Span<const std::byte> span : spans) {
    message.owned.insert(message.owned.end(), span.begin(), span.end());
  }
  Queue(src, dst, std::move(message));
}

int64_t HostTransport::Lend(int src, int dst, absl::Span<const std::byte> header,
                            absl::Span<const absl::Span<const std::byte>> spans) {
  CheckRanks(src, dst, num_ranks_);
  Message message;
  message.header.assign(header.begin(), header.end());
  message.spans.assign(spans.begin(), spans.end());
  return Queue(src, dst, std::move(message));
}

absl::StatusOr<HostTransport::BorrowedMessage> HostTransport::Borrow(int src, int dst,
                                                                     absl::Duration timeout) {
  CheckRanks(src, dst, num_ranks_);
  Channel& source = channel(src, dst);
  bool aborted = false;
  {
    std::unique_lock<std::mutex> lock(source.mutex);
    if (source.borrowed) {
      std::fprintf(stderr, "HostTransport: channel %d->%d borrowed twice\n", src, dst);
      std::abort();
    }
    const bool bounded = timeout < absl::Hours(24 * 365);
    const auto deadline = bounded
                              ? std::chrono::steady_clock::now() +
                                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        absl::ToChronoNanoseconds(timeout))
                              : std::chrono::steady_clock::time_point::max();
    bool ready = WaitFor(source.arrived, lock, timeout,
                         [&source] { return source.aborted || !source.messages.empty(); });
    // An emulated NIC may still be delivering it.
    while (ready && !source.aborted) {
      const auto readable_at = source.messages.front().readable_at;
      if (std::chrono::steady_clock::now() >= readable_at) break;
      if (readable_at > deadline) {
        ready = false;
        break;
      }
      source.arrived.wait_until(lock, readable_at, [&source] { return source.aborted; });
    }
    aborted = source.aborted;
    if (ready && !aborted) {
      source.borrowed = true;
      const Message& front = source.messages.front();
      return BorrowedMessage{.header = front.header, .spans = front.spans};
    }
  }
  if (!aborted) {
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", dst, " waited ", absl::FormatDuration(timeout), " for a message from rank ", src));
  }
  return AbortedStatus(src, dst);
}

void HostTransport::Return(int src, int dst) {
  CheckRanks(src, dst, num_ranks_);
  Channel& source = channel(src, dst);
  {
    std::lock_guard<std::mutex> lock(source.mutex);
    if (!source.borrowed) {
      std::fprintf(stderr, "HostTransport: channel %d->%d returned without a borrow\n", src, dst);
      std::abort();
    }
    source.borrowed = false;
    source.messages.pop_front();
    ++source.returned_count;
  }
  source.returned.notify_all();
}

absl::StatusOr<std::vector<std::byte>> HostTransport::Receive(int src, int dst,
                                                              absl::Duration timeout) {
  absl::StatusOr<BorrowedMessage> borrowed = Borrow(src, dst, timeout);
  if (!borrowed.ok()) return borrowed.status();
  size_t total = borrowed->header.size();
  for (absl::Span<const std::byte> span : borrowed->spans) total += span.size();
  std::vector<std::byte> message;
  message.reserve(total);
  message.insert(message.end(), borrowed->header.begin(), borrowed->header.end());
  for (absl::Span<const std::byte> span : borrowed->spans) {
    message.insert(message.end(), span.begin(), span.end());
  }
  Return(src, dst);
  return message;
}

absl::Status HostTransport::WaitReturned(int src, int dst, int64_t ticket, absl::Duration timeout) {
  CheckRanks(src, dst, num_ranks_);
  Channel& target = channel(src, dst);
  {
    std::unique_lock<std::mutex> lock(target.mutex);
    // After an abort the loan is over once nobody is reading it: queued messages were dropped.
    auto done = [&target, ticket] {
      return target.returned_count > ticket || (target.aborted && !target.borrowed);
    };
    if (!WaitFor(target.returned, lock, timeout, done)) {
      return absl::DeadlineExceededError(absl::StrCat("rank ", src, " waited ",
                                                      absl::FormatDuration(timeout), " for rank ",
                                                      dst, " to read its data"));
    }
    if (target.returned_count > ticket) return absl::OkStatus();
  }
  return AbortedStatus(dst, src);
}

absl::Status HostTransport::AbortedStatus(int peer, int rank) {
  // Abort() stores the reason before it flags any channel, so it is set by now. Read it outside
  // the channel lock: Abort() takes abort_mutex_ first and the channel locks after it.
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return absl::AbortedError(absl::StrCat("rank ", rank, " stopped waiting for rank ", peer,
                                         ": collective aborted: ", abort_reason_.ToString()));
}

void HostTransport::Abort(absl::Status reason) {
  if (reason.ok()) reason = absl::UnknownError("Abort() called with an OK status");
  {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (!abort_reason_.ok()) return;  // the first reason wins; its caller flags the channels
    abort_reason_ = std::move(reason);
  }
  for (const std::unique_ptr<Channel>& each : channels_) {
    {
      std::lock_guard<std::mutex> lock(each->mutex);
      each->aborted = true;
      // A borrowed message is being read; its receiver returns it, which wakes its sender.
      each->messages.erase(each->messages.begin() + (each->borrowed ? 1 : 0), each->messages.end());
    }
    each->arrived.notify_all();
    each->returned.notify_all();
  }
}

}  // namespace stragglar
