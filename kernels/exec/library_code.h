// The error code of the library under an executor (NCCL's ncclResult_t, an MPI error code), kept
// in the absl::Status that the executor and the backend return, so that every executor has one
// error convention and only the preload edge (runtime/nccl, runtime/mpi) turns a failed call into
// what the library's caller expects: that code, returned unchanged, or one mapped from the
// status's own code where the library gave none.
#pragma once

#include <optional>

#include "absl/status/status.h"

namespace stragglar {

// `status` (not OK) carrying the library's `code`.
absl::Status WithLibraryCode(absl::Status status, int code);
// The library's code `status` carries; nullopt for OK and for failures of our own.
std::optional<int> LibraryCode(const absl::Status& status);

}  // namespace stragglar
