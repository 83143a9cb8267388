// Executes any plan on GPUs: each round is one NCCL group of send/recv between the ranks, and our
// CUDA reduction kernels apply what arrived; everything is enqueued on the caller's stream, so a
// call returns before the GPU has run it, like NCCL's own AllReduce. The same plans and per-rank
// steps as the host and MPI executors; only the transport differs.
//
// StragglAR's pre-arrival ReduceScatter among the ready ranks runs either as the plan's own
// send/recv rounds or, given a communicator of the ready ranks (NativePreArrival), as one NCCL
// collective on it: ncclReduceScatter when the blocks are equal, else one ncclReduce per block in a
// group. Both leave each ready rank's block complete and its other chunks at its own input, which
// is all the post-arrival rounds read. docs/nccl.md compares them.
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

// NCCL's ReduceScatter and Reduce (the pnccl* names), for StragglAR's pre-arrival phase.
struct NcclCollectives {
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t) = nullptr;
};

// StragglAR's pre-arrival ReduceScatter as NCCL collectives on `ready_comm`: the ready ranks only,
// each at the index of the block it owns (NcclPlanExecutor::PreArrivalBlock), e.g. from
// ncclCommSplit with that index as the key and NCCL_SPLIT_NOCOLOR for the straggler.
struct NativePreArrival {
  NcclCollectives nccl;
  ncclComm_t ready_comm = nullptr;  // nullptr on the straggler, which takes no part
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
  // send/recv/group/collective call unchanged, ncclUnhandledCudaError for a CUDA failure and
  // ncclInvalidArgument for bad arguments, with `*error` saying what failed. With `native` (and a
  // plan for which SupportsNativePreArrival()), the pre-arrival rounds run as NCCL collectives;
  // every rank of the call must pass it alike.
  ncclResult_t Run(const GpuAllReduceArgs& args, const NcclPointToPoint& nccl,
                   const DeviceOps& device, ncclComm_t comm, cudaStream_t stream,
                   ScratchSpace& scratch, std::string* error,
                   const NativePreArrival* native = nullptr) const;

  const Plan& plan() const { return *plan_; }

  // True for StragglAR plans whose pre-arrival rounds end with every ready rank owning one block
  // of equally many adjacent chunks (what the synthesizer's ring ReduceScatter leaves), on every
  // rank of the plan alike.
  bool SupportsNativePreArrival() const { return pre_arrival_blocks_ > 0; }
  // The block this rank owns after the pre-arrival phase, in [0, ready ranks); -1 on the straggler
  // or without SupportsNativePreArrival().
  int PreArrivalBlock() const { return pre_arrival_block_; }

 private:
  struct Step {
    int32_t round = 0;
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

  // Sets pre_arrival_blocks_ and pre_arrival_block_ when the plan qualifies.
  void FindPreArrivalBlocks();
  // Enqueues the pre-arrival phase as collectives on native.ready_comm (grouped with `groups`).
  ncclResult_t RunNativePreArrival(const GpuAllReduceArgs& args, const NcclPointToPoint& groups,
                                   const NativePreArrival& native,
                                   const std::vector<int64_t>& offsets, cudaStream_t stream,
                                   std::string* error) const;

  const Plan* plan_;
  int rank_;
  std::vector<Step> steps_;
  int pre_arrival_blocks_ = 0;  // the ready ranks; 0: the plan has no such phase
  int pre_arrival_block_ = -1;
};

}  // namespace stragglar
