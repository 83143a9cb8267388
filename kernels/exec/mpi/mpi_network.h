// How the MPI executor's transfers with a peer on another node travel when network messages are
// on (MpiExecutorOptions::network_message_bytes): cut into messages of at most that many bytes,
// all posted at once, each below the TCP transport's eager limit; and sent only once the receiver
// has said it is ready, by a message of no bytes tagged ReadyTags::Of(round). Shared by the
// executor's two ways of running a program (round by round, and one queue per link class), so
// that a rank on either cuts and handshakes as its peers do.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/program/program.h"

namespace stragglar {

// A transfer of `bytes` as `count` messages of `size` bytes, the last one shorter.
struct MessageCut {
  int64_t size = 0;  // 0: one message
  int64_t count = 1;

  // The cut of `bytes` into messages of at most `size` (one message when size <= 0 or the
  // transfer is no larger).
  static MessageCut Of(int64_t bytes, int64_t size) {
    if (size <= 0 || bytes <= size) return {};
    return {.size = size, .count = (bytes + size - 1) / size};
  }
  // Message `index`'s first byte and length, of a transfer of `total` bytes.
  int64_t Offset(int64_t index) const { return index * size; }
  int64_t Length(int64_t total, int64_t index) const {
    return count == 1 ? total : std::min(size, total - index * size);
  }
};

// Messages of one transfer posted and not yet complete, at most. With more, OpenMPI's progress
// engine walks its list of sends waiting for the transport at every turn: 1 MiB StragglAR calls
// in 16-byte segments (about 22000 messages per transfer, all posted at once) took 1.6 s, the
// time growing with the square of the size. 256 covers about 16 MiB in network messages.
inline constexpr int64_t kSendsInFlight = 256;

// The tags of ready messages: data messages are tagged with their round, ready messages with
// half of the tag space above (MPI_TAG_UB itself is the alarm's, mpi_alarm.h).
class ReadyTags {
 public:
  // InvalidArgument when `program`'s rounds do not fit below half of `comm`'s MPI_TAG_UB.
  static absl::StatusOr<ReadyTags> For(MPI_Comm comm, const RankProgram& program);
  int Of(int32_t round) const { return base_ + round; }

 private:
  explicit ReadyTags(int base) : base_(base) {}
  int base_;
};

}  // namespace stragglar
