#include "kernels/mpi_executor.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/link_class_queues.h"
#include "kernels/mpi_call_buffers.h"
#include "kernels/mpi_link_class_queues.h"

namespace stragglar {
namespace {

// Segments received ahead of the one being added: enough to keep the peer copying while this
// rank reduces, few enough that they stay in cache.
constexpr int64_t kSegmentWindow = 2;

// How one step's transfers travel: how many messages each way, whether the receive streams
// through a window of segments, and where it lands.
struct StepLayout {
  int64_t send_bytes = 0;
  int64_t receive_bytes = 0;
  int64_t send_segments = 0;
  int64_t segments = 0;  // of the receive
  bool overlap = false;  // the receive lands in chunks this step also sends
  bool streaming = false;
  int64_t window = 0;
  bool received_in_place = false;  // a copy into consecutive chunks not sent: straight to result
};

// One call of a program over MPI.
class MpiCall {
 public:
  MpiCall(const RankProgram& program, const MpiAllReduceArgs& args, int64_t segment_bytes,
          MPI_Comm comm, int* mpi_error)
      : program_(program),
        buffers_(program, args),
        segment_bytes_(segment_bytes),
        comm_(comm),
        mpi_error_(mpi_error) {}

  absl::Status Run();

 private:
  // How many messages carry a transfer of `bytes`; sender and receiver compute it alike.
  int64_t SegmentCount(TransferOp op, int64_t bytes) const {
    if (op != TransferOp::kReduce || segment_bytes_ <= 0 || bytes <= segment_bytes_) return 1;
    return (bytes + segment_bytes_ - 1) / segment_bytes_;
  }
  // Segment j of a message starts at byte j * segment_bytes of it.
  int64_t SegmentLength(int64_t total, int64_t count, int64_t segment) const {
    return count == 1 ? total : std::min(segment_bytes_, total - segment * segment_bytes_);
  }
  StepLayout LayoutOf(const ProgramStep& step) const;
  absl::Status RunStep(const ProgramStep& step);
  absl::Status PostReceive(const ProgramStep& step, const StepLayout& layout, int64_t segment);
  absl::Status PostSends(const ProgramStep& step, const StepLayout& layout);
  const RankProgram& program_;
  const MpiCallBuffers buffers_;
  const int64_t segment_bytes_;
  MPI_Comm comm_;
  int* mpi_error_;
  std::byte* target_ = nullptr;  // where the current step's receive lands
};

// Per thread, reused across calls: incoming segments, the outgoing message when its chunks are
// not adjacent in memory, and the requests.
thread_local std::vector<std::byte> incoming, outgoing;
thread_local std::vector<MPI_Request> send_requests, receive_requests;

StepLayout MpiCall::LayoutOf(const ProgramStep& step) const {
  StepLayout layout;
  const bool sends = step.send_peer >= 0;
  const bool receives = step.receive_peer >= 0;
  layout.send_bytes = buffers_.PiecesBytes(step.first_send, step.num_sends);
  layout.receive_bytes = buffers_.PiecesBytes(step.first_receive, step.num_receives);
  // Only reduce transfers are cut; a copy is one message whatever its size.
  layout.send_segments = sends ? SegmentCount(step.send_op, layout.send_bytes) : 0;
  layout.segments = receives ? SegmentCount(step.receive_op, layout.receive_bytes) : 0;
  for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
    layout.overlap = layout.overlap || program_.pieces[i].overlaps_send;
  }
  // The same chunks both ways, cut alike: segment j is added once segment j has left, so the
  // receive streams through a window of segments. Any other overlap receives the whole message
  // first (a window could deadlock two ranks each waiting on the other's send).
  layout.streaming =
      layout.segments > 1 &&
      (!layout.overlap || (step.same_chunks_both_ways && layout.send_segments == layout.segments));
  layout.window = layout.streaming ? std::min(kSegmentWindow, layout.segments) : layout.segments;
  layout.received_in_place = buffers_.ReceivesInPlace(step);
  return layout;
}

absl::Status MpiCall::PostReceive(const ProgramStep& step, const StepLayout& layout,
                                  int64_t segment) {
  const int64_t slot = layout.streaming ? segment % layout.window : segment;
  if (int code = PMPI_Irecv(
          target_ + slot * segment_bytes_,
          static_cast<int>(SegmentLength(layout.receive_bytes, layout.segments, segment)), MPI_BYTE,
          step.receive_peer, step.round, comm_, &receive_requests[slot]);
      code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Irecv", code, mpi_error_);
  }
  return absl::OkStatus();
}

absl::Status MpiCall::PostSends(const ProgramStep& step, const StepLayout& layout) {
  send_requests.assign(layout.send_segments, MPI_REQUEST_NULL);
  if (step.send_peer < 0) return absl::OkStatus();
  const std::byte* data = buffers_.SendData(step, outgoing);
  for (int64_t segment = 0; segment < layout.send_segments; ++segment) {
    const int64_t length = SegmentLength(layout.send_bytes, layout.send_segments, segment);
    if (int code = PMPI_Isend(data + segment * segment_bytes_, static_cast<int>(length), MPI_BYTE,
                              step.send_peer, step.round, comm_, &send_requests[segment]);
        code != MPI_SUCCESS) {
      return MpiCallFailed("MPI_Isend", code, mpi_error_);
    }
  }
  return absl::OkStatus();
}

absl::Status MpiCall::RunStep(const ProgramStep& step) {
  const StepLayout layout = LayoutOf(step);
  if (std::max(layout.send_bytes, layout.receive_bytes) > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError("a transfer of 2 GiB or more does not fit one message");
  }
  if (step.receive_peer >= 0) {
    if (layout.received_in_place) {
      target_ = buffers_.ResultChunk(program_.pieces[step.first_receive].first_chunk);
    } else {
      const int64_t buffer =
          layout.segments == 1 ? layout.receive_bytes : layout.window * segment_bytes_;
      if (incoming.size() < static_cast<size_t>(buffer)) incoming.resize(buffer);
      target_ = incoming.data();
    }
  }
  receive_requests.assign(layout.window, MPI_REQUEST_NULL);
  for (int64_t segment = 0; segment < layout.window; ++segment) {
    if (absl::Status status = PostReceive(step, layout, segment); !status.ok()) return status;
  }
  if (absl::Status status = PostSends(step, layout); !status.ok()) return status;
  for (int64_t segment = 0; segment < layout.segments; ++segment) {
    const int64_t slot = layout.streaming ? segment % layout.window : segment;
    MPI_Status status;
    if (int code = PMPI_Wait(&receive_requests[slot], &status); code != MPI_SUCCESS) {
      return MpiCallFailed("MPI_Wait", code, mpi_error_);
    }
    const int64_t length = SegmentLength(layout.receive_bytes, layout.segments, segment);
    int received = 0;
    PMPI_Get_count(&status, MPI_BYTE, &received);
    if (received != length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mismatched counts across ranks: rank ", step.receive_peer, " sent ", received,
          " bytes in round ", step.round, ", rank ", program_.rank, " expected ", length));
    }
    if (layout.overlap) {
      // Streaming: segment j of the send; otherwise all of it.
      const int waits = layout.streaming ? 1 : static_cast<int>(send_requests.size());
      if (int code = PMPI_Waitall(waits, send_requests.data() + (layout.streaming ? segment : 0),
                                  MPI_STATUSES_IGNORE);
          code != MPI_SUCCESS) {
        return MpiCallFailed("MPI_Waitall", code, mpi_error_);
      }
    }
    if (!layout.received_in_place) {
      const int64_t begin = segment * segment_bytes_;
      buffers_.Apply(step, begin, begin + length, target_ + slot * segment_bytes_);
    }
    if (layout.streaming && segment + layout.window < layout.segments) {
      if (absl::Status status = PostReceive(step, layout, segment + layout.window); !status.ok()) {
        return status;
      }
    }
  }
  if (int code = PMPI_Waitall(static_cast<int>(send_requests.size()), send_requests.data(),
                              MPI_STATUSES_IGNORE);
      code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Waitall", code, mpi_error_);
  }
  return absl::OkStatus();
}

