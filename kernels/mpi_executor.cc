#include "kernels/mpi_executor.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/rank_steps.h"

namespace stragglar {
namespace {

absl::Status MpiFailure(absl::string_view call, int code, int* mpi_error) {
  *mpi_error = code;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (PMPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return absl::InternalError(absl::StrCat(call, " failed: ", absl::string_view(text, length)));
}

}  // namespace

absl::Status ExecutePlanWithMpi(const Plan& plan, int rank, const MpiAllReduceArgs& args,
                                MPI_Comm comm, int* mpi_error) {
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
  // Per thread, reused across calls: the incoming message, and the outgoing one when its chunks
  // are not adjacent in memory.
  thread_local std::vector<std::byte> incoming, outgoing;

  for (const RankStep& step : *steps) {
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status statuses[2];
    const int tag = step.round;
    int64_t receive_bytes = 0;
    // A copy into chunks that are adjacent, and that this rank does not send in the same round,
    // lands straight in the result: no pass through `incoming`.
    bool received_in_place = false;
    if (step.receive != nullptr) {
      const Transfer& receive = *step.receive;
      receive_bytes = message_bytes(receive);
      if (receive_bytes > std::numeric_limits<int>::max()) {
        return absl::InvalidArgumentError("a transfer of 2 GiB or more does not fit one message");
      }
      std::byte* target = nullptr;
      if (receive.op == TransferOp::kCopy && !receive.chunks.empty()) {
        received_in_place = true;
        for (size_t i = 0; i < receive.chunks.size(); ++i) {
          const int32_t chunk = receive.chunks[i];
          received_in_place =
              received_in_place &&
              (i == 0 || offsets[chunk] == offsets[receive.chunks[i - 1] + 1]) &&
              (step.send == nullptr || std::find(step.send->chunks.begin(), step.send->chunks.end(),
                                                 chunk) == step.send->chunks.end());
        }
        if (received_in_place) target = result + offsets[receive.chunks.front()];
      }
      if (!received_in_place) {
        if (incoming.size() < static_cast<size_t>(receive_bytes)) incoming.resize(receive_bytes);
        target = incoming.data();
      }
      if (int code = PMPI_Irecv(target, static_cast<int>(receive_bytes), MPI_BYTE, receive.src, tag,
                                comm, &requests[0]);
          code != MPI_SUCCESS) {
        return MpiFailure("MPI_Irecv", code, mpi_error);
      }
    }
    if (step.send != nullptr) {
      const Transfer& send = *step.send;
      const int64_t bytes = message_bytes(send);
      // Adjacent chunks in one buffer go straight from it; otherwise they are packed.
      const std::byte* data = send.chunks.empty() ? input : current(send.chunks.front());
      bool adjacent = true;
      for (size_t i = 1; i < send.chunks.size(); ++i) {
        adjacent = adjacent && current(send.chunks[i]) ==
                                   data + (offsets[send.chunks[i]] - offsets[send.chunks.front()]);
      }
      if (!adjacent) {
        if (outgoing.size() < static_cast<size_t>(bytes)) outgoing.resize(bytes);
        int64_t at = 0;
        for (int32_t chunk : send.chunks) {
          std::memcpy(outgoing.data() + at, current(chunk), chunk_bytes(chunk));
          at += chunk_bytes(chunk);
        }
        data = outgoing.data();
      }
      if (bytes > std::numeric_limits<int>::max()) {
        return absl::InvalidArgumentError("a transfer of 2 GiB or more does not fit one message");
      }
      if (int code = PMPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, send.dst, tag, comm,
                                &requests[1]);
          code != MPI_SUCCESS) {
        return MpiFailure("MPI_Isend", code, mpi_error);
      }
    }
    // Both must complete before the received data is applied: the send reads the chunks as of
    // the start of the round, which the receive may be about to change.
    if (int code = PMPI_Waitall(2, requests, statuses); code != MPI_SUCCESS) {
      return MpiFailure("MPI_Waitall", code, mpi_error);
    }
    if (step.receive == nullptr) continue;
    int received = 0;
    PMPI_Get_count(&statuses[0], MPI_BYTE, &received);
    if (received != receive_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mismatched counts across ranks: rank ", step.receive->src, " sent ", received,
          " bytes in round ", step.round, ", rank ", rank, " expected ", receive_bytes));
    }
    const Transfer& transfer = *step.receive;
    if (received_in_place) {
      for (int32_t chunk : transfer.chunks) written[chunk] = true;
      continue;
    }
    int64_t at = 0;
    for (int32_t chunk : transfer.chunks) {
      const int64_t bytes = chunk_bytes(chunk);
      if (bytes == 0) continue;
      std::byte* target = result + offsets[chunk];
      const std::byte* data = incoming.data() + at;
      at += bytes;
      if (transfer.op == TransferOp::kCopy) {
        std::memcpy(target, data, bytes);
      } else if (written[chunk]) {
        ReduceInto(args.type, args.op, target, data, bytes / element_size);
      } else {
        Reduce(args.type, args.op, target, current(chunk), data, bytes / element_size);
      }
      written[chunk] = true;
    }
  }
  FinishAllReduce(plan, written, offsets, input, result, args.count, args.type, args.op);
  return absl::OkStatus();
}

}  // namespace stragglar
