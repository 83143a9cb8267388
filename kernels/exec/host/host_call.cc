#include "kernels/exec/host/host_call.h"

#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

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

absl::Status CheckHeader(const MessageHeader& header, int round, int sender, int rank,
                         const AllReduceArgs& args) {
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

// Checks a borrowed message against what this rank expects before anything is applied: one
// span per chunk of the step's receive, each of that chunk's size.
absl::Status CheckMessage(const HostTransport::BorrowedMessage& message, const RankProgram& program,
                          const ProgramStep& step, const AllReduceArgs& args,
                          const std::vector<int64_t>& offsets) {
  if (message.header.size() != sizeof(MessageHeader)) {
    return absl::InternalError(absl::StrCat("rank ", program.rank, " got a message with a ",
                                            message.header.size(), "-byte header from rank ",
                                            step.receive_peer));
  }
  MessageHeader header;
  std::memcpy(&header, message.header.data(), sizeof(header));
  if (absl::Status status = CheckHeader(header, step.round, step.receive_peer, program.rank, args);
      !status.ok()) {
    return status;
  }
  int64_t expected_bytes = 0, got_bytes = 0;
  bool same_layout = static_cast<int32_t>(message.spans.size()) == step.receive_chunks;
  size_t at = 0;
  for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
    const ProgramExtent& extent = program.extents[i];
    for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c, ++at) {
      const int64_t bytes = offsets[c + 1] - offsets[c];
      expected_bytes += bytes;
      same_layout = same_layout && static_cast<int64_t>(message.spans[at].size()) == bytes;
    }
  }
  for (absl::Span<const std::byte> span : message.spans) got_bytes += span.size();
  if (!same_layout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mismatched plans across ranks: rank ", program.rank, " expected ", expected_bytes,
        " bytes in ", step.receive_chunks, " chunks from rank ", step.receive_peer, " in round ",
        step.round, ", got ", got_bytes, " in ", message.spans.size()));
  }
  return absl::OkStatus();
}

}  // namespace

HostCall::HostCall(const RankProgram& program, const AllReduceArgs& args, absl::Duration timeout,
                   HostTransport& transport)
    : program_(program),
      args_(args),
      buffers_(program, args),
      timeout_(timeout),
      transport_(transport),
      rank_(program.rank),
      last_loan_(program.num_ranks, -1),
      tickets_(program.steps.size(), -1) {}

absl::Status HostCall::Fail(absl::Status status) {
  transport_.Abort(status);
  (void)WaitForLoans(absl::InfiniteDuration());
  return status;
}

absl::Status HostCall::WaitForLoans(absl::Duration timeout) {
  absl::Status result;
  for (int peer = 0; peer < static_cast<int>(last_loan_.size()); ++peer) {
    if (last_loan_[peer] < 0) continue;
    result.Update(transport_.WaitReturned(rank_, peer, last_loan_[peer], timeout));
  }
  return result;
}

bool HostCall::StillLent(const ProgramExtent& extent) const {
  for (int32_t w = extent.first_wait; w < extent.first_wait + extent.num_waits; ++w) {
    const int32_t step = program_.waits[w];
    if (!transport_
             .WaitReturned(rank_, program_.steps[step].send_peer, tickets_[step],
                           absl::ZeroDuration())
             .ok()) {
      return true;
    }
  }
  return false;
}

void HostCall::Send(int32_t index) {
  const ProgramStep& step = program_.steps[index];
  // Lending first hands out the chunks as of the start of the round, which is what the plan
  // contract requires even when this rank also receives one of them in this round. Every
  // transfer is a message, even with empty chunks, so FIFO order and header checks hold for any
  // count.
  const MessageHeader header{.count = args_.count,
                             .round = step.round,
                             .type = static_cast<uint8_t>(args_.type),
                             .op = static_cast<uint8_t>(args_.op),
                             .padding = {}};
  absl::InlinedVector<absl::Span<const std::byte>, 4> spans;
  for (int32_t i = step.first_send; i < step.first_send + step.num_sends; ++i) {
    const ProgramExtent& extent = program_.extents[i];
    for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c) {
      spans.push_back(
          {buffers_.Own(extent.buffer, c), static_cast<size_t>(buffers_.ChunkBytes(c))});
    }
  }
  tickets_[index] = last_loan_[step.send_peer] = transport_.Lend(
      rank_, step.send_peer, {reinterpret_cast<const std::byte*>(&header), sizeof(header)}, spans);
}

