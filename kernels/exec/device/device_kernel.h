// The device executor's kernel: one launch per call runs this rank's whole program
// (kernels/exec/device/device_rank.h) on a few CTAs, pulling peers' chunks straight out of their
// windows and synchronising through signals in peer memory: no host round trip per round, and the
// call does not wait for the GPU.
//
// A wait never hangs (kernels/exec/device/device_watch.h): it gives up when the host sets the abort
// word, or when it has waited longer than the timeout. The first CTA that gives up records why and
// on which rank, so the host can report it at the next call (ncclCommGetAsyncError's way), and the
// call's remaining slices are never written.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/exec/device/device_executor.h"
#include "kernels/exec/device/device_rank.h"
#include "kernels/exec/device/device_watch.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {

inline constexpr int kDeviceThreadsPerCta = 512;

// Enqueues one call of `program` on `stream` as `ctas` CTAs (the same on every rank). The
// program's arrays and the call's `windows` and `signals` arrays are device memory; kAvg needs
// call.num_ranks_divisor. cudaErrorInvalidValue for an unknown type or operator, else the
// launch's error.
cudaError_t LaunchDeviceProgram(DataType type, ReduceOp op, const DeviceProgramView& program,
                                const DeviceCall& call, const DeviceWatch& watch, int ctas,
                                cudaStream_t stream);

// The device executor's launcher on a GPU: LaunchDeviceProgram on the cudaStream_t it is given,
// ordered after the previous launch by an event (the order token) that it waits for and records.
class CudaDeviceLauncher final : public DeviceLauncher {
 public:
  absl::Status Launch(DataType type, ReduceOp op, const DeviceProgramView& program,
                      const DeviceCall& call, const DeviceWatch& watch, int ctas, void* stream,
                      void** order) override;
  void ReleaseOrder(void* order) override;
};

}  // namespace stragglar
