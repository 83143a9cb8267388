// The pipes between the parent and the processes it starts: one text line per message.
//
// Probe -> parent: "VERSIONS <nccl> <cuda runtime> <cuda driver>", then "DEVICE <index> <bus id>
// <name>" per device and "DONE", or "SKIP <reason>".
// Rank -> parent (result pipe): rank 0's "ID <hex>" (its ncclUniqueId), "HELLO <pid> <host>
// <device> <bus id> <name>", "ROW <row> <in place 0|1> <time us> <wrong> <calls> <call us>...",
// and at the end "DONE", "ERROR <message>" or "SKIP <reason>".
// Parent -> rank (control pipe): rank 0's "ID <hex>" line, to every other rank.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace stragglar::nccl_bench {

// All of `text`, retrying short writes and EINTR; false once the reader is gone.
bool WriteAll(int fd, absl::string_view text);
bool SendLine(int fd, absl::string_view line);

// Blocking: the next line from `fd`, or nullopt at end of file.
std::optional<std::string> ReadLine(int fd);

// Binary data (the NCCL unique id) as lowercase hex, and back (false when `hex` does not hold
// `size` bytes).
std::string Hex(const void* data, size_t size);
bool Unhex(absl::string_view hex, void* data, size_t size);

}  // namespace stragglar::nccl_bench
