#include "kernels/exec/mpi/mpi_call_buffers.h"

#include <algorithm>
#include <cstring>

namespace stragglar {

MpiCallBuffers::MpiCallBuffers(const RankProgram& program, const AllReduceArgs& args)
    : program_(program),
      args_(args),
      element_size_(DataTypeSize(args.type)),
      offsets_(ChunkByteOffsets(args.count, element_size_, program.num_chunks)),
      input_(static_cast<const std::byte*>(args.send)),
      result_(static_cast<std::byte*>(args.recv)) {}

int64_t MpiCallBuffers::ExtentsBytes(int32_t first, int32_t count) const {
  int64_t total = 0;
  for (int32_t i = first; i < first + count; ++i) {
    const ProgramExtent& extent = program_.extents[i];
    total += offsets_[extent.first_chunk + extent.num_chunks] - offsets_[extent.first_chunk];
  }
  return total;
}

int64_t MpiCallBuffers::LargestTransferBytes() const {
  int64_t largest = 0;
  for (const ProgramStep& step : program_.steps) {
    largest = std::max({largest, ExtentsBytes(step.first_send, step.num_sends),
                        ExtentsBytes(step.first_receive, step.num_receives)});
  }
  return largest;
}

const std::byte* MpiCallBuffers::SendData(const ProgramStep& step,
                                          std::vector<std::byte>& packed) const {
  if (step.num_sends == 0) return input_;
  const ProgramExtent& first = program_.extents[step.first_send];
  if (step.num_sends == 1) return Own(first.buffer, first.first_chunk);
  const int64_t bytes = ExtentsBytes(step.first_send, step.num_sends);
  if (packed.size() < static_cast<size_t>(bytes)) packed.resize(bytes);
  int64_t at = 0;
  for (int32_t i = step.first_send; i < step.first_send + step.num_sends; ++i) {
    const ProgramExtent& extent = program_.extents[i];
    const int64_t length = ExtentsBytes(i, 1);
    std::memcpy(packed.data() + at, Own(extent.buffer, extent.first_chunk), length);
    at += length;
  }
  return packed.data();
}

bool MpiCallBuffers::ReceivesInPlace(const ProgramStep& step) const {
  if (step.receive_peer < 0 || step.receive_op != TransferOp::kCopy || step.num_receives == 0) {
    return false;
  }
  for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
    const ProgramExtent& extent = program_.extents[i];
    if (extent.overlaps_send || (i != step.first_receive && extent.starts_run)) return false;
  }
  return true;
}

void MpiCallBuffers::Apply(const ProgramStep& step, int64_t begin, int64_t end,
                           const std::byte* data) const {
  int64_t chunk_begin = 0;  // where the chunk starts in the message
  for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
    const ProgramExtent& extent = program_.extents[i];
    for (int32_t chunk = extent.first_chunk; chunk < extent.first_chunk + extent.num_chunks;
         ++chunk) {
      const int64_t chunk_end = chunk_begin + ChunkBytes(chunk);
      const int64_t from = std::max(begin, chunk_begin), to = std::min(end, chunk_end);
      if (from < to) {
        const int64_t within = from - chunk_begin;
        std::byte* target = result_ + offsets_[chunk] + within;
        const std::byte* incoming = data + (from - begin);
        const int64_t elements = (to - from) / element_size_;
        if (step.receive_op == TransferOp::kCopy) {
          std::memcpy(target, incoming, to - from);
        } else if (extent.buffer == Buffer::kResult) {
          ReduceInto(args_.type, args_.op, target, incoming, elements);
        } else {
          Reduce(args_.type, args_.op, target, Own(extent.buffer, chunk) + within, incoming,
                 elements);
        }
      }
      chunk_begin = chunk_end;
    }
  }
}

void MpiCallBuffers::Finish() const {
  FinishOnHost(program_, offsets_, input_, result_, args_.count, args_.type, args_.op);
}

}  // namespace stragglar