absl::Status MpiCall::Run() {
  for (const ProgramStep& step : program_.steps) {
    if (absl::Status status = RunStep(step); !status.ok()) return status;
  }
  buffers_.Finish();
  return absl::OkStatus();
}

}  // namespace

absl::Status MpiCallFailed(absl::string_view call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (PMPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return absl::InternalError(absl::StrCat(call, " failed: ", absl::string_view(text, length)));
}

absl::Status MpiCallFailed(absl::string_view call, int code, int* mpi_error) {
  *mpi_error = code;
  return MpiCallFailed(call, code);
}

absl::Status ExecuteProgramWithMpi(const RankProgram& program, const MpiAllReduceArgs& args,
                                   const MpiExecutorOptions& options, MPI_Comm comm,
                                   int* mpi_error) {
  *mpi_error = MPI_SUCCESS;
  int size = 0;
  if (int code = PMPI_Comm_size(comm, &size); code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Comm_size", code, mpi_error);
  }
  if (program.num_ranks != size || program.rank < 0 || program.rank >= size ||
      program.num_chunks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan for ", program.num_ranks, " ranks does not fit rank ", program.rank, " of ", size));
  }
  if (args.count < 0 || (args.count > 0 && (args.send == nullptr || args.recv == nullptr))) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", program.rank, ": bad count ", args.count, " or null buffer"));
  }
  if (args.count > 0 && program.placement.in_place != (args.send == args.recv)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", program.rank, ": the program was lowered for ",
                     program.placement.in_place ? "in-place" : "out-of-place", " buffers"));
  }
  const int64_t segment_bytes = options.reduce_segment_bytes;
  if (segment_bytes < 0 || segment_bytes % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce segments of ", segment_bytes, " bytes: not a multiple of 16"));
  }
  if (options.ranks_per_node < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("per-class queues for nodes of ", options.ranks_per_node, " ranks"));
  }
  if (options.ranks_per_node > 0) {
    const LinkClassQueues queues = SplitByLinkClass(program, options.ranks_per_node);
    if (!queues.OneClass()) {
      return RunMpiOnLinkClassQueues(queues, MpiCallBuffers(program, args), comm, mpi_error);
    }
    // A rank whose peers are all in one class runs its rounds in order, but its messages must
    // still be cut as its peers on queues cut theirs: one per transfer.
    return MpiCall(program, args, /*segment_bytes=*/0, comm, mpi_error).Run();
  }
  return MpiCall(program, args, segment_bytes, comm, mpi_error).Run();
}

}  // namespace stragglar
