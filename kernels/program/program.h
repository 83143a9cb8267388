// A plan lowered for one rank: the per-rank program every executor interprets (host threads, MPI,
// NCCL send/recv, and a device-resident kernel). Lowering happens once per (plan, rank,
// placement); a call then only walks the program with its buffers and count, and none of the
// executors tracks which buffer holds which chunk on its own.
//
// Each step is one round in which the rank sends and/or receives. What it sends and receives is
// a list of extents: runs of consecutive chunks that agree on everything an executor needs to know.
// A sent extent says which buffer its chunks are read from (out of place, a chunk lives in the
// input until the rank first writes it into the result). A received extent says what the rank's
// own value of those chunks is, for a reduce (input or result), whether this step also sends them
// (the send must read them before the receive lands), and which earlier sends lent them out of
// the result (a peer that reads this rank's memory directly must be done with them before they
// change). Everything is flat arrays of small structs with indices, so a program copies to
// device memory as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/plan/plan.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {

// The memory a program reads its own chunks from: the caller's send buffer, or its receive
// buffer. In place they are the same memory, and programs use kResult throughout.
enum class Buffer : uint8_t { kInput, kResult };

// How a call's buffers are placed: the program depends on it.
struct Placement {
  bool in_place = false;  // send and receive buffers are the same memory
  // StragglAR's pre-arrival ReduceScatter runs outside the program (NCCL's collectives on the
  // ready ranks, see nccl_executor.h): the program starts after it, with this rank's block
  // complete in the result and its other chunks at its input. Ignored (false in the program) for
  // plans whose pre-arrival phase does not leave one block of equally many chunks per ready rank.
  bool native_pre_arrival = false;

  friend bool operator==(const Placement&, const Placement&) = default;
  template <typename H>
  friend H AbslHashValue(H hash, const Placement& placement) {
    return H::combine(std::move(hash), placement.in_place, placement.native_pre_arrival);
  }
};

// Consecutive chunks [first_chunk, first_chunk + num_chunks), in the transfer's order.
struct ProgramExtent {
  int32_t first_chunk = 0;
  int32_t num_chunks = 0;
  // Send: where the chunks are read. Receive: this rank's own value of them, which a reduce adds
  // the incoming one to (a copy ignores it). Received chunks always land in the result.
  Buffer buffer = Buffer::kInput;
  // The first extent of a run of consecutive chunk indices: transports that send one message per
  // run (NCCL) start a new message here; sender and receiver cut alike.
  bool starts_run = false;
  // Receive only: this step also sends some of these chunks, so they land only after the send has
  // read them.
  bool overlaps_send = false;
  // Receive only: program.waits[first_wait, first_wait + num_waits) are the steps whose sends lent
  // these chunks out of the result since they were last written (this step's own send included):
  // those readers must be done before the chunks change.
  int32_t first_wait = 0;
  int32_t num_waits = 0;

  friend bool operator==(const ProgramExtent&, const ProgramExtent&) = default;
};

struct ProgramStep {
  int32_t round = 0;                       // the plan's round
  int32_t send_peer = -1;                  // -1: sends nothing this step
  int32_t receive_peer = -1;               // -1: receives nothing this step
  TransferOp send_op = TransferOp::kCopy;  // what the receiver does with the sent chunks
  TransferOp receive_op = TransferOp::kCopy;
  // program.extents[first_send, first_send + num_sends) and likewise for the receive.
  int32_t first_send = 0;
  int32_t num_sends = 0;
  int32_t first_receive = 0;
  int32_t num_receives = 0;
  int32_t send_chunks = 0;  // chunks in the send's transfer (one message on the host and MPI)
  int32_t receive_chunks = 0;
  // The step sends and receives the same chunks in the same order (StragglAR's exchanges with
  // the straggler): a transport may stream the receive while the send leaves, extent by extent.
  bool same_chunks_both_ways = false;

  friend bool operator==(const ProgramStep&, const ProgramStep&) = default;
};

struct RankProgram {
  int32_t rank = 0;
  int32_t num_ranks = 0;
  int32_t num_chunks = 0;
  Placement placement;
  // StragglAR with native_pre_arrival: the ready ranks' blocks, and this rank's (-1 on the
  // straggler). A block is num_chunks / pre_arrival_blocks adjacent chunks.
  int32_t pre_arrival_blocks = 0;
  int32_t pre_arrival_block = -1;
  std::vector<ProgramStep> steps;
  std::vector<ProgramExtent> extents;
  std::vector<int32_t> waits;  // step indices, see ProgramExtent::first_wait
  // Out of place: the chunks the steps never write, copied from the input at the end (kInput
  // extents). In place: none.
  std::vector<ProgramExtent> finish;

  friend bool operator==(const RankProgram&, const RankProgram&) = default;
};

// Calls visit(chunk) for every chunk of program.extents[first, first + count), in order.
template <typename Visit>
void ForEachChunk(const RankProgram& program, int32_t first, int32_t count, Visit visit) {
  for (int32_t i = first; i < first + count; ++i) {
    const ProgramExtent& extent = program.extents[i];
    for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c) visit(c);
  }
}

// Lowers `plan` for `rank`. Only the transfers this rank takes part in are checked (the verifier
// and CheckPrograms check whole plans); that is enough to keep an executor memory-safe:
// InvalidArgument for a rank outside the plan, a plan without chunks, a transfer with a rank or
// chunk out of range or to itself, or a rank that sends or receives twice in one round.
absl::StatusOr<RankProgram> LowerPlan(const Plan& plan, int rank, Placement placement = {});

// StragglAR's pre-arrival ReduceScatter as a whole: when the plan's pre-arrival rounds are a
// ReduceScatter among the ready ranks that ends with every ready rank owning one block of equally
// many adjacent chunks (what the synthesizer's ring ReduceScatter leaves), and the post-arrival
// rounds read none of the partial sums it leaves elsewhere, the number of blocks and `rank`'s
// block (-1 on the straggler); otherwise {0, -1} (log-depth StragglAR's Halving-Doubling, for
// one). The same on every rank of the plan.
struct PreArrivalBlocks {
  int32_t blocks = 0;
  int32_t block = -1;
};
PreArrivalBlocks FindPreArrivalBlocks(const Plan& plan, int rank);

// The end of a run on the CPU (host and MPI executors), once no peer reads this rank's buffers:
// the finish copies (out of place, what no step wrote still holds this rank's input), and kAvg's
// one division. `offsets` are ChunkByteOffsets of the call.
void FinishOnHost(const RankProgram& program, const std::vector<int64_t>& offsets,
                  const std::byte* input, std::byte* result, int64_t count, DataType type,
                  ReduceOp op);

// Byte offset where each chunk of a buffer of `count` elements of `element_size` bytes starts;
// chunk c spans [offsets[c], offsets[c + 1]) (num_chunks + 1 entries).
std::vector<int64_t> ChunkByteOffsets(int64_t count, int64_t element_size, int num_chunks);

}  // namespace stragglar