absl::Status HostCall::Receive(int32_t index) {
  const ProgramStep& step = program_.steps[index];
  absl::StatusOr<HostTransport::BorrowedMessage> message =
      transport_.Borrow(step.receive_peer, rank_, timeout_);
  if (!message.ok()) return message.status();
  if (absl::Status status = CheckMessage(*message, program_, step, args_, buffers_.offsets());
      !status.ok()) {
    transport_.Return(step.receive_peer, rank_);
    return status;
  }
  // Where results wait while their chunk is still being read (a two-way exchange of one chunk).
  // Per thread, so a rank reuses it across calls instead of allocating each time.
  thread_local std::vector<std::byte> scratch;
  struct Deferred {
    const ProgramExtent* extent;
    int32_t chunk;
    int64_t scratch_offset;
  };
  absl::InlinedVector<Deferred, 4> deferred;
  int64_t scratch_bytes = 0;
  size_t at = 0;  // the message's span: one per chunk of the transfer
  for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
    const ProgramExtent& extent = program_.extents[i];
    const bool lent = StillLent(extent);
    for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c, ++at) {
      const int64_t bytes = buffers_.ChunkBytes(c);
      if (bytes == 0) continue;  // empty chunk (count < num_chunks); the buffers may be null
      std::byte* target = buffers_.ResultChunk(c);
      if (lent) {
        deferred.push_back({&extent, c, scratch_bytes});
        scratch_bytes += bytes;
        if (scratch.size() < static_cast<size_t>(scratch_bytes)) scratch.resize(scratch_bytes);
        target = scratch.data() + deferred.back().scratch_offset;
      }
      const std::byte* incoming = message->spans[at].data();
      const std::byte* own = buffers_.Own(extent.buffer, c);
      if (step.receive_op == TransferOp::kCopy) {
        std::memcpy(target, incoming, bytes);
      } else if (target == own) {
        ReduceInto(args_.type, args_.op, target, incoming, bytes / buffers_.element_size());
      } else {
        Reduce(args_.type, args_.op, target, own, incoming, bytes / buffers_.element_size());
      }
    }
  }
  // The sender may change its chunks as soon as they are returned; nothing reads them after.
  transport_.Return(step.receive_peer, rank_);
  for (const Deferred& each : deferred) {
    const ProgramExtent& extent = *each.extent;
    for (int32_t w = extent.first_wait; w < extent.first_wait + extent.num_waits; ++w) {
      const int32_t lender = program_.waits[w];
      if (absl::Status status = transport_.WaitReturned(rank_, program_.steps[lender].send_peer,
                                                        tickets_[lender], timeout_);
          !status.ok()) {
        return status;
      }
    }
    std::memcpy(buffers_.ResultChunk(each.chunk), scratch.data() + each.scratch_offset,
                buffers_.ChunkBytes(each.chunk));
  }
  return absl::OkStatus();
}

absl::Status HostCall::Finish() {
  // Peers may read this rank's buffers until they return the last loans; only then may the result
  // change (kAvg) or the caller reuse the buffers.
  if (absl::Status status = WaitForLoans(timeout_); !status.ok()) {
    return Fail(std::move(status));
  }
  FinishOnHost(program_, buffers_.offsets(), buffers_.input(), buffers_.result(), args_.count,
               args_.type, args_.op);
  return absl::OkStatus();
}

}  // namespace stragglar
