// A rank's program (kernels/program/program.h) in the form the device-resident executor runs: every
// rank's working copy of the message lives in a window that its peers map, and a receiver pulls
// the chunks it needs straight out of the sender's window. Nothing is sent; a transfer is two
// signals instead:
//   - `ready`: the sender has reached the step (so its window holds the chunks as of the start
//     of the round). The sender writes it into the receiver's signal array.
//   - `read`: the receiver is done reading those chunks. It writes it into the sender's array.
// Each signal counts the transfers between its pair of ranks so far (the k-th send from a to b
// is the k-th receive of b from a: both sides walk the same rounds), so a wait is "the peer's
// count has reached k", and a step's signals never need to name the step.
//
// Lowering turns the program's waits (the steps whose sends lent a chunk,
// kernels/program/program.h) into reads to wait for, per peer, and marks what a receive may not
// write in place: chunks that this step also sends go through scratch and land once the peer has
// read them.
//
// It also keeps a call's copies between the caller's buffers and the window to what the program
// needs. Only chunks lent before this rank first writes them are copied into the window; a
// chunk's first reduce takes this rank's own value from the input; a chunk's last write goes
// straight to the result when no later step lends it; and at the end only the chunks whose final
// value is in the window (or that no step wrote: from the input) are copied to the result.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/program/program.h"

namespace stragglar {

// Wait until `reader` has posted `reads` reads of this rank's window.
struct DeviceReadWait {
  int32_t reader = 0;
  uint32_t reads = 0;

  friend bool operator==(const DeviceReadWait&, const DeviceReadWait&) = default;
};

// Consecutive chunks a receive lands the same way.
struct DeviceExtent {
  int32_t first_chunk = 0;
  int32_t num_chunks = 0;
  // This step's send lends these chunks too: the result is computed into scratch, and copied
  // into the window only after this rank has posted its own read and the waits below are met.
  bool through_scratch = false;
  // DeviceProgram::waits[first_wait, first_wait + num_waits): the readers of these chunks' loans
  // since they were last written; they must be done before the chunks change.
  int32_t first_wait = 0;
  int32_t num_waits = 0;
  // The chunks' first write: a reduce takes this rank's own value from the input.
  bool own_from_input = false;
  // The chunks' last write, and no later step lends them: it lands in the result (unless the
  // call averages, whose division comes with the copy out of the window at the end).
  bool to_result = false;

  friend bool operator==(const DeviceExtent&, const DeviceExtent&) = default;
};

// What a call does with a chunk outside the steps (DeviceProgram::chunk_flags, bits).
enum DeviceChunkFlag : uint8_t {
  kDeviceCopyIn = 1,     // lent before this rank writes it: copied into the window first
  kDeviceEndInput = 2,   // never written: the result is the input's
  kDeviceEndWindow = 4,  // final value in the window: copied to the result at the end
  kDeviceEndResult = 8,  // final value written to the result by a to_result extent
};

struct DeviceStep {
  int32_t send_peer = -1;     // -1: lends nothing this step
  int32_t receive_peer = -1;  // -1: receives nothing this step
  uint32_t sends = 0;         // sends to send_peer so far, this one included: the ready value
  uint32_t receives = 0;      // receives from receive_peer so far, this one included
  TransferOp receive_op = TransferOp::kCopy;
  int32_t first_extent = 0;  // DeviceProgram::extents
  int32_t num_extents = 0;

  friend bool operator==(const DeviceStep&, const DeviceStep&) = default;
};

struct DeviceProgram {
  int32_t rank = 0;
  int32_t num_ranks = 0;
  int32_t num_chunks = 0;
  std::vector<DeviceStep> steps;
  std::vector<DeviceExtent> extents;
  std::vector<DeviceReadWait> waits;
  // Every peer's last read of this rank's window: a rank waits for them before it returns, so
  // that the next call may overwrite its window.
  std::vector<DeviceReadWait> drain;
  std::vector<uint8_t> chunk_flags;  // by chunk: DeviceChunkFlag bits

  friend bool operator==(const DeviceProgram&, const DeviceProgram&) = default;
};

// Lowers a rank's program for the device-resident kernel. The window is the kernel's working
// buffer, so where the caller's buffers are does not matter: the program must be lowered in place
// and with its pre-arrival rounds (InvalidArgument otherwise), as the communicator lowers it for
// work that runs in place (CallWork::RunsInPlace).
absl::StatusOr<DeviceProgram> LowerForDevice(const RankProgram& program);

}  // namespace stragglar
