// One call's buffers as an executor's transfers see them, the same for every executor: where each
// chunk of this rank's input and result lies (host or device memory, as the executor runs) and
// how many bytes a chunk, a run of chunks or a run of the program's extents holds. Chunk c spans
// bytes [offset(c), offset(c + 1)) of either buffer (ChunkByteOffsets). What an executor does
// with the bytes (messages, loans, device copies) is its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/exec/all_reduce_args.h"
#include "kernels/program/program.h"

namespace stragglar {

class CallBuffers {
 public:
  // `program` and `args` must outlive this.
  CallBuffers(const RankProgram& program, const AllReduceArgs& args)
      : program_(program),
        args_(args),
        element_size_(DataTypeSize(args.type)),
        offsets_(ChunkByteOffsets(args.count, element_size_, program.num_chunks)),
        input_(static_cast<const std::byte*>(args.send)),
        result_(static_cast<std::byte*>(args.recv)) {}

  const RankProgram& program() const { return program_; }
  const AllReduceArgs& args() const { return args_; }
  int64_t element_size() const { return element_size_; }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  const std::byte* input() const { return input_; }
  std::byte* result() const { return result_; }

  int64_t ChunkBytes(int32_t chunk) const { return offsets_[chunk + 1] - offsets_[chunk]; }
  // Chunks [first_chunk, first_chunk + num_chunks), which lie end to end.
  int64_t ChunksBytes(int32_t first_chunk, int32_t num_chunks) const {
    return offsets_[first_chunk + num_chunks] - offsets_[first_chunk];
  }
  // The program's extents [first, first + count), in the order a message carries them.
  int64_t ExtentsBytes(int32_t first, int32_t count) const {
    int64_t total = 0;
    for (int32_t i = first; i < first + count; ++i) {
      total += ChunksBytes(program_.extents[i].first_chunk, program_.extents[i].num_chunks);
    }
    return total;
  }
  const std::byte* Own(Buffer buffer, int32_t chunk) const {
    return (buffer == Buffer::kInput ? input_ : result_) + offsets_[chunk];
  }
  std::byte* ResultChunk(int32_t chunk) const { return result_ + offsets_[chunk]; }

 private:
  const RankProgram& program_;
  const AllReduceArgs& args_;
  const int64_t element_size_;
  const std::vector<int64_t> offsets_;
  const std::byte* input_;
  std::byte* result_;
};

}  // namespace stragglar
