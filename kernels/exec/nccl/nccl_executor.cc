#include "kernels/exec/nccl/nccl_executor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_scope.h"
#include "kernels/exec/call_buffers.h"
#include "kernels/exec/library_code.h"
#include "kernels/exec/nccl/nccl_types.h"
#include "kernels/reduce/cuda_reduce.h"

namespace stragglar {
namespace {

ncclResult_t CudaFailure(absl::string_view call, cudaError_t code, std::string* error) {
  *error = absl::StrCat(call, ": ", cudaGetErrorString(code));
  return ncclUnhandledCudaError;
}

cudaError_t CopyOnDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
}

// The pre-arrival collectives sum for kAvg: the division comes once, at the end of the call.
ncclRedOp_t PreArrivalOp(ReduceOp op) { return op == ReduceOp::kAvg ? ncclSum : NcclRedOp(op); }

}  // namespace

const DeviceOps& CudaDeviceOps() {
  static constexpr DeviceOps kOps{
      .copy = CopyOnDevice, .reduce = LaunchReduce, .finalize = LaunchFinalizeReduction};
  return kOps;
}

DeviceScratch::~DeviceScratch() {
  if (data_ == nullptr) return;
  // Free on the device it came from; nothing to report from a destructor.
  DeviceScope scope(device_);
  cudaFree(data_);
}

std::byte* DeviceScratch::Get(size_t bytes, cudaError_t* error) {
  *error = cudaSuccess;
  if (bytes <= size_ && data_ != nullptr) return static_cast<std::byte*>(data_);
  if (data_ != nullptr) {
    *error = cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
    if (*error != cudaSuccess) return nullptr;
  }
  // Round up so that slowly growing calls do not reallocate every time.
  const size_t size = std::max<size_t>(bytes, 1 << 20);
  if ((*error = cudaGetDevice(&device_)) != cudaSuccess) return nullptr;
  if ((*error = cudaMalloc(&data_, size)) != cudaSuccess) {
    data_ = nullptr;
    return nullptr;
  }
  size_ = size;
  return static_cast<std::byte*>(data_);
}

namespace {

// The extents of a step, a run of consecutive chunk indices (one message) at a time.
struct MessageRun {
  int32_t first_extent = 0;
  int32_t end_extent = 0;  // one past the last
};

// Fills `runs` (reused across steps, so that a call allocates them once).
void RunsOf(const RankProgram& program, int32_t first, int32_t count,
            std::vector<MessageRun>& runs) {
  runs.clear();
  for (int32_t i = first; i < first + count; ++i) {
    if (runs.empty() || program.extents[i].starts_run) runs.push_back({i, i});
    runs.back().end_extent = i + 1;
  }
}

// One call of a program, enqueued on a stream.
class NcclCall {
 public:
  NcclCall(const RankProgram& program, const AllReduceArgs& args, const NcclPointToPoint& nccl,
           const DeviceOps& device, ncclComm_t comm, cudaStream_t stream, std::string* error)
      : program_(program),
        args_(args),
        nccl_(nccl),
        device_(device),
        comm_(comm),
        stream_(stream),
        error_(error),
        buffers_(program, args) {}

  ncclResult_t Run(ScratchSpace& scratch, const NativePreArrival* native);

 private:
  // A run's chunks are consecutive (RunsOf): from its first extent's first to its last's end.
  int64_t RunBytes(const MessageRun& run) const {
    const ProgramExtent& first = program_.extents[run.first_extent];
    const ProgramExtent& last = program_.extents[run.end_extent - 1];
    return buffers_.ChunksBytes(first.first_chunk,
                                last.first_chunk + last.num_chunks - first.first_chunk);
  }
  // A sent run lies in one buffer when all its extents do; otherwise it is packed first.
  bool OneBuffer(const MessageRun& run) const {
    for (int32_t i = run.first_extent + 1; i < run.end_extent; ++i) {
      if (program_.extents[i].buffer != program_.extents[run.first_extent].buffer) return false;
    }
    return true;
  }
  // A received copy lands straight in the result unless this step also sends those chunks.
  bool IntoResult(const ProgramStep& step, const MessageRun& run) const {
    if (step.receive_op != TransferOp::kCopy) return false;
    for (int32_t i = run.first_extent; i < run.end_extent; ++i) {
      if (program_.extents[i].overlaps_send) return false;
    }
    return true;
  }
  ncclResult_t Fail(absl::string_view call, cudaError_t code) {
    return CudaFailure(call, code, error_);
  }
  ncclResult_t AllocateScratch(ScratchSpace& scratch);
  ncclResult_t RunNativePreArrival(const NativePreArrival& native);
  ncclResult_t RunStep(const ProgramStep& step);
  ncclResult_t Exchange(const ProgramStep& step, const std::vector<MessageRun>& sends,
                        const std::vector<MessageRun>& receives);
  ncclResult_t Apply(const ProgramStep& step, const std::vector<MessageRun>& receives);
  ncclResult_t Finish();

