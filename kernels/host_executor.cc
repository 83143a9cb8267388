#include "kernels/host_executor.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

// Every message starts with this header so that a receiver can refuse data that does not match its
// own call before touching its buffer. 16 bytes keeps the payload 16-byte aligned for ReduceInto.
struct MessageHeader {
  int64_t count;
  int32_t round;
  uint8_t type;
  uint8_t op;
  uint8_t padding[2];
};
static_assert(sizeof(MessageHeader) == 16);

// What one rank does in one round; rounds where it neither sends nor receives are dropped.
struct RankStep {
  int round = 0;
  const Transfer* send = nullptr;
  const Transfer* receive = nullptr;
};

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

absl::Status ValidateTransfer(const Plan& plan, int round, const Transfer& transfer) {
  if (transfer.src < 0 || transfer.src >= plan.num_ranks || transfer.dst < 0 ||
      transfer.dst >= plan.num_ranks || transfer.src == transfer.dst) {
    return absl::InvalidArgumentError(absl::StrCat("round ", round, ": bad transfer ", transfer.src,
                                                   " -> ", transfer.dst, " for ", plan.num_ranks,
                                                   " ranks"));
  }
  for (int32_t chunk : transfer.chunks) {
    if (chunk < 0 || chunk >= plan.num_chunks) {
      return absl::InvalidArgumentError(
          absl::StrCat("round ", round, ": chunk ", chunk, " outside [0, ", plan.num_chunks, ")"));
    }
  }
  return absl::OkStatus();
}

// This rank's sends and receives, in round order. Only the transfers this rank takes part in are
// checked (the verifier checks whole plans); that is enough to keep the executor memory-safe.
absl::StatusOr<std::vector<RankStep>> RankSteps(const Plan& plan, int rank) {
  std::vector<RankStep> steps;
  for (int round = 0; round < plan.num_rounds(); ++round) {
    RankStep step{.round = round};
    for (const Transfer& transfer : plan.rounds[round].transfers) {
      if (transfer.src != rank && transfer.dst != rank) continue;
      if (absl::Status status = ValidateTransfer(plan, round, transfer); !status.ok()) {
        return status;
      }
      const Transfer*& slot = transfer.src == rank ? step.send : step.receive;
      if (slot != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("round ", round, ": rank ", rank,
                         transfer.src == rank ? " sends" : " receives", " more than one transfer"));
      }
      slot = &transfer;
    }
    if (step.send != nullptr || step.receive != nullptr) steps.push_back(step);
  }
  return steps;
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

}  // namespace

HostTransport::HostTransport(int num_ranks) : num_ranks_(num_ranks < 0 ? 0 : num_ranks) {
  channels_.reserve(static_cast<size_t>(num_ranks_) * num_ranks_);
  for (int i = 0; i < num_ranks_ * num_ranks_; ++i)
    channels_.push_back(std::make_unique<Channel>());
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
  std::vector<std::byte> message;
  message.reserve(total);
  for (absl::Span<const std::byte> piece : pieces) {
    message.insert(message.end(), piece.begin(), piece.end());
  }
  Channel& target = channel(src, dst);
  {
    std::lock_guard<std::mutex> lock(target.mutex);
    // Nobody reads an aborted channel again; dropping the message frees its memory early.
    if (target.aborted) return;
    target.messages.push_back(std::move(message));
  }
  target.arrived.notify_one();
}

absl::StatusOr<std::vector<std::byte>> HostTransport::Receive(int src, int dst,
                                                              absl::Duration timeout) {
  CheckRanks(src, dst, num_ranks_);
  Channel& source = channel(src, dst);
  bool aborted = false;
  {
    std::unique_lock<std::mutex> lock(source.mutex);
    const bool ready = source.arrived.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&source] {
      return source.aborted || !source.messages.empty();
    });
    aborted = source.aborted;
    if (ready && !aborted) {
      std::vector<std::byte> message = std::move(source.messages.front());
      source.messages.pop_front();
      return message;
    }
  }
  if (!aborted) {
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", dst, " waited ", absl::FormatDuration(timeout), " for a message from rank ", src));
  }
  // Abort() stores the reason before it flags any channel, so it is set by now. Read it outside the
  // channel lock: Abort() takes abort_mutex_ first and the channel locks after it.
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return absl::AbortedError(absl::StrCat("rank ", dst, " stopped waiting for rank ", src,
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
      each->messages.clear();
    }
    each->arrived.notify_all();
  }
}

