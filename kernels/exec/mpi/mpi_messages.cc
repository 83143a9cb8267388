#include "kernels/exec/mpi/mpi_messages.h"

#include <algorithm>
#include <cstring>

namespace stragglar {

const std::byte* MpiMessages::SendData(const ProgramStep& step,
                                       std::vector<std::byte>& packed) const {
  if (step.num_sends == 0) return input();
  const ProgramExtent& first = program().extents[step.first_send];
  if (step.num_sends == 1) return Own(first.buffer, first.first_chunk);
  const int64_t bytes = ExtentsBytes(step.first_send, step.num_sends);
  if (packed.size() < static_cast<size_t>(bytes)) packed.resize(bytes);
  int64_t at = 0;
  for (int32_t i = step.first_send; i < step.first_send + step.num_sends; ++i) {
    const ProgramExtent& extent = program().extents[i];
    const int64_t length = ExtentsBytes(i, 1);
    std::memcpy(packed.data() + at, Own(extent.buffer, extent.first_chunk), length);
    at += length;
  }
  return packed.data();
}

bool MpiMessages::ReceivesInPlace(const ProgramStep& step) const {
  if (step.receive_peer < 0 || step.receive_op != TransferOp::kCopy || step.num_receives == 0) {
    return false;
  }
  for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
    const ProgramExtent& extent = program().extents[i];
    if (extent.overlaps_send || (i != step.first_receive && extent.starts_run)) return false;
  }
  return true;
}

void MpiMessages::Apply(const ProgramStep& step, int64_t begin, int64_t end,
                        const std::byte* data) const {
  int64_t chunk_begin = 0;  // where the chunk starts in the message
  for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
    const ProgramExtent& extent = program().extents[i];
    for (int32_t chunk = extent.first_chunk; chunk < extent.first_chunk + extent.num_chunks;
         ++chunk) {
      const int64_t chunk_end = chunk_begin + ChunkBytes(chunk);
      const int64_t from = std::max(begin, chunk_begin), to = std::min(end, chunk_end);
      if (from < to) {
        const int64_t within = from - chunk_begin;
        std::byte* target = ResultChunk(chunk) + within;
        const std::byte* incoming = data + (from - begin);
        const int64_t elements = (to - from) / element_size();
        if (step.receive_op == TransferOp::kCopy) {
          std::memcpy(target, incoming, to - from);
        } else if (extent.buffer == Buffer::kResult) {
          ReduceInto(args().type, args().op, target, incoming, elements);
        } else {
          Reduce(args().type, args().op, target, Own(extent.buffer, chunk) + within, incoming,
                 elements);
        }
      }
      chunk_begin = chunk_end;
    }
  }
}

void MpiMessages::Finish() const {
  FinishOnHost(program(), offsets(), input(), result(), args().count, args().type, args().op);
}

}  // namespace stragglar