  const RankProgram& program_;
  const AllReduceArgs& args_;
  const NcclPointToPoint& nccl_;
  const DeviceOps& device_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  std::string* error_;
  const CallBuffers buffers_;
  std::byte* incoming_ = nullptr;  // what a step receives outside the result
  std::byte* packed_ = nullptr;    // what a step sends from both buffers, packed
  // The current step's messages, and where each goes from and lands (reused across steps).
  std::vector<MessageRun> sends_, receives_;
  std::vector<const std::byte*> send_from_;
  std::vector<std::byte*> receive_into_;
};

ncclResult_t NcclCall::AllocateScratch(ScratchSpace& scratch) {
  // Scratch: what one step receives outside the result, then what it packs.
  int64_t receive_scratch = 0, pack_scratch = 0;
  for (const ProgramStep& step : program_.steps) {
    int64_t received = 0, packed = 0;
    RunsOf(program_, step.first_receive, step.num_receives, receives_);
    for (const MessageRun& run : receives_) {
      if (!IntoResult(step, run)) received += RunBytes(run);
    }
    RunsOf(program_, step.first_send, step.num_sends, sends_);
    for (const MessageRun& run : sends_) {
      if (!OneBuffer(run)) packed += RunBytes(run);
    }
    receive_scratch = std::max(receive_scratch, received);
    pack_scratch = std::max(pack_scratch, packed);
  }
  if (receive_scratch + pack_scratch == 0) return ncclSuccess;
  cudaError_t code = cudaSuccess;
  // 256-byte alignment keeps the reduction kernels on their vector path.
  const int64_t pack_at = (receive_scratch + 255) / 256 * 256;
  incoming_ = scratch.Get(pack_at + pack_scratch, &code);
  if (incoming_ == nullptr) return Fail("cudaMalloc (scratch)", code);
  packed_ = incoming_ + pack_at;
  return ncclSuccess;
}

ncclResult_t NcclCall::RunNativePreArrival(const NativePreArrival& native) {
  const int blocks = program_.pre_arrival_blocks;
  const int pieces = program_.num_chunks / blocks;
  const ncclDataType_t type = NcclDataType(args_.type);
  const ncclRedOp_t op = PreArrivalOp(args_.op);
  auto block_at = [&](int block) { return buffers_.offsets()[block * pieces]; };
  if (args_.count % blocks == 0) {
    // Equal blocks: NCCL's ReduceScatter lays them out as the plan does (in place too, since
    // this rank's index in ready_comm is its block).
    const size_t per_block = args_.count / blocks;
    if (per_block == 0) return ncclSuccess;
    const ncclResult_t code = native.nccl.reduce_scatter(
        buffers_.input(), buffers_.result() + block_at(program_.pre_arrival_block), per_block, type,
        op, native.ready_comm, stream_);
    if (code != ncclSuccess) *error_ = "ncclReduceScatter (pre-arrival) failed";
    return code;
  }
  // Blocks differ by one element, which ReduceScatter cannot express: one Reduce per block, to
  // its owner, grouped so that NCCL runs them together.
  if (ncclResult_t code = nccl_.group_start(); code != ncclSuccess) {
    *error_ = "ncclGroupStart (pre-arrival) failed";
    return code;
  }
  ncclResult_t posted = ncclSuccess;
  for (int block = 0; block < blocks && posted == ncclSuccess; ++block) {
    const int64_t begin = block_at(block);
    const int64_t bytes = block_at(block + 1) - begin;
    if (bytes == 0) continue;
    posted = native.nccl.reduce(buffers_.input() + begin, buffers_.result() + begin,
                                bytes / buffers_.element_size(), type, op, block, native.ready_comm,
                                stream_);
    if (posted != ncclSuccess) {
      *error_ = absl::StrCat("ncclReduce (pre-arrival, block ", block, ")");
    }
  }
  const ncclResult_t ended = nccl_.group_end();
  if (posted != ncclSuccess) return posted;
  if (ended != ncclSuccess) *error_ = "ncclGroupEnd (pre-arrival) failed";
  return ended;
}

// Posts the step's messages as one NCCL group. Sends read the chunks as of the start of the
// round: earlier steps' kernels and any packing precede them on the stream.
ncclResult_t NcclCall::Exchange(const ProgramStep& step, const std::vector<MessageRun>& sends,
                                const std::vector<MessageRun>& receives) {
  send_from_.clear();
  receive_into_.clear();
  int64_t packed_at = 0;
  for (const MessageRun& run : sends) {
    const ProgramExtent& first = program_.extents[run.first_extent];
    if (OneBuffer(run)) {
      send_from_.push_back(buffers_.Own(first.buffer, first.first_chunk));
      continue;
    }
    std::byte* target = packed_ + packed_at;
    for (int32_t i = run.first_extent; i < run.end_extent; ++i) {
      const ProgramExtent& extent = program_.extents[i];
      const int64_t bytes = buffers_.ChunksBytes(extent.first_chunk, extent.num_chunks);
      if (bytes == 0) continue;
      if (cudaError_t code =
              device_.copy(target, buffers_.Own(extent.buffer, extent.first_chunk), bytes, stream_);
          code != cudaSuccess) {
        return Fail("cudaMemcpyAsync (pack)", code);
      }
      target += bytes;
    }
    send_from_.push_back(packed_ + packed_at);
    packed_at += RunBytes(run);
  }
  int64_t incoming_at = 0;
  for (const MessageRun& run : receives) {
    if (IntoResult(step, run)) {
      receive_into_.push_back(buffers_.ResultChunk(program_.extents[run.first_extent].first_chunk));
    } else {
      receive_into_.push_back(incoming_ + incoming_at);
      incoming_at += RunBytes(run);
    }
  }
  if (ncclResult_t code = nccl_.group_start(); code != ncclSuccess) {
    *error_ = "ncclGroupStart failed";
    return code;
  }
  ncclResult_t posted = ncclSuccess;
  for (size_t i = 0; i < receives.size() && posted == ncclSuccess; ++i) {
    const int64_t bytes = RunBytes(receives[i]);
    if (bytes == 0) continue;
    posted = nccl_.recv(receive_into_[i], bytes, ncclUint8, step.receive_peer, comm_, stream_);
    if (posted != ncclSuccess) *error_ = absl::StrCat("ncclRecv from rank ", step.receive_peer);
  }
  for (size_t i = 0; i < sends.size() && posted == ncclSuccess; ++i) {
    const int64_t bytes = RunBytes(sends[i]);
    if (bytes == 0) continue;
    posted = nccl_.send(send_from_[i], bytes, ncclUint8, step.send_peer, comm_, stream_);
    if (posted != ncclSuccess) *error_ = absl::StrCat("ncclSend to rank ", step.send_peer);
  }
  // The group is closed even after a failed post, so this thread's group depth stays right.
  const ncclResult_t ended = nccl_.group_end();
  if (posted != ncclSuccess) return posted;
  if (ended != ncclSuccess) *error_ = "ncclGroupEnd failed";
  return ended;
}

// Applies what arrived outside the result, in stream order after the group: a copied run in one
// copy, a reduced run in one launch per stretch of extents whose own value lies in one buffer.
ncclResult_t NcclCall::Apply(const ProgramStep& step, const std::vector<MessageRun>& receives) {
  for (size_t r = 0; r < receives.size(); ++r) {
    const MessageRun& run = receives[r];
    if (IntoResult(step, run) || RunBytes(run) == 0) continue;
    const std::byte* data = receive_into_[r];
    const int32_t run_chunk = program_.extents[run.first_extent].first_chunk;
    if (step.receive_op == TransferOp::kCopy) {
      if (cudaError_t code =
              device_.copy(buffers_.ResultChunk(run_chunk), data, RunBytes(run), stream_);
          code != cudaSuccess) {
        return Fail("cudaMemcpyAsync (receive)", code);
      }
      continue;
    }
    for (int32_t i = run.first_extent; i < run.end_extent;) {
      const Buffer buffer = program_.extents[i].buffer;
      const int32_t first_chunk = program_.extents[i].first_chunk;
      int32_t chunks = 0;
      for (; i < run.end_extent && program_.extents[i].buffer == buffer; ++i) {
        chunks += program_.extents[i].num_chunks;
      }
      const int64_t bytes = buffers_.ChunksBytes(first_chunk, chunks);
      if (bytes == 0) continue;
      // `first` == nullptr reduces into the result in place.
      if (cudaError_t code = device_.reduce(
              args_.type, args_.op, buffers_.ResultChunk(first_chunk),
              buffer == Buffer::kResult ? nullptr : buffers_.Own(buffer, first_chunk),
              data + (buffers_.offsets()[first_chunk] - buffers_.offsets()[run_chunk]),
              bytes / buffers_.element_size(), stream_);
          code != cudaSuccess) {
        return Fail("reduction kernel launch", code);
      }
    }
  }
  return ncclSuccess;
}

ncclResult_t NcclCall::RunStep(const ProgramStep& step) {
  RunsOf(program_, step.first_send, step.num_sends, sends_);
  RunsOf(program_, step.first_receive, step.num_receives, receives_);
  if (ncclResult_t code = Exchange(step, sends_, receives_); code != ncclSuccess) return code;
  return Apply(step, receives_);
}

// The chunks no step wrote hold this rank's own input (out of place), and kAvg divides once.
ncclResult_t NcclCall::Finish() {
  for (const ProgramExtent& extent : program_.finish) {
    const int64_t bytes = buffers_.ChunksBytes(extent.first_chunk, extent.num_chunks);
    if (bytes == 0) continue;
    if (cudaError_t code =
            device_.copy(buffers_.ResultChunk(extent.first_chunk),
                         buffers_.Own(Buffer::kInput, extent.first_chunk), bytes, stream_);
        code != cudaSuccess) {
      return Fail("cudaMemcpyAsync (own chunk)", code);
    }
  }
  if (cudaError_t code = device_.finalize(args_.type, args_.op, buffers_.result(), args_.count,
                                          program_.num_ranks, stream_);
      code != cudaSuccess) {
    return Fail("average kernel launch", code);
  }
  return ncclSuccess;
}

ncclResult_t NcclCall::Run(ScratchSpace& scratch, const NativePreArrival* native) {
  if (ncclResult_t code = AllocateScratch(scratch); code != ncclSuccess) return code;
  // The pre-arrival phase as NCCL collectives: this rank's block complete, its other chunks as
  // they were.
  if (program_.placement.native_pre_arrival && program_.pre_arrival_block >= 0) {
    if (ncclResult_t code = RunNativePreArrival(*native); code != ncclSuccess) return code;
  }
  for (const ProgramStep& step : program_.steps) {
    if (ncclResult_t code = RunStep(step); code != ncclSuccess) return code;
  }
  return Finish();
}

}  // namespace

absl::Status nccl::Run(const RankProgram& program, const AllReduceArgs& args,
                       const NcclCallContext& on, const NativePreArrival* native) {
  if (absl::Status status = CheckAllReduceArgs(program, args); !status.ok()) return status;
  if (program.placement.native_pre_arrival && native == nullptr) {
    return absl::InvalidArgumentError(
        "the program leaves the pre-arrival phase to NCCL, but no ready ranks' communicator "
        "was given");
  }
  std::string error;
  const ncclResult_t result =
      NcclCall(program, args, on.nccl, on.device, on.comm, on.stream, &error)
          .Run(on.scratch, native);
  if (result == ncclSuccess) return absl::OkStatus();
  return WithLibraryCode(
      absl::InternalError(error.empty() ? absl::StrCat("NCCL returned ", result) : error), result);
}

}  // namespace stragglar
