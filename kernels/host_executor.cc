#include "kernels/host_executor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "kernels/rank_steps.h"

namespace stragglar {
namespace {

// Every message starts with this header so that a receiver can refuse data that does not match its
// own call before touching its buffer. (It travels as a copy; the payload stays in the sender's
// buffers.)
struct MessageHeader {
  int64_t count;
  int32_t round;
  uint8_t type;
  uint8_t op;
  uint8_t padding[2];
};
static_assert(sizeof(MessageHeader) == 16);

// Misuse of the transport's API (not data errors): fail loudly instead of corrupting memory.
void CheckRanks(int src, int dst, int num_ranks) {
  if (src < 0 || src >= num_ranks || dst < 0 || dst >= num_ranks) {
    std::fprintf(stderr, "HostTransport: channel %d->%d outside [0, %d)\n", src, dst, num_ranks);
    std::abort();
  }
}

absl::Status ValidateArgs(const Plan& plan, int rank, const HostAllReduceArgs& args,
                          const HostTransport& transport) {
  if (plan.num_ranks != transport.num_ranks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan has ", plan.num_ranks, " ranks but the transport connects ", transport.num_ranks()));
  }
  if (rank < 0 || rank >= plan.num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside [0, ", plan.num_ranks, ")"));
  }
  if (plan.num_chunks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan has ", plan.num_chunks, " chunks; needs at least 1"));
  }
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
  if (args.count > 0 && (args.send == nullptr || args.recv == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": ",
                                                   args.send == nullptr ? "send" : "recv",
                                                   " buffer is null with count ", args.count));
  }
  return absl::OkStatus();
}

absl::Status CheckHeader(const MessageHeader& header, int round, int sender, int rank,
                         const HostAllReduceArgs& args) {
  if (header.count != args.count) {
    return absl::InvalidArgumentError(absl::StrCat("mismatched counts across ranks: rank ", sender,
                                                   " has count ", header.count, ", rank ", rank,
                                                   " has count ", args.count));
  }
  if (header.type != static_cast<uint8_t>(args.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mismatched data types across ranks: rank ", sender, " has type ",
                     DataTypeName(static_cast<DataType>(header.type)), ", rank ", rank,
                     " has type ", DataTypeName(args.type)));
  }
  if (header.op != static_cast<uint8_t>(args.op)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mismatched reduce ops across ranks: rank ", sender, " has op ",
                     ReduceOpName(static_cast<ReduceOp>(header.op)), ", rank ", rank, " has op ",
                     ReduceOpName(args.op)));
  }
  if (header.round != round) {
    return absl::InvalidArgumentError(
        absl::StrCat("mismatched plans across ranks: rank ", rank, " expected rank ", sender,
                     "'s round ", round, " message but got its round ", header.round, " message"));
  }
  return absl::OkStatus();
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

// Checks a borrowed message against what this rank expects before anything is applied.
absl::Status CheckMessage(const HostTransport::BorrowedMessage& message, const Transfer& transfer,
                          int round, int rank, const HostAllReduceArgs& args,
                          const std::vector<int64_t>& offsets) {
  if (message.header.size() != sizeof(MessageHeader)) {
    return absl::InternalError(absl::StrCat("rank ", rank, " got a message with a ",
                                            message.header.size(), "-byte header from rank ",
                                            transfer.src));
  }
  MessageHeader header;
  std::memcpy(&header, message.header.data(), sizeof(header));
  if (absl::Status status = CheckHeader(header, round, transfer.src, rank, args); !status.ok()) {
    return status;
  }
  int64_t expected_bytes = 0, got_bytes = 0;
  for (int32_t chunk : transfer.chunks) expected_bytes += offsets[chunk + 1] - offsets[chunk];
  for (absl::Span<const std::byte> piece : message.pieces) got_bytes += piece.size();
  bool same_layout = message.pieces.size() == transfer.chunks.size();
  for (size_t i = 0; same_layout && i < transfer.chunks.size(); ++i) {
    const int32_t chunk = transfer.chunks[i];
    same_layout =
        static_cast<int64_t>(message.pieces[i].size()) == offsets[chunk + 1] - offsets[chunk];
  }
  if (!same_layout) {
    return absl::InvalidArgumentError(
        absl::StrCat("mismatched plans across ranks: rank ", rank, " expected ", expected_bytes,
                     " bytes in ", transfer.chunks.size(), " chunks from rank ", transfer.src,
                     " in round ", round, ", got ", got_bytes, " in ", message.pieces.size()));
  }
  return absl::OkStatus();
}

}  // namespace

HostTransport::HostTransport(int num_ranks) : num_ranks_(num_ranks < 0 ? 0 : num_ranks) {
  channels_.reserve(static_cast<size_t>(num_ranks_) * num_ranks_);
  for (int i = 0; i < num_ranks_ * num_ranks_; ++i)
    channels_.push_back(std::make_unique<Channel>());
}

