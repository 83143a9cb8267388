#include "kernels/nccl_executor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda_reduce.h"
#include "kernels/nccl_types.h"

namespace stragglar {
namespace {

// Runs of consecutive chunk indices, in the transfer's order.
std::vector<ChunkRun> RunsOf(const ChunkList& chunks) {
  std::vector<ChunkRun> runs;
  for (int32_t chunk : chunks) {
    if (!runs.empty() && runs.back().first_chunk + runs.back().num_chunks == chunk) {
      ++runs.back().num_chunks;
    } else {
      runs.push_back({.first_chunk = chunk, .num_chunks = 1});
    }
  }
  return runs;
}

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
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != device_) cudaSetDevice(device_);
  cudaFree(data_);
  if (current >= 0 && current != device_) cudaSetDevice(current);
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

absl::StatusOr<NcclPlanExecutor> NcclPlanExecutor::Create(const Plan& plan, int rank) {
  if (rank < 0 || rank >= plan.num_ranks || plan.num_chunks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("plan for ", plan.num_ranks, " ranks and ",
                                                   plan.num_chunks, " chunks; rank ", rank));
  }
  absl::StatusOr<std::vector<RankStep>> rank_steps = RankSteps(plan, rank);
  if (!rank_steps.ok()) return rank_steps.status();
  NcclPlanExecutor executor(plan, rank);
  for (const RankStep& rank_step : *rank_steps) {
    Step step{.round = rank_step.round};
    if (rank_step.send != nullptr) {
      step.send_peer = rank_step.send->dst;
      step.send_runs = RunsOf(rank_step.send->chunks);
    }
    if (rank_step.receive != nullptr) {
      const Transfer& receive = *rank_step.receive;
      step.receive_peer = receive.src;
      step.receive_op = receive.op;
      step.receive_runs = RunsOf(receive.chunks);
      for (const ChunkRun& run : step.receive_runs) {
        bool in_place = receive.op == TransferOp::kCopy;
        for (int32_t chunk = run.first_chunk; in_place && chunk < run.first_chunk + run.num_chunks;
             ++chunk) {
          in_place = rank_step.send == nullptr ||
                     std::find(rank_step.send->chunks.begin(), rank_step.send->chunks.end(),
                               chunk) == rank_step.send->chunks.end();
        }
        step.receive_in_place.push_back(in_place);
      }
    }
    executor.steps_.push_back(std::move(step));
  }
  executor.FindPreArrivalBlocks();
  return executor;
}

void NcclPlanExecutor::FindPreArrivalBlocks() {
  const Plan& plan = *plan_;
  const int blocks = plan.num_ranks - 1;
  if (plan.algorithm != Algorithm::kStragglar || !plan.straggler.has_value() ||
      plan.pre_arrival_rounds < 1 || plan.pre_arrival_rounds > plan.num_rounds() || blocks < 2 ||
      plan.num_chunks % blocks != 0) {
    return;
  }
  // A ReduceScatter's last round completes what it delivers: each receiver's block.
  const int pieces = plan.num_chunks / blocks;
  std::vector<int> owner(blocks, -1);
  std::vector<int> block_of(plan.num_ranks, -1);
  for (const Transfer& transfer : plan.rounds[plan.pre_arrival_rounds - 1].transfers) {
    const ChunkList& chunks = transfer.chunks;
    if (static_cast<int>(chunks.size()) != pieces || chunks[0] < 0 || chunks[0] % pieces != 0 ||
        chunks[0] >= plan.num_chunks || transfer.dst < 0 || transfer.dst >= plan.num_ranks ||
        transfer.dst == *plan.straggler) {
      return;
    }
    for (int i = 1; i < pieces; ++i) {
      if (chunks[i] != chunks[0] + i) return;
    }
    const int block = chunks[0] / pieces;
    if (owner[block] != -1 || block_of[transfer.dst] != -1) return;
    owner[block] = transfer.dst;
    block_of[transfer.dst] = block;
  }
  if (std::find(owner.begin(), owner.end(), -1) != owner.end()) return;
  pre_arrival_blocks_ = blocks;
  pre_arrival_block_ = block_of[rank_];
}

