#include "kernels/mpi_executor.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/rank_steps.h"

namespace stragglar {
namespace {

// Segments received ahead of the one being added: enough to keep the peer copying while this
// rank reduces, few enough that they stay in cache.
constexpr int64_t kSegmentWindow = 2;
absl::Status MpiFailure(absl::string_view call, int code, int* mpi_error) {
  *mpi_error = code;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (PMPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return absl::InternalError(absl::StrCat(call, " failed: ", absl::string_view(text, length)));
}

// How many messages carry a transfer of `bytes`; sender and receiver compute it alike.
int64_t SegmentCount(const Transfer& transfer, int64_t bytes, int64_t segment_bytes) {
  if (transfer.op != TransferOp::kReduce || segment_bytes <= 0 || bytes <= segment_bytes) return 1;
  return (bytes + segment_bytes - 1) / segment_bytes;
}

}  // namespace

absl::Status ExecutePlanWithMpi(const Plan& plan, int rank, const MpiAllReduceArgs& args,
                                const MpiExecutorOptions& options, MPI_Comm comm, int* mpi_error) {
  *mpi_error = MPI_SUCCESS;
  int size = 0;
  if (int code = PMPI_Comm_size(comm, &size); code != MPI_SUCCESS) {
    return MpiFailure("MPI_Comm_size", code, mpi_error);
  }
  if (plan.num_ranks != size || rank < 0 || rank >= size || plan.num_chunks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan for ", plan.num_ranks, " ranks does not fit rank ", rank, " of ", size));
  }
  if (args.count < 0 || (args.count > 0 && (args.send == nullptr || args.recv == nullptr))) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": bad count ", args.count, " or null buffer"));
  }
  const int64_t segment_bytes = options.reduce_segment_bytes;
  if (segment_bytes < 0 || segment_bytes % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce segments of ", segment_bytes, " bytes: not a multiple of 16"));
  }
  absl::StatusOr<std::vector<RankStep>> steps = RankSteps(plan, rank);
  if (!steps.ok()) return steps.status();
  const int64_t element_size = DataTypeSize(args.type);
  const std::vector<int64_t> offsets = ChunkByteOffsets(args.count, element_size, plan.num_chunks);
  auto chunk_bytes = [&offsets](int32_t chunk) { return offsets[chunk + 1] - offsets[chunk]; };
  auto message_bytes = [&](const Transfer& transfer) {
    int64_t total = 0;
    for (int32_t chunk : transfer.chunks) total += chunk_bytes(chunk);
    return total;
  };

  const std::byte* input = static_cast<const std::byte*>(args.send);
  std::byte* result = static_cast<std::byte*>(args.recv);
  // Out of place, a chunk is read from `send` until this rank first writes it into `recv`.
  std::vector<bool> written(plan.num_chunks, input == result);
  auto current = [&](int32_t chunk) -> const std::byte* {
    return (written[chunk] ? result : input) + offsets[chunk];
  };
  // Adds or copies bytes [begin, end) of a received message, held at `data`, into the chunks
  // they belong to, as those chunks stood at the start of the round.
  auto apply = [&](const Transfer& transfer, int64_t begin, int64_t end, const std::byte* data) {
    int64_t chunk_begin = 0;  // where the chunk starts in the message
    for (int32_t chunk : transfer.chunks) {
      const int64_t chunk_end = chunk_begin + chunk_bytes(chunk);
      const int64_t from = std::max(begin, chunk_begin), to = std::min(end, chunk_end);
      if (from < to) {
        const int64_t within = from - chunk_begin;
        std::byte* target = result + offsets[chunk] + within;
        const std::byte* incoming = data + (from - begin);
        const int64_t elements = (to - from) / element_size;
        if (transfer.op == TransferOp::kCopy) {
          std::memcpy(target, incoming, to - from);
        } else if (written[chunk]) {
          ReduceInto(args.type, args.op, target, incoming, elements);
        } else {
          Reduce(args.type, args.op, target, current(chunk) + within, incoming, elements);
        }
      }
      chunk_begin = chunk_end;
    }
  };
  // Per thread, reused across calls: incoming segments, the outgoing message when its chunks are
  // not adjacent in memory, and the requests.
  thread_local std::vector<std::byte> incoming, outgoing;
  thread_local std::vector<MPI_Request> send_requests, receive_requests;

  for (const RankStep& step : *steps) {
    const int tag = step.round;
    const Transfer* send = step.send;
    const Transfer* receive = step.receive;
    const int64_t send_bytes = send == nullptr ? 0 : message_bytes(*send);
    const int64_t receive_bytes = receive == nullptr ? 0 : message_bytes(*receive);
    if (std::max(send_bytes, receive_bytes) > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError("a transfer of 2 GiB or more does not fit one message");
    }
    const int64_t send_segments =
        send == nullptr ? 0 : SegmentCount(*send, send_bytes, segment_bytes);
    const int64_t segments =
        receive == nullptr ? 0 : SegmentCount(*receive, receive_bytes, segment_bytes);
    // Segment j of a message starts at byte j * segment_bytes of it.
    auto segment_length = [&](int64_t total, int64_t count, int64_t segment) {
      return count == 1 ? total : std::min(segment_bytes, total - segment * segment_bytes);
    };
    // The send reads its chunks as of the start of the round; a receive into one of them waits
    // until the send has left.
    bool overlap = false;
    if (send != nullptr && receive != nullptr) {
      for (int32_t chunk : receive->chunks) {
        overlap = overlap ||
                  std::find(send->chunks.begin(), send->chunks.end(), chunk) != send->chunks.end();
      }
    }
    // The same chunks both ways, cut alike: segment j is added once segment j has left, so the
    // receive streams through a window of segments. Any other overlap receives the whole
    // message first (a window could deadlock two ranks each waiting on the other's send).
    const bool streaming =
        segments > 1 &&
        (!overlap || (send->chunks == receive->chunks && send_segments == segments));
    const int64_t window = streaming ? std::min(kSegmentWindow, segments) : segments;
    // A copy into adjacent chunks that this rank does not send lands straight in the result.
    bool received_in_place = false;
    std::byte* target = nullptr;
    if (receive != nullptr) {
      if (receive->op == TransferOp::kCopy && !receive->chunks.empty() && !overlap) {
        received_in_place = true;
        for (size_t i = 1; i < receive->chunks.size(); ++i) {
          received_in_place = received_in_place &&
                              offsets[receive->chunks[i]] == offsets[receive->chunks[i - 1] + 1];
        }
      }
      if (received_in_place) {
        target = result + offsets[receive->chunks.front()];
      } else {
        const int64_t buffer = segments == 1 ? receive_bytes : window * segment_bytes;
        if (incoming.size() < static_cast<size_t>(buffer)) incoming.resize(buffer);
        target = incoming.data();
      }
    }
    auto post_receive = [&](int64_t segment) -> int {
      const int64_t slot = streaming ? segment % window : segment;
      return PMPI_Irecv(target + slot * segment_bytes,
                        static_cast<int>(segment_length(receive_bytes, segments, segment)),
                        MPI_BYTE, receive->src, tag, comm, &receive_requests[slot]);
    };
    receive_requests.assign(window, MPI_REQUEST_NULL);
    for (int64_t segment = 0; segment < window; ++segment) {
      if (int code = post_receive(segment); code != MPI_SUCCESS) {
        return MpiFailure("MPI_Irecv", code, mpi_error);
      }
    }

    send_requests.assign(send_segments, MPI_REQUEST_NULL);
    if (send != nullptr) {
      // Adjacent chunks in one buffer go straight from it; otherwise they are packed.
      const std::byte* data = send->chunks.empty() ? input : current(send->chunks.front());
      bool adjacent = true;
      for (size_t i = 1; i < send->chunks.size(); ++i) {
        adjacent = adjacent && current(send->chunks[i]) == data + (offsets[send->chunks[i]] -
                                                                   offsets[send->chunks.front()]);
      }
      if (!adjacent) {
        if (outgoing.size() < static_cast<size_t>(send_bytes)) outgoing.resize(send_bytes);
        int64_t at = 0;
        for (int32_t chunk : send->chunks) {
          std::memcpy(outgoing.data() + at, current(chunk), chunk_bytes(chunk));
          at += chunk_bytes(chunk);
        }
        data = outgoing.data();
      }
      for (int64_t segment = 0; segment < send_segments; ++segment) {
        const int64_t length = segment_length(send_bytes, send_segments, segment);
        if (int code = PMPI_Isend(data + segment * segment_bytes, static_cast<int>(length),
                                  MPI_BYTE, send->dst, tag, comm, &send_requests[segment]);
            code != MPI_SUCCESS) {
          return MpiFailure("MPI_Isend", code, mpi_error);
        }
      }
    }

    for (int64_t segment = 0; segment < segments; ++segment) {
      const int64_t slot = streaming ? segment % window : segment;
      MPI_Status status;
      if (int code = PMPI_Wait(&receive_requests[slot], &status); code != MPI_SUCCESS) {
        return MpiFailure("MPI_Wait", code, mpi_error);
      }
      const int64_t length = segment_length(receive_bytes, segments, segment);
      int received = 0;
      PMPI_Get_count(&status, MPI_BYTE, &received);
      if (received != length) {
        return absl::InvalidArgumentError(
            absl::StrCat("mismatched counts across ranks: rank ", receive->src, " sent ", received,
                         " bytes in round ", step.round, ", rank ", rank, " expected ", length));
      }
      if (overlap) {
        // Streaming: segment j of the send; otherwise all of it.
        const int waits = streaming ? 1 : static_cast<int>(send_requests.size());
        if (int code = PMPI_Waitall(waits, send_requests.data() + (streaming ? segment : 0),
                                    MPI_STATUSES_IGNORE);
            code != MPI_SUCCESS) {
          return MpiFailure("MPI_Waitall", code, mpi_error);
        }
      }
      if (!received_in_place) {
        const int64_t begin = segment * segment_bytes;
        apply(*receive, begin, begin + length, target + slot * segment_bytes);
      }
      if (streaming && segment + window < segments) {
        if (int code = post_receive(segment + window); code != MPI_SUCCESS) {
          return MpiFailure("MPI_Irecv", code, mpi_error);
        }
      }
    }
    if (int code = PMPI_Waitall(static_cast<int>(send_requests.size()), send_requests.data(),
                                MPI_STATUSES_IGNORE);
        code != MPI_SUCCESS) {
      return MpiFailure("MPI_Waitall", code, mpi_error);
    }
    if (receive != nullptr) {
      for (int32_t chunk : receive->chunks) written[chunk] = true;
    }
  }
  FinishAllReduce(plan, written, offsets, input, result, args.count, args.type, args.op);
  return absl::OkStatus();
}

}  // namespace stragglar