absl::Status ExecutePlanOnHost(const Plan& plan, int rank, const HostAllReduceArgs& args,
                               HostTransport& transport) {
  // Any failure aborts the transport so that the peers waiting on this rank return too.
  auto fail = [&transport](absl::Status status) {
    transport.Abort(status);
    return status;
  };
  if (absl::Status status = ValidateArgs(plan, rank, args, transport); !status.ok()) {
    return fail(std::move(status));
  }
  absl::StatusOr<std::vector<RankStep>> steps = RankSteps(plan, rank);
  if (!steps.ok()) return fail(steps.status());

  // Byte offset where each chunk starts; chunk c spans [offsets[c], offsets[c + 1]).
  const int64_t element_size = DataTypeSize(args.type);
  std::vector<int64_t> offsets(plan.num_chunks + 1);
  for (int chunk = 0; chunk < plan.num_chunks; ++chunk) {
    offsets[chunk] = ChunkElements(args.count, plan.num_chunks, chunk).begin * element_size;
  }
  offsets[plan.num_chunks] = args.count * element_size;

  std::byte* data = static_cast<std::byte*>(args.recv);
  if (args.count > 0 && args.send != args.recv) {
    std::memcpy(data, args.send, args.count * element_size);
  }

  const MessageHeader own_header{.count = args.count,
                                 .round = 0,
                                 .type = static_cast<uint8_t>(args.type),
                                 .op = static_cast<uint8_t>(args.op),
                                 .padding = {}};
  absl::InlinedVector<absl::Span<const std::byte>, 4> pieces;
  for (const RankStep& step : *steps) {
    if (step.send != nullptr) {
      // Sending first snapshots the chunks as of the start of the round, which is what the plan
      // contract requires even when this rank also receives one of them in this round. Every
      // transfer is a message, even with empty chunks, so FIFO order and header checks hold for
      // any count.
      MessageHeader header = own_header;
      header.round = step.round;
      pieces.clear();
      pieces.push_back({reinterpret_cast<const std::byte*>(&header), sizeof(header)});
      for (int32_t chunk : step.send->chunks) {
        pieces.push_back(
            {data + offsets[chunk], static_cast<size_t>(offsets[chunk + 1] - offsets[chunk])});
      }
      transport.SendGather(rank, step.send->dst, pieces);
    }
    if (step.receive != nullptr) {
      const Transfer& transfer = *step.receive;
      absl::StatusOr<std::vector<std::byte>> message =
          transport.Receive(transfer.src, rank, args.timeout);
      if (!message.ok()) return fail(message.status());
      if (message->size() < sizeof(MessageHeader)) {
        return fail(absl::InternalError(absl::StrCat("rank ", rank, " got a ", message->size(),
                                                     "-byte message from rank ", transfer.src)));
      }
      MessageHeader header;
      std::memcpy(&header, message->data(), sizeof(header));
      if (absl::Status status = CheckHeader(header, step.round, transfer.src, rank, args);
          !status.ok()) {
        return fail(std::move(status));
      }
      int64_t expected_bytes = sizeof(MessageHeader);
      for (int32_t chunk : transfer.chunks) expected_bytes += offsets[chunk + 1] - offsets[chunk];
      if (static_cast<int64_t>(message->size()) != expected_bytes) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("mismatched plans across ranks: rank ", rank, " expected ", expected_bytes,
                         " bytes from rank ", transfer.src, " in round ", step.round, ", got ",
                         message->size())));
      }
      const std::byte* incoming = message->data() + sizeof(MessageHeader);
      for (int32_t chunk : transfer.chunks) {
        const int64_t bytes = offsets[chunk + 1] - offsets[chunk];
        if (bytes == 0) continue;  // empty chunk (count < num_chunks); `data` may be null
        if (transfer.op == TransferOp::kReduce) {
          ReduceInto(args.type, args.op, data + offsets[chunk], incoming, bytes / element_size);
        } else {
          std::memcpy(data + offsets[chunk], incoming, bytes);
        }
        incoming += bytes;
      }
    }
  }
  if (args.op == ReduceOp::kAvg && args.count > 0) {
    FinalizeReduction(args.type, args.op, data, args.count, plan.num_ranks);
  }
  return absl::OkStatus();
}

}  // namespace stragglar
