// Rank 0's text on every rank of a user communicator, right after its creation: what the NCCL
// preload agrees on before it handles any call (the settings, runtime/agreed_settings.h; rank 0's
// link report address, runtime/nccl/nccl_links.h).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stragglar {

// One ncclBroadcast of `capacity` bytes on `comm` (device `device`), on a stream of its own, waited
// for: every rank of `comm` must call it with the same capacity, as a collective. Rank 0's `mine`
// (at most capacity - 1 bytes, without NUL bytes; a longer one is sent as "") on every rank. An
// error names `what` and the failed call.
absl::StatusOr<std::string> BroadcastTextAtCreation(ncclComm_t comm, int device, std::string mine,
                                                    size_t capacity, absl::string_view what);

}  // namespace stragglar