int64_t HostTransport::Queue(int src, int dst, Message message) {
  Channel& target = channel(src, dst);
  int64_t ticket;
  {
    std::lock_guard<std::mutex> lock(target.mutex);
    ticket = target.queued++;
    // Nobody reads an aborted channel again; dropping the message frees its memory early.
    if (target.aborted) return ticket;
    target.messages.push_back(std::move(message));
    Message& queued = target.messages.back();
    // Views into the moved vector's heap buffer stay valid; set them once it is in place anyway.
    if (!queued.owned.empty()) queued.pieces.assign({absl::MakeConstSpan(queued.owned)});
  }
  target.arrived.notify_one();
  return ticket;
}

void HostTransport::Send(int src, int dst, absl::Span<const std::byte> payload) {
  SendGather(src, dst, {payload});
}

void HostTransport::SendGather(int src, int dst,
                               absl::Span<const absl::Span<const std::byte>> pieces) {
  CheckRanks(src, dst, num_ranks_);
  // Build the message outside the lock; reserve + insert avoids zero-filling it first.
  size_t total = 0;
  for (absl::Span<const std::byte> piece : pieces) total += piece.size();
  Message message;
  message.owned.reserve(total);
  for (absl::Span<const std::byte> piece : pieces) {
    message.owned.insert(message.owned.end(), piece.begin(), piece.end());
  }
  Queue(src, dst, std::move(message));
}

