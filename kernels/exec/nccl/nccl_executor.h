// Executes a rank's program (kernels/program/program.h) on GPUs: each step is one NCCL group of
// send/recv between the ranks, and our CUDA reduction kernels apply what arrived; everything is
// enqueued on the caller's stream, so a call returns before the GPU has run it, like NCCL's own
// AllReduce. The same programs as the host and MPI executors; only the transport differs.
//
// StragglAR's pre-arrival ReduceScatter among the ready ranks runs either as the program's own
// send/recv steps or, for a program lowered with native_pre_arrival and given a communicator of
// the ready ranks (NativePreArrival), as one NCCL collective on it: ncclReduceScatter when the
// blocks are equal, else one ncclReduce per block in a group. Both leave each ready rank's block
// complete and its other chunks at its own input, which is all the post-arrival rounds read.
// docs/nccl.md compares them.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/exec/all_reduce_args.h"
#include "kernels/program/program.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {

// NCCL's own point-to-point entry points (the pnccl* names), so that our traffic never re-enters
// an interposer.
struct NcclPointToPoint {
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*group_start)() = nullptr;
  ncclResult_t (*group_end)() = nullptr;
};

// NCCL's ReduceScatter and Reduce (the pnccl* names), for StragglAR's pre-arrival phase.
struct NcclCollectives {
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t) = nullptr;
};

// StragglAR's pre-arrival ReduceScatter as NCCL collectives on `ready_comm`: the ready ranks only,
// each at the index of the block it owns (RankProgram::pre_arrival_block), e.g. from
// ncclCommSplit with that index as the key and NCCL_SPLIT_NOCOLOR for the straggler.
struct NativePreArrival {
  NcclCollectives nccl;
  ncclComm_t ready_comm = nullptr;  // nullptr on the straggler, which takes no part
};

// What an executor enqueues besides messages: CUDA's copies and our kernels on a GPU
// (CudaDeviceOps); host functions in tests, so that the executor's logic runs without a GPU.
struct DeviceOps {
  cudaError_t (*copy)(void* dst, const void* src, size_t bytes, cudaStream_t stream) = nullptr;
  cudaError_t (*reduce)(DataType type, ReduceOp op, void* out, const void* first,
                        const void* second, int64_t count, cudaStream_t stream) = nullptr;
  cudaError_t (*finalize)(DataType type, ReduceOp op, void* data, int64_t count, int num_ranks,
                          cudaStream_t stream) = nullptr;
};

// cudaMemcpyAsync (device to device), LaunchReduce and LaunchFinalizeReduction.
const DeviceOps& CudaDeviceOps();

// Memory for the messages of one communicator's calls. One call at a time uses it (NCCL already
// requires that calls on a communicator are serialized).
class ScratchSpace {
 public:
  virtual ~ScratchSpace() = default;
  // At least `bytes`; nullptr with *error set on failure.
  virtual std::byte* Get(size_t bytes, cudaError_t* error) = 0;
};

// Device memory that grows on demand and is kept.
class DeviceScratch final : public ScratchSpace {
 public:
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch() override;

  // On the current device. Growing frees the old buffer first (cudaFree waits for the work
  // using it) and allocates with cudaMalloc.
  std::byte* Get(size_t bytes, cudaError_t* error) override;

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  int device_ = -1;
};

// Where and with what the NCCL executor runs a call, besides its arguments: NCCL's entry points
// and the device's operations (a GPU's, or the tests' host functions), the communicator, the
// stream (of the device the communicator uses) and the memory for messages.
struct NcclCallContext {
  const NcclPointToPoint& nccl;
  const DeviceOps& device;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  ScratchSpace& scratch;
};

// Enqueues `program` (lowered for args' placement) as its rank on `on.stream`. A step's send and
// receive travel as one message per run of consecutive chunks, which sender and receiver cut alike
// (NCCL matches messages in order). Bad arguments are InvalidArgument (CheckAllReduceArgs); a
// failed send/recv/group/collective call is Internal saying which, carrying NCCL's code unchanged,
// and a CUDA failure carries ncclUnhandledCudaError (kernels/exec/library_code.h). A program
// lowered with native_pre_arrival needs `native` (every rank of the call passes it alike); the
// others ignore it.
namespace nccl {
absl::Status Run(const RankProgram& program, const AllReduceArgs& args, const NcclCallContext& on,
                 const NativePreArrival* native = nullptr);
}  // namespace nccl

}  // namespace stragglar
