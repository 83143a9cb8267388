// The MPI executor's messages over one call's buffers (kernels/exec/call_buffers.h): how a step's
// send is read (in place or packed), whether its receive may land in place, and how received bytes
// are added or copied into the chunks. Shared by the executor's two ways of running a program
// (round by round, and one queue per link class).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/exec/call_buffers.h"
#include "kernels/program/program.h"

namespace stragglar {

class MpiMessages : public CallBuffers {
 public:
  using CallBuffers::CallBuffers;

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
};

}  // namespace stragglar
