// The NCCL library's edge of the one error convention (kernels/exec/library_code.h): which code
// NCCL's caller gets for a failed call, and the code a device executor's failure carries.
#pragma once

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stragglar {

// What a failed call returns to NCCL's caller: the code the status carries where NCCL or CUDA
// gave one, or the work tagged its own failure (the device executor's, a bad argument),
// unchanged; a communicator the watchdog revoked (Aborted) ncclRemoteError; anything else (the
// protocol's own failures) ncclInternalError. ncclSuccess for OK.
ncclResult_t NcclCodeOf(const absl::Status& status);

// A failure of the device executor, prefixed "device executor: ", its payloads kept, with the
// code NCCL's callers get for it (as before the one convention): a bad argument is the caller's
// (ncclInvalidArgument), a peer that never came (a timeout) or an abort the remote side's
// (ncclRemoteError), anything else a failure of CUDA (ncclUnhandledCudaError).
absl::Status WithDeviceExecutorCode(const absl::Status& status);

// NCCL's `call` failed with `code`: an internal error that carries the code for NCCL's caller.
absl::Status NcclCallFailed(absl::string_view call, ncclResult_t code);

}  // namespace stragglar
