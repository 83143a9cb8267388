#include "kernels/exec/mpi/mpi_executor.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/exec/library_code.h"
#include "kernels/exec/mpi/mpi_link_class_queues.h"
#include "kernels/exec/mpi/mpi_messages.h"
#include "kernels/exec/mpi/mpi_network.h"
#include "kernels/program/link_class_queues.h"

namespace stragglar {
namespace {

// Segments received ahead of the one being added: enough to keep the peer copying while this
// rank reduces, few enough that they stay in cache.
constexpr int64_t kSegmentWindow = 2;

// How one step's transfers travel: how many messages each way and of what size, whether the
// receive streams through a window of segments, and where it lands.
struct StepLayout {
  int64_t send_bytes = 0;
  int64_t receive_bytes = 0;
  int64_t send_segments = 0;
  int64_t send_segment_bytes = 0;
  int64_t segments = 0;  // of the receive
  int64_t segment_bytes = 0;
  // Network transfers wait for their receiver: it says it is ready (ReadyTag), then the sender
  // posts its messages.
  bool send_waits_for_ready = false;
  bool receive_says_ready = false;
  bool overlap = false;  // the receive lands in chunks this step also sends
  bool streaming = false;
  int64_t window = 0;
  bool received_in_place = false;  // a copy into consecutive chunks not sent: straight to result
};

// One call of a program over MPI.
class MpiCall {
 public:
  MpiCall(const RankProgram& program, const AllReduceArgs& args, const MpiExecutorOptions& options,
          MPI_Comm comm, CallProgress* progress, MpiAlarm* alarm)
      : program_(program),
        messages_(program, args),
        options_(options),
        comm_(comm),
        progress_(progress),
        alarm_(alarm) {}

  absl::Status Run();

