// The device executor's kernel: one launch per call runs this rank's whole program
// (kernels/device_rank.h) on a few CTAs, pulling peers' chunks straight out of their windows and
// synchronising through signals in peer memory: no host round trip per round, and the call does
// not wait for the GPU.
//
// A wait never hangs: it gives up when the host sets the abort word (ncclCommAbort), or when it
// has waited longer than the timeout. The first CTA that gives up records why and on which rank
// in host-mapped memory, so the host can report it at the next call (ncclCommGetAsyncError's
// way), and the call's remaining slices are never written.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/device_rank.h"
#include "kernels/reduce.h"

namespace stragglar {

enum class DeviceGiveUp : uint32_t { kNone = 0, kAborted = 1, kTimedOut = 2 };

// Written once per kernel launch that gives up (by its first CTA to), read by the host.
struct DeviceFailure {
  uint32_t reason = 0;    // DeviceGiveUp
  int32_t peer = -1;      // the rank the wait was for
  uint32_t sequence = 0;  // the slice's sequence number
  uint32_t padding = 0;
};

struct DeviceWatch {
  const uint32_t* abort = nullptr;   // host-mapped; nonzero makes every wait give up
  DeviceFailure* failure = nullptr;  // host-mapped, zeroed by the host
  uint64_t timeout_ns = 0;           // per wait; 0 waits forever (until aborted)
};

inline constexpr int kDeviceThreadsPerBlock = 512;

// Enqueues one call of `program` on `stream` as `blocks` CTAs (the same on every rank). The
// program's arrays and the call's `windows` and `signals` arrays are device memory; kAvg needs
// call.num_ranks_divisor. cudaErrorInvalidValue for an unknown type or operator, else the
// launch's error.
cudaError_t LaunchDeviceProgram(DataType type, ReduceOp op, const DeviceProgramView& program,
                                const DeviceCall& call, const DeviceWatch& watch, int blocks,
                                cudaStream_t stream);

}  // namespace stragglar
