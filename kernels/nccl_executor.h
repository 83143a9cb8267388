// Executes any plan on GPUs: each round is one NCCL group of send/recv between the ranks, and our
// CUDA reduction kernels apply what arrived; everything is enqueued on the caller's stream, so a
// call returns before the GPU has run it, like NCCL's own AllReduce. The same plans and per-rank
// steps as the host and MPI executors; only the transport differs.
//
// StragglAR's pre-arrival ReduceScatter runs as the plan's own send/recv rounds among the ready
// ranks. (The alternative, NCCL's ReduceScatter on a cached sub-communicator without the
// straggler, needs one communicator per straggler and a chunk layout matching NCCL's; it is not
// built. docs/nccl.md says why and what a GPU measurement should compare.)
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/plan.h"
#include "kernels/rank_steps.h"
#include "kernels/reduce.h"

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

struct GpuAllReduceArgs {
  const void* send = nullptr;  // device memory, never modified; may equal `recv` (in place)
  void* recv = nullptr;
  int64_t count = 0;  // elements per rank, the same on every rank
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
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

// One message of a round: chunks [first_chunk, first_chunk + num_chunks), which lie next to each
// other in every buffer. A transfer's chunks become one message per run of consecutive chunk
// indices, which sender and receiver compute alike (NCCL matches them in order).
struct ChunkRun {
  int32_t first_chunk = 0;
  int32_t num_chunks = 0;
};

// A plan prepared for one rank, once (gloo-style: everything that does not depend on the call's
// buffers and count is computed here); Run() then enqueues a call.
class NcclPlanExecutor {
 public:
  // InvalidArgument for a plan this rank cannot execute (see RankSteps). `plan` must outlive the
  // executor (plans live in the chooser's cache).
  static absl::StatusOr<NcclPlanExecutor> Create(const Plan& plan, int rank);

  // Enqueues the AllReduce on `stream` (of the device `comm` uses). Returns NCCL's error from a
  // send/recv/group call unchanged, ncclUnhandledCudaError for a CUDA failure and
  // ncclInvalidArgument for bad arguments, with `*error` saying what failed.
  ncclResult_t Run(const GpuAllReduceArgs& args, const NcclPointToPoint& nccl,
                   const DeviceOps& device, ncclComm_t comm, cudaStream_t stream,
                   ScratchSpace& scratch, std::string* error) const;

  const Plan& plan() const { return *plan_; }

 private:
  struct Step {
    int32_t send_peer = -1;  // -1: this rank sends nothing this round
    int32_t receive_peer = -1;
    TransferOp receive_op = TransferOp::kCopy;
    std::vector<ChunkRun> send_runs;
    std::vector<ChunkRun> receive_runs;
    // Per receive run: a copy that this rank does not also send this round lands straight in
    // the result, with no pass through scratch.
    std::vector<bool> receive_in_place;
  };
  NcclPlanExecutor(const Plan& plan, int rank) : plan_(&plan), rank_(rank) {}

  const Plan* plan_;
  int rank_;
  std::vector<Step> steps_;
};

}  // namespace stragglar