 private:
  // The messages that carry a transfer of `bytes` with `peer`. Sender and receiver compute it
  // alike: the pair's nodes are the same either way.
  struct Cut {
    MessageCut messages;
    bool network = false;  // cut for the network (network_message_bytes)
  };
  Cut Segments(TransferOp op, int64_t bytes, int32_t peer) const {
    const int per_node = options_.ranks_per_node;
    const bool remote = per_node > 0 && peer / per_node != program_.rank / per_node;
    const bool network = remote && options_.network_message_bytes > 0;
    const int64_t size = network                     ? options_.network_message_bytes
                         : op == TransferOp::kReduce ? options_.reduce_segment_bytes
                                                     : 0;
    return {.messages = MessageCut::Of(bytes, size), .network = network};
  }
  // Segment j of a message starts at byte j * size of it.
  static int64_t SegmentLength(int64_t total, int64_t size, int64_t count, int64_t segment) {
    return MessageCut{.size = size, .count = count}.Length(total, segment);
  }
  StepLayout LayoutOf(const ProgramStep& step) const;
  absl::Status RunStep(const ProgramStep& step);
  void Waiting(int32_t peer, int32_t round) {
    if (progress_ != nullptr) progress_->Waiting(peer, round);
  }
  // PMPI_Waitany over `requests` and the alarm: the index that completed (MPI_UNDEFINED at once
  // when every one is MPI_REQUEST_NULL), or Interrupted() when the alarm came first.
  absl::StatusOr<int> WaitAny(absl::Span<MPI_Request> requests, MPI_Status* status);
  // After a failed step: cancels the receives still posted, and lets go of the sends.
  void Abandon();
  absl::Status Wait(MPI_Request* request, MPI_Status* status) {
    absl::StatusOr<int> done = WaitAny(absl::MakeSpan(request, 1), status);
    return done.ok() ? absl::OkStatus() : done.status();
  }
  // The tag of round `round`'s ready message (set by Run when network messages are on).
  int ReadyTag(int32_t round) const { return ready_tags_->Of(round); }
  absl::Status PostReceive(const ProgramStep& step, const StepLayout& layout, int64_t segment);
  // The step's first sends (at most kSendsInFlight), then more as those complete: waiting for a
  // receive (WaitReceive) or for sends (FinishSendsThrough) posts the later ones meanwhile.
  absl::Status PostSends(const ProgramStep& step, const StepLayout& layout);
  absl::Status PostMoreSends(const ProgramStep& step, const StepLayout& layout);
  absl::Status FinishSendsThrough(const ProgramStep& step, const StepLayout& layout, int64_t last);
  absl::Status WaitReceive(const ProgramStep& step, const StepLayout& layout, MPI_Request* receive,
                           MPI_Status* status);
  const RankProgram& program_;
  const MpiMessages messages_;
  const MpiExecutorOptions& options_;
  MPI_Comm comm_;
  std::optional<ReadyTags> ready_tags_;
  CallProgress* progress_;                // may be null
  MpiAlarm* alarm_;                       // may be null
  std::byte* target_ = nullptr;           // where the current step's receive lands
  const std::byte* send_data_ = nullptr;  // what the current step sends
  int64_t sends_posted_ = 0;              // of the current step's send segments
  int64_t sends_done_ = 0;
};

// Per thread, reused across calls: incoming segments, the outgoing message when its chunks are
// not adjacent in memory, and the requests.
thread_local std::vector<std::byte> incoming, outgoing;
thread_local std::vector<MPI_Request> send_requests, receive_requests;

absl::StatusOr<int> MpiCall::WaitAny(absl::Span<MPI_Request> requests, MPI_Status* status) {
  MPI_Request pending[3];
  const int count = static_cast<int>(requests.size());
  bool any = false;
  for (int i = 0; i < count; ++i) {
    pending[i] = requests[i];
    any = any || pending[i] != MPI_REQUEST_NULL;
  }
  // Nothing to wait for: as MPI_Wait on MPI_REQUEST_NULL, not a wait for the alarm alone.
  if (!any) return MPI_UNDEFINED;
  const bool alarmed = alarm_ != nullptr;
  if (alarmed) pending[count] = alarm_->request();
  int index = MPI_UNDEFINED;
  const int code = PMPI_Waitany(count + (alarmed ? 1 : 0), pending, &index, status);
  for (int i = 0; i < count; ++i) requests[i] = pending[i];
  if (alarmed) alarm_->request() = pending[count];
  if (code != MPI_SUCCESS) return MpiCallFailed("MPI_Waitany", code);
  if (alarmed && index == count) return MpiAlarm::Interrupted();
  return index;
}

StepLayout MpiCall::LayoutOf(const ProgramStep& step) const {
  StepLayout layout;
  const bool sends = step.send_peer >= 0;
  const bool receives = step.receive_peer >= 0;
  layout.send_bytes = messages_.ExtentsBytes(step.first_send, step.num_sends);
  layout.receive_bytes = messages_.ExtentsBytes(step.first_receive, step.num_receives);
  // Inside a node only reduce transfers are cut; a copy is one message whatever its size.
  if (sends) {
    const Cut cut = Segments(step.send_op, layout.send_bytes, step.send_peer);
    layout.send_segment_bytes = cut.messages.size;
    layout.send_segments = cut.messages.count;
    layout.send_waits_for_ready = cut.network;
  }
  if (receives) {
    const Cut cut = Segments(step.receive_op, layout.receive_bytes, step.receive_peer);
    layout.segment_bytes = cut.messages.size;
    layout.segments = cut.messages.count;
    layout.receive_says_ready = cut.network;
  }
  for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
    layout.overlap = layout.overlap || program_.extents[i].overlaps_send;
  }
  // The same chunks both ways, cut alike: segment j is added once segment j has left, so the
  // receive streams through a window of segments. Any other overlap receives the whole message
  // first (a window could deadlock two ranks each waiting on the other's send). Network messages
  // are all posted at once: a window would hold the next ones back for a handshake of ours.
  layout.streaming =
      layout.segments > 1 && !layout.receive_says_ready &&
      (!layout.overlap || (step.same_chunks_both_ways && layout.send_segments == layout.segments &&
                           layout.send_segment_bytes == layout.segment_bytes));
  layout.window = layout.streaming ? std::min(kSegmentWindow, layout.segments) : layout.segments;
  layout.received_in_place = messages_.ReceivesInPlace(step);
  return layout;
}

absl::Status MpiCall::PostReceive(const ProgramStep& step, const StepLayout& layout,
                                  int64_t segment) {
  const int64_t slot = layout.streaming ? segment % layout.window : segment;
  absl::StatusOr<WireMessage> wire = WireMessage::Of(
      SegmentLength(layout.receive_bytes, layout.segment_bytes, layout.segments, segment),
      options_.max_message_bytes);
  if (!wire.ok()) return wire.status();
  if (int code = PMPI_Irecv(target_ + slot * layout.segment_bytes, wire->count(), wire->type(),
                            step.receive_peer, step.round, comm_, &receive_requests[slot]);
      code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Irecv", code);
  }
  return absl::OkStatus();
}

absl::Status MpiCall::PostSends(const ProgramStep& step, const StepLayout& layout) {
  send_requests.assign(layout.send_segments, MPI_REQUEST_NULL);
  sends_posted_ = sends_done_ = 0;
  if (step.send_peer < 0) return absl::OkStatus();
  send_data_ = messages_.SendData(step, outgoing);
  return PostMoreSends(step, layout);
}

absl::Status MpiCall::PostMoreSends(const ProgramStep& step, const StepLayout& layout) {
  for (; sends_posted_ < layout.send_segments && sends_posted_ - sends_done_ < kSendsInFlight;
       ++sends_posted_) {
    const int64_t segment = sends_posted_;
    absl::StatusOr<WireMessage> wire = WireMessage::Of(
        SegmentLength(layout.send_bytes, layout.send_segment_bytes, layout.send_segments, segment),
        options_.max_message_bytes);
    if (!wire.ok()) return wire.status();
    if (int code =
            PMPI_Isend(send_data_ + segment * layout.send_segment_bytes, wire->count(),
                       wire->type(), step.send_peer, step.round, comm_, &send_requests[segment]);
        code != MPI_SUCCESS) {
      return MpiCallFailed("MPI_Isend", code);
    }
  }
  return absl::OkStatus();
}

absl::Status MpiCall::FinishSendsThrough(const ProgramStep& step, const StepLayout& layout,
                                         int64_t last) {
  for (; sends_done_ <= last && sends_done_ < sends_posted_; ++sends_done_) {
    if (absl::Status sent = Wait(&send_requests[sends_done_], MPI_STATUS_IGNORE); !sent.ok()) {
      return sent;
    }
    if (absl::Status status = PostMoreSends(step, layout); !status.ok()) return status;
  }
  return absl::OkStatus();
}

// While sends are held back, the oldest one is waited for beside the receive: the peer may be
// waiting for a later one before it sends what this rank receives.
absl::Status MpiCall::WaitReceive(const ProgramStep& step, const StepLayout& layout,
                                  MPI_Request* receive, MPI_Status* status) {
  while (sends_posted_ < layout.send_segments) {
    MPI_Request pending[2] = {*receive, send_requests[sends_done_]};
    absl::StatusOr<int> index = WaitAny(absl::MakeSpan(pending), status);
    *receive = pending[0];
    send_requests[sends_done_] = pending[1];
    if (!index.ok()) return index.status();
    if (*index == 0) return absl::OkStatus();
    ++sends_done_;
    if (absl::Status posted = PostMoreSends(step, layout); !posted.ok()) return posted;
  }
  return Wait(receive, status);
}

absl::Status MpiCall::RunStep(const ProgramStep& step) {
  const StepLayout layout = LayoutOf(step);
  if (step.receive_peer >= 0) {
    if (layout.received_in_place) {
      target_ = messages_.ResultChunk(program_.extents[step.first_receive].first_chunk);
    } else {
      const int64_t buffer =
          layout.streaming ? layout.window * layout.segment_bytes : layout.receive_bytes;
      if (incoming.size() < static_cast<size_t>(buffer)) incoming.resize(buffer);
      target_ = incoming.data();
    }
  }
  receive_requests.assign(layout.window, MPI_REQUEST_NULL);
  for (int64_t segment = 0; segment < layout.window; ++segment) {
    if (absl::Status status = PostReceive(step, layout, segment); !status.ok()) return status;
  }
  // Over the network a message that reaches a peer still receiving another one shares its link
  // with it, and both arrive late; a peer that has not entered this step would also hold up the
  // rounds after it. So the receiver says when it is ready, and the sender waits for that. Every
  // rank says so before it waits for anything, so the waits are the plan's own. Between emulated
  // hosts, exchanges of 352 KiB among 4 hosts rotating peers took 2.2x those between fixed pairs
  // without this, 1.0x with it (raw TCP, docs/cluster.md).
  MPI_Request ready = MPI_REQUEST_NULL;
  if (layout.receive_says_ready) {
    if (int code = PMPI_Isend(nullptr, 0, MPI_BYTE, step.receive_peer, ReadyTag(step.round), comm_,
                              &ready);
        code != MPI_SUCCESS) {
      return MpiCallFailed("MPI_Isend", code);
    }
  }
  if (layout.send_waits_for_ready) {
    Waiting(step.send_peer, step.round);
    MPI_Request peer_ready = MPI_REQUEST_NULL;
    if (int code = PMPI_Irecv(nullptr, 0, MPI_BYTE, step.send_peer, ReadyTag(step.round), comm_,
                              &peer_ready);
        code != MPI_SUCCESS) {
      return MpiCallFailed("MPI_Irecv", code);
    }
    if (absl::Status came = Wait(&peer_ready, MPI_STATUS_IGNORE); !came.ok()) {
      PMPI_Cancel(&peer_ready);
      PMPI_Wait(&peer_ready, MPI_STATUS_IGNORE);
      return came;
    }
  }
  if (absl::Status status = PostSends(step, layout); !status.ok()) return status;
  for (int64_t segment = 0; segment < layout.segments; ++segment) {
    const int64_t slot = layout.streaming ? segment % layout.window : segment;
    MPI_Status status;
    Waiting(step.receive_peer, step.round);
    if (absl::Status waited = WaitReceive(step, layout, &receive_requests[slot], &status);
        !waited.ok()) {
      return waited;
    }
    const int64_t length =
        SegmentLength(layout.receive_bytes, layout.segment_bytes, layout.segments, segment);
    absl::StatusOr<WireMessage> wire = WireMessage::Of(length, options_.max_message_bytes);
    if (!wire.ok()) return wire.status();
    const int64_t received = wire->ReceivedBytes(status);
    if (received != length) {
      return MismatchedCounts(step.receive_peer, received, step.round, program_.rank, length);
    }
    if (layout.overlap) {
      // Streaming: segment j of the send; otherwise all of it.
      const int64_t last = layout.streaming ? segment : layout.send_segments - 1;
      if (absl::Status sent = FinishSendsThrough(step, layout, last); !sent.ok()) return sent;
    }
    if (!layout.received_in_place) {
      const int64_t begin = segment * layout.segment_bytes;
      messages_.Apply(step, begin, begin + length, target_ + slot * layout.segment_bytes);
    }
    if (layout.streaming && segment + layout.window < layout.segments) {
      if (absl::Status status = PostReceive(step, layout, segment + layout.window); !status.ok()) {
        return status;
      }
    }
  }
  Waiting(step.send_peer, step.round);
  if (absl::Status sent = FinishSendsThrough(step, layout, layout.send_segments - 1); !sent.ok()) {
    return sent;
  }
  return Wait(&ready, MPI_STATUS_IGNORE);
}

absl::Status MpiCall::Run() {
  if (options_.network_message_bytes > 0 && options_.ranks_per_node > 0) {
    absl::StatusOr<ReadyTags> tags = ReadyTags::For(comm_, program_);
    if (!tags.ok()) return tags.status();
    ready_tags_ = *tags;
  }
  for (const ProgramStep& step : program_.steps) {
    if (absl::Status status = RunStep(step); !status.ok()) {
      Abandon();
      return status;
    }
  }
  messages_.Finish();
  return absl::OkStatus();
}

void MpiCall::Abandon() {
  // A receive left posted would land in buffers that later calls use, should a message of a
  // peer's later call match it.
  for (MPI_Request& receive : receive_requests) {
    if (receive == MPI_REQUEST_NULL) continue;
    PMPI_Cancel(&receive);
    PMPI_Wait(&receive, MPI_STATUS_IGNORE);
  }
  for (MPI_Request& send : send_requests) {
    if (send != MPI_REQUEST_NULL) PMPI_Request_free(&send);
  }
}

}  // namespace

