// One call's buffers as the MPI executor's transfers see them: where each chunk lies, how many
// bytes a transfer's extents hold, and how received bytes land in the chunks. Shared by the
// executor's two ways of running a program (round by round, and one queue per link class).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/exec/mpi/mpi_executor.h"
#include "kernels/program/program.h"

namespace stragglar {

class MpiCallBuffers {
 public:
  MpiCallBuffers(const RankProgram& program, const AllReduceArgs& args);

  const RankProgram& program() const { return program_; }
  int64_t ChunkBytes(int32_t chunk) const { return offsets_[chunk + 1] - offsets_[chunk]; }
  const std::byte* Own(Buffer buffer, int32_t chunk) const {
    return (buffer == Buffer::kInput ? input_ : result_) + offsets_[chunk];
  }
  std::byte* ResultChunk(int32_t chunk) const { return result_ + offsets_[chunk]; }
  // The bytes of extents[first, first + count), in the order a message carries them.
  int64_t ExtentsBytes(int32_t first, int32_t count) const;
  // The largest message any step sends or receives (one per transfer, unsegmented).
  int64_t LargestTransferBytes() const;
  // Where a step's send reads its message: its one extent in place, or its extents packed into
  // `packed` (resized as needed), or the input for a send of no extents.
  const std::byte* SendData(const ProgramStep& step, std::vector<std::byte>& packed) const;
  // Whether a step's receive is a copy into consecutive chunks that it does not also send, so
  // it may land straight in the result.
  bool ReceivesInPlace(const ProgramStep& step) const;
  // Adds or copies bytes [begin, end) of a step's received message, held at `data`, into the
  // chunks they belong to, as those chunks stood at the start of the round.
  void Apply(const ProgramStep& step, int64_t begin, int64_t end, const std::byte* data) const;
  // The end of the call: chunks no transfer wrote, and kAvg's division (FinishOnHost).
  void Finish() const;

 private:
  const RankProgram& program_;
  const AllReduceArgs& args_;
  const int64_t element_size_;
  const std::vector<int64_t> offsets_;
  const std::byte* input_;
  std::byte* result_;
};

}  // namespace stragglar