ncclResult_t NcclPlanExecutor::RunNativePreArrival(const GpuAllReduceArgs& args,
                                                   const NcclPointToPoint& groups,
                                                   const NativePreArrival& native,
                                                   const std::vector<int64_t>& offsets,
                                                   cudaStream_t stream, std::string* error) const {
  const int blocks = pre_arrival_blocks_;
  const int pieces = plan_->num_chunks / blocks;
  const int64_t element_size = DataTypeSize(args.type);
  const ncclDataType_t type = NcclDataType(args.type);
  const ncclRedOp_t op = PreArrivalOp(args.op);
  const std::byte* input = static_cast<const std::byte*>(args.send);
  std::byte* result = static_cast<std::byte*>(args.recv);
  auto block_at = [&](int block) { return offsets[block * pieces]; };
  if (args.count % blocks == 0) {
    // Equal blocks: NCCL's ReduceScatter lays them out as the plan does (in place too, since
    // this rank's index in ready_comm is its block).
    const size_t per_block = args.count / blocks;
    if (per_block == 0) return ncclSuccess;
    const ncclResult_t code =
        native.nccl.reduce_scatter(input, result + block_at(pre_arrival_block_), per_block, type,
                                   op, native.ready_comm, stream);
    if (code != ncclSuccess) *error = "ncclReduceScatter (pre-arrival) failed";
    return code;
  }
  // Blocks differ by one element, which ReduceScatter cannot express: one Reduce per block, to
  // its owner, grouped so that NCCL runs them together.
  if (ncclResult_t code = groups.group_start(); code != ncclSuccess) {
    *error = "ncclGroupStart (pre-arrival) failed";
    return code;
  }
  ncclResult_t posted = ncclSuccess;
  for (int block = 0; block < blocks && posted == ncclSuccess; ++block) {
    const int64_t begin = block_at(block);
    const int64_t bytes = block_at(block + 1) - begin;
    if (bytes == 0) continue;
    posted = native.nccl.reduce(input + begin, result + begin, bytes / element_size, type, op,
                                block, native.ready_comm, stream);
    if (posted != ncclSuccess) *error = absl::StrCat("ncclReduce (pre-arrival, block ", block, ")");
  }
  const ncclResult_t ended = groups.group_end();
  if (posted != ncclSuccess) return posted;
  if (ended != ncclSuccess) *error = "ncclGroupEnd (pre-arrival) failed";
  return ended;
}