absl::Status MpiCallFailed(absl::string_view call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (PMPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return WithLibraryCode(
      absl::InternalError(absl::StrCat(call, " failed: ", absl::string_view(text, length))), code);
}

absl::Status MismatchedCounts(int32_t peer, int64_t received, int32_t round, int32_t rank,
                              int64_t expected) {
  return WithLibraryCode(absl::InvalidArgumentError(absl::StrCat(
                             "mismatched counts across ranks: rank ", peer, " sent ", received,
                             " bytes in round ", round, ", rank ", rank, " expected ", expected)),
                         MPI_ERR_TRUNCATE);
}

namespace {

absl::Status RunProgramWithMpi(const RankProgram& program, const AllReduceArgs& args,
                               const MpiExecutorOptions& options, MPI_Comm comm,
                               CallProgress* progress, MpiAlarm* alarm) {
  int size = 0;
  if (int code = PMPI_Comm_size(comm, &size); code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Comm_size", code);
  }
  if (program.num_ranks != size || program.rank < 0 || program.rank >= size ||
      program.num_chunks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan for ", program.num_ranks, " ranks does not fit rank ", program.rank, " of ", size));
  }
  if (absl::Status status = CheckAllReduceArgs(program, args); !status.ok()) return status;
  for (const auto& [name, bytes] :
       {std::pair<const char*, int64_t>{"reduce segments", options.reduce_segment_bytes},
        {"network messages", options.network_message_bytes}}) {
    if (bytes < 0 || bytes % 16 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " of ", bytes, " bytes: not a multiple of 16"));
    }
  }
  if (options.max_message_bytes < 1 ||
      options.max_message_bytes > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "messages of at most ", options.max_message_bytes, " bytes: from 1 byte to INT_MAX"));
  }
  if (options.ranks_per_node < 0 || (options.per_class_queues && options.ranks_per_node == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.per_class_queues ? "per-class queues" : "a machine", " of nodes of ",
                     options.ranks_per_node, " ranks"));
  }
  if (options.per_class_queues) {
    const LinkClassQueues queues = SplitByLinkClass(program, options.ranks_per_node);
    if (!queues.OneClass()) {
      return RunMpiOnLinkClassQueues(queues, MpiMessages(program, args), comm,
                                     {.network_message_bytes = options.network_message_bytes,
                                      .max_message_bytes = options.max_message_bytes},
                                     alarm);
    }
    // A rank whose peers are all in one class runs its rounds in order, but its messages must
    // still be cut as its peers on queues cut theirs: one per transfer inside the node, network
    // messages and their handshake with other nodes.
    const MpiExecutorOptions as_queues{.ranks_per_node = options.ranks_per_node,
                                       .network_message_bytes = options.network_message_bytes,
                                       .max_message_bytes = options.max_message_bytes};
    return MpiCall(program, args, as_queues, comm, progress, alarm).Run();
  }
  return MpiCall(program, args, options, comm, progress, alarm).Run();
}

}  // namespace

absl::Status mpi::Run(const RankProgram& program, const AllReduceArgs& args,
                      const MpiExecutorOptions& options, MPI_Comm comm, CallProgress* progress,
                      MpiAlarm* alarm) {
  absl::Status status = RunProgramWithMpi(program, args, options, comm, progress, alarm);
  // This rank cannot finish the call: its peers must not wait for it (unless one of them said
  // so first).
  if (!status.ok() && alarm != nullptr && !alarm->Raised()) alarm->Raise();
  return status;
}

}  // namespace stragglar