int64_t HostTransport::Lend(int src, int dst, absl::Span<const std::byte> header,
                            absl::Span<const absl::Span<const std::byte>> pieces) {
  CheckRanks(src, dst, num_ranks_);
  Message message;
  message.header.assign(header.begin(), header.end());
  message.pieces.assign(pieces.begin(), pieces.end());
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
    const bool ready = WaitFor(source.arrived, lock, timeout,
                               [&source] { return source.aborted || !source.messages.empty(); });
    aborted = source.aborted;
    if (ready && !aborted) {
      source.borrowed = true;
      const Message& front = source.messages.front();
      return BorrowedMessage{.header = front.header, .pieces = front.pieces};
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
  for (absl::Span<const std::byte> piece : borrowed->pieces) total += piece.size();
  std::vector<std::byte> message;
  message.reserve(total);
  message.insert(message.end(), borrowed->header.begin(), borrowed->header.end());
  for (absl::Span<const std::byte> piece : borrowed->pieces) {
    message.insert(message.end(), piece.begin(), piece.end());
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

absl::Status ExecutePlanOnHost(const Plan& plan, int rank, const HostAllReduceArgs& args,
                               HostTransport& transport) {
  // The ticket of the last message lent to each peer; channels are FIFO, so once it is returned
  // every earlier one is too.
  std::vector<int64_t> last_loan(std::max(plan.num_ranks, 0), -1);
  auto wait_for_loans = [&](absl::Duration timeout) {
    absl::Status result;
    for (int peer = 0; peer < static_cast<int>(last_loan.size()); ++peer) {
      if (last_loan[peer] < 0) continue;
      result.Update(transport.WaitReturned(rank, peer, last_loan[peer], timeout));
    }
    return result;
  };
  // Any failure aborts the transport so that the peers waiting on this rank return too, and then
  // waits until no peer is still reading this rank's buffers (the caller may free them). After
  // the abort that wait is bounded by the reads in progress (a reader never blocks while it
  // holds a message), so it needs no timeout, and must not have one.
  auto fail = [&](absl::Status status) {
    transport.Abort(status);
    (void)wait_for_loans(absl::InfiniteDuration());
    return status;
  };
  if (absl::Status status = ValidateArgs(plan, rank, args, transport); !status.ok()) {
    return fail(std::move(status));
  }
  absl::StatusOr<std::vector<RankStep>> steps = RankSteps(plan, rank);
  if (!steps.ok()) return fail(steps.status());

  const int64_t element_size = DataTypeSize(args.type);
  const std::vector<int64_t> offsets = ChunkByteOffsets(args.count, element_size, plan.num_chunks);
  auto chunk_bytes = [&offsets](int32_t chunk) { return offsets[chunk + 1] - offsets[chunk]; };

  const std::byte* input = static_cast<const std::byte*>(args.send);
  std::byte* result = static_cast<std::byte*>(args.recv);
  // Out of place, a chunk is read from `send` until this rank first writes it into `recv`.
  std::vector<bool> written(plan.num_chunks, input == result);
  auto current = [&](int32_t chunk) -> const std::byte* {
    return (written[chunk] ? result : input) + offsets[chunk];
  };
  // Messages lent out of `recv`, per chunk: before changing the chunk this rank must wait until
  // those peers have read it. (Chunks lent out of `send` are never changed.)
  struct Loan {
    int peer;
    int64_t ticket;
  };
  std::vector<absl::InlinedVector<Loan, 2>> result_loans(plan.num_chunks);
  // Whether a peer may still be reading `chunk` of the result; forgets loans already returned.
  auto still_lent = [&](int32_t chunk) {
    absl::InlinedVector<Loan, 2>& loans = result_loans[chunk];
    loans.erase(std::remove_if(loans.begin(), loans.end(),
                               [&](const Loan& loan) {
                                 return transport
                                     .WaitReturned(rank, loan.peer, loan.ticket,
                                                   absl::ZeroDuration())
                                     .ok();
                               }),
                loans.end());
    return !loans.empty();
  };
  // Where results wait while their chunk is still being read (a two-way exchange of one chunk).
  // Per thread, so a rank reuses it across calls instead of allocating each time.
  thread_local std::vector<std::byte> scratch;
  struct Deferred {
    int32_t chunk;
    int64_t scratch_offset;
  };
  absl::InlinedVector<Deferred, 4> deferred;

  const MessageHeader own_header{.count = args.count,
                                 .round = 0,
                                 .type = static_cast<uint8_t>(args.type),
                                 .op = static_cast<uint8_t>(args.op),
                                 .padding = {}};
  absl::InlinedVector<absl::Span<const std::byte>, 4> pieces;
  for (const RankStep& step : *steps) {
    if (step.send != nullptr) {
      // Lending first hands out the chunks as of the start of the round, which is what the plan
      // contract requires even when this rank also receives one of them in this round. Every
      // transfer is a message, even with empty chunks, so FIFO order and header checks hold for
      // any count.
      MessageHeader header = own_header;
      header.round = step.round;
      pieces.clear();
      for (int32_t chunk : step.send->chunks) {
        pieces.push_back({current(chunk), static_cast<size_t>(chunk_bytes(chunk))});
      }
      const int dst = step.send->dst;
      last_loan[dst] = transport.Lend(
          rank, dst, {reinterpret_cast<const std::byte*>(&header), sizeof(header)}, pieces);
      for (int32_t chunk : step.send->chunks) {
        if (written[chunk]) result_loans[chunk].push_back({dst, last_loan[dst]});
      }
    }
    if (step.receive == nullptr) continue;
    const Transfer& transfer = *step.receive;
    absl::StatusOr<HostTransport::BorrowedMessage> message =
        transport.Borrow(transfer.src, rank, args.timeout);
    if (!message.ok()) return fail(message.status());
    if (absl::Status status = CheckMessage(*message, transfer, step.round, rank, args, offsets);
        !status.ok()) {
      transport.Return(transfer.src, rank);
      return fail(std::move(status));
    }
    deferred.clear();
    int64_t scratch_bytes = 0;
    for (size_t i = 0; i < transfer.chunks.size(); ++i) {
      const int32_t chunk = transfer.chunks[i];
      const int64_t bytes = chunk_bytes(chunk);
      if (bytes == 0) continue;  // empty chunk (count < num_chunks); the buffers may be null
      std::byte* target = result + offsets[chunk];
      if (still_lent(chunk)) {
        deferred.push_back({chunk, scratch_bytes});
        scratch_bytes += bytes;
        if (scratch.size() < static_cast<size_t>(scratch_bytes)) scratch.resize(scratch_bytes);
        target = scratch.data() + deferred.back().scratch_offset;
      }
      const std::byte* incoming = message->pieces[i].data();
      if (transfer.op == TransferOp::kCopy) {
        std::memcpy(target, incoming, bytes);
      } else if (target == current(chunk)) {
        ReduceInto(args.type, args.op, target, incoming, bytes / element_size);
      } else {
        Reduce(args.type, args.op, target, current(chunk), incoming, bytes / element_size);
      }
    }
    // The sender may change its chunks as soon as they are returned; nothing reads them after.
    transport.Return(transfer.src, rank);
    for (int32_t chunk : transfer.chunks) written[chunk] = true;
    for (const Deferred& each : deferred) {
      for (const Loan& loan : result_loans[each.chunk]) {
        if (absl::Status status =
                transport.WaitReturned(rank, loan.peer, loan.ticket, args.timeout);
            !status.ok()) {
          return fail(std::move(status));
        }
      }
      result_loans[each.chunk].clear();
      std::memcpy(result + offsets[each.chunk], scratch.data() + each.scratch_offset,
                  chunk_bytes(each.chunk));
    }
  }
  // Peers may read this rank's buffers until they return the last loans; only then may the result
  // change (kAvg) or the caller reuse the buffers.
  if (absl::Status status = wait_for_loans(args.timeout); !status.ok()) {
    return fail(std::move(status));
  }
  FinishAllReduce(plan, written, offsets, input, result, args.count, args.type, args.op);
  return absl::OkStatus();
}

}  // namespace stragglar