ncclResult_t NcclPlanExecutor::Run(const GpuAllReduceArgs& args, const NcclPointToPoint& nccl,
                                   const DeviceOps& device, ncclComm_t comm, cudaStream_t stream,
                                   ScratchSpace& scratch, std::string* error,
                                   const NativePreArrival* native) const {
  const Plan& plan = *plan_;
  if (args.count < 0 || (args.count > 0 && (args.send == nullptr || args.recv == nullptr))) {
    *error = absl::StrCat("rank ", rank_, ": bad count ", args.count, " or null buffer");
    return ncclInvalidArgument;
  }
  const int64_t element_size = DataTypeSize(args.type);
  const std::vector<int64_t> offsets = ChunkByteOffsets(args.count, element_size, plan.num_chunks);
  auto run_bytes = [&offsets](const ChunkRun& run) {
    return offsets[run.first_chunk + run.num_chunks] - offsets[run.first_chunk];
  };
  const std::byte* input = static_cast<const std::byte*>(args.send);
  std::byte* result = static_cast<std::byte*>(args.recv);
  const bool in_place = input == result;

  // Scratch: what one round receives outside the result, then (out of place) what it packs.
  int64_t receive_scratch = 0, pack_scratch = 0;
  for (const Step& step : steps_) {
    int64_t received = 0, sent = 0;
    for (size_t i = 0; i < step.receive_runs.size(); ++i) {
      if (!step.receive_in_place[i]) received += run_bytes(step.receive_runs[i]);
    }
    for (const ChunkRun& run : step.send_runs) sent += run_bytes(run);
    receive_scratch = std::max(receive_scratch, received);
    if (!in_place) pack_scratch = std::max(pack_scratch, sent);
  }
  std::byte* incoming = nullptr;
  std::byte* packed = nullptr;
  if (receive_scratch + pack_scratch > 0) {
    cudaError_t code = cudaSuccess;
    // 256-byte alignment keeps the reduction kernels on their vector path.
    const int64_t pack_at = (receive_scratch + 255) / 256 * 256;
    incoming = scratch.Get(pack_at + pack_scratch, &code);
    if (incoming == nullptr) return CudaFailure("cudaMalloc (scratch)", code, error);
    packed = incoming + pack_at;
  }

  // Out of place, a chunk is read from `send` until this rank first writes it into `recv`.
  std::vector<bool> written(plan.num_chunks, in_place);
  auto current = [&](int32_t chunk) -> const std::byte* {
    return (written[chunk] ? result : input) + offsets[chunk];
  };
  auto uniform = [&](const ChunkRun& run) {
    for (int32_t chunk = run.first_chunk + 1; chunk < run.first_chunk + run.num_chunks; ++chunk) {
      if (written[chunk] != written[run.first_chunk]) return false;
    }
    return true;
  };

  // The pre-arrival phase as NCCL collectives: this rank's block complete, its other chunks as
  // they were.
  const bool native_pre_arrival = native != nullptr && SupportsNativePreArrival();
  if (native_pre_arrival && pre_arrival_block_ >= 0) {
    if (ncclResult_t code = RunNativePreArrival(args, nccl, *native, offsets, stream, error);
        code != ncclSuccess) {
      return code;
    }
    const int pieces = plan.num_chunks / pre_arrival_blocks_;
    std::fill_n(written.begin() + pre_arrival_block_ * pieces, pieces, true);
  }

  // Where each message of a round goes from and lands (reused across rounds).
  std::vector<const std::byte*> send_from;
  std::vector<std::byte*> receive_into;
  for (const Step& step : steps_) {
    if (native_pre_arrival && step.round < plan.pre_arrival_rounds) continue;
    // Sends read the chunks as of the start of the round: earlier rounds' kernels and any
    // packing precede them on the stream.
    send_from.clear();
    receive_into.clear();
    int64_t packed_at = 0;
    for (const ChunkRun& run : step.send_runs) {
      if (uniform(run)) {
        send_from.push_back(current(run.first_chunk));
        continue;
      }
      std::byte* target = packed + packed_at;
      for (int32_t chunk = run.first_chunk; chunk < run.first_chunk + run.num_chunks; ++chunk) {
        const int64_t bytes = offsets[chunk + 1] - offsets[chunk];
        if (cudaError_t code = device.copy(target, current(chunk), bytes, stream);
            code != cudaSuccess) {
          return CudaFailure("cudaMemcpyAsync (pack)", code, error);
        }
        target += bytes;
      }
      send_from.push_back(packed + packed_at);
      packed_at += run_bytes(run);
    }
    int64_t incoming_at = 0;
    for (size_t i = 0; i < step.receive_runs.size(); ++i) {
      const ChunkRun& run = step.receive_runs[i];
      if (step.receive_in_place[i]) {
        receive_into.push_back(result + offsets[run.first_chunk]);
      } else {
        receive_into.push_back(incoming + incoming_at);
        incoming_at += run_bytes(run);
      }
    }

    if (ncclResult_t code = nccl.group_start(); code != ncclSuccess) {
      *error = "ncclGroupStart failed";
      return code;
    }
    ncclResult_t posted = ncclSuccess;
    for (size_t i = 0; i < step.receive_runs.size() && posted == ncclSuccess; ++i) {
      const int64_t bytes = run_bytes(step.receive_runs[i]);
      if (bytes > 0) {
        posted = nccl.recv(receive_into[i], bytes, ncclUint8, step.receive_peer, comm, stream);
        if (posted != ncclSuccess) *error = absl::StrCat("ncclRecv from rank ", step.receive_peer);
      }
    }
    for (size_t i = 0; i < step.send_runs.size() && posted == ncclSuccess; ++i) {
      const int64_t bytes = run_bytes(step.send_runs[i]);
      if (bytes > 0) {
        posted = nccl.send(send_from[i], bytes, ncclUint8, step.send_peer, comm, stream);
        if (posted != ncclSuccess) *error = absl::StrCat("ncclSend to rank ", step.send_peer);
      }
    }
    // The group is closed even after a failed post, so this thread's group depth stays right.
    const ncclResult_t ended = nccl.group_end();
    if (posted != ncclSuccess) return posted;
    if (ended != ncclSuccess) {
      *error = "ncclGroupEnd failed";
      return ended;
    }

    // Apply what arrived, in stream order after the group.
    incoming_at = 0;
    for (size_t i = 0; i < step.receive_runs.size(); ++i) {
      const ChunkRun& run = step.receive_runs[i];
      const int64_t bytes = run_bytes(run);
      if (step.receive_in_place[i]) {
        for (int32_t c = run.first_chunk; c < run.first_chunk + run.num_chunks; ++c) {
          written[c] = true;
        }
        continue;
      }
      const std::byte* data = incoming + incoming_at;
      incoming_at += bytes;
      if (bytes == 0) continue;
      std::byte* target = result + offsets[run.first_chunk];
      cudaError_t code = cudaSuccess;
      if (step.receive_op == TransferOp::kCopy) {
        code = device.copy(target, data, bytes, stream);
      } else if (uniform(run)) {
        // One launch for the run; `first` == nullptr reduces into the result in place.
        code = device.reduce(args.type, args.op, target,
                             written[run.first_chunk] ? nullptr : current(run.first_chunk), data,
                             bytes / element_size, stream);
      } else {
        for (int32_t c = run.first_chunk;
             c < run.first_chunk + run.num_chunks && code == cudaSuccess; ++c) {
          const int64_t chunk_bytes = offsets[c + 1] - offsets[c];
          code = device.reduce(
              args.type, args.op, result + offsets[c], written[c] ? nullptr : current(c),
              data + (offsets[c] - offsets[run.first_chunk]), chunk_bytes / element_size, stream);
        }
      }
      if (code != cudaSuccess) {
        return CudaFailure(step.receive_op == TransferOp::kCopy ? "cudaMemcpyAsync (receive)"
                                                                : "reduction kernel launch",
                           code, error);
      }
      for (int32_t c = run.first_chunk; c < run.first_chunk + run.num_chunks; ++c) {
        written[c] = true;
      }
    }
  }

  // The chunks this rank never wrote hold its own input (out of place), and kAvg divides once:
  // FinishAllReduce's rules, on the device.
  for (int32_t chunk = 0; chunk < plan.num_chunks; ++chunk) {
    const int64_t bytes = offsets[chunk + 1] - offsets[chunk];
    if (written[chunk] || bytes == 0) continue;
    if (cudaError_t code =
            device.copy(result + offsets[chunk], input + offsets[chunk], bytes, stream);
        code != cudaSuccess) {
      return CudaFailure("cudaMemcpyAsync (own chunk)", code, error);
    }
  }
  if (cudaError_t code =
          device.finalize(args.type, args.op, result, args.count, plan.num_ranks, stream);
      code != cudaSuccess) {
    return CudaFailure("average kernel launch", code, error);
  }
  return ncclSuccess;
}

}  // namespace stragglar
