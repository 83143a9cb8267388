#include "kernels/exec/device/device_executor.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stragglar {
namespace {

// Appends `items` to `bytes` at the next multiple of 8; returns their offset.
template <typename T>
int64_t Append(const std::vector<T>& items, std::vector<std::byte>& bytes) {
  const int64_t offset = (static_cast<int64_t>(bytes.size()) + 7) / 8 * 8;
  bytes.resize(offset + items.size() * sizeof(T));
  if (!items.empty()) std::memcpy(bytes.data() + offset, items.data(), items.size() * sizeof(T));
  return offset;
}

// The program's arrays back to back, and where each starts.
struct Packed {
  std::vector<std::byte> bytes;
  int64_t steps, extents, waits, drain, chunk_flags;
};
Packed Pack(const DeviceProgram& program) {
  Packed packed;
  packed.steps = Append(program.steps, packed.bytes);
  packed.extents = Append(program.extents, packed.bytes);
  packed.waits = Append(program.waits, packed.bytes);
  packed.drain = Append(program.drain, packed.bytes);
  packed.chunk_flags = Append(program.chunk_flags, packed.bytes);
  return packed;
}

}  // namespace

DeviceExecutor::DeviceExecutor(std::unique_ptr<PeerWindows> windows, PeerMemory& memory,
                               DeviceLauncher& launcher, uint64_t timeout_ns)
    : windows_(std::move(windows)), memory_(memory), launcher_(launcher), timeout_ns_(timeout_ns) {}

DeviceExecutor::~DeviceExecutor() {
  // The windows wait for this rank's kernels before anything is freed.
  windows_.reset();
  timeline_.reset();
  for (void* memory : overflow_) memory_.Free(memory);
  if (launch_order_ != nullptr) launcher_.ReleaseOrder(launch_order_);
}

absl::StatusOr<DeviceProgramView> DeviceExecutor::Prepare(const RankProgram& rank_program) {
  if (auto it = programs_.find(&rank_program); it != programs_.end()) return it->second;
  absl::StatusOr<DeviceProgram> program = LowerForDevice(rank_program);
  if (!program.ok()) return program.status();
  const Packed packed = Pack(*program);
  const int64_t bytes = static_cast<int64_t>(packed.bytes.size());
  std::byte* base = nullptr;
  if (arena_used_ + bytes <= windows_->options().program_bytes) {
    base = windows_->program_arena() + arena_used_;
    arena_used_ += (bytes + 255) / 256 * 256;
  } else {
    absl::StatusOr<void*> memory = memory_.AllocateZeroed(bytes);
    if (!memory.ok()) return memory.status();
    overflow_.push_back(*memory);
    base = static_cast<std::byte*>(*memory);
  }
  if (absl::Status status = memory_.CopyToDevice(base, packed.bytes.data(), bytes); !status.ok()) {
    return status;
  }
  DeviceProgramView view = ViewOf(*program);
  view.steps = reinterpret_cast<const DeviceStep*>(base + packed.steps);
  view.extents = reinterpret_cast<const DeviceExtent*>(base + packed.extents);
  view.waits = reinterpret_cast<const DeviceReadWait*>(base + packed.waits);
  view.drain = reinterpret_cast<const DeviceReadWait*>(base + packed.drain);
  view.chunk_flags = reinterpret_cast<const uint8_t*>(base + packed.chunk_flags);
  programs_.emplace(&rank_program, view);
  return view;
}

absl::Status DeviceExecutor::Fail(absl::Status status) {
  if (failed_.ok()) {
    failed_ = absl::UnavailableError(absl::StrCat("an earlier call failed: ", status.message()));
  }
  return status;
}

absl::Status DeviceExecutor::CheckEarlierCalls() {
  if (!failed_.ok()) return failed_;
  const DeviceFailure failure = windows_->ReadFailure();
  if (failure.recorded == 0) return absl::OkStatus();
  const std::string waited = absl::StrCat("waiting for rank ", failure.peer,
                                          " (signal of call slice ", failure.sequence, ")");
  switch (static_cast<DeviceGiveUp>(failure.reason)) {
    case DeviceGiveUp::kAborted:
      failed_ = absl::UnavailableError(absl::StrCat("the communicator was aborted while ", waited));
      break;
    case DeviceGiveUp::kOutOfStep:
      failed_ = absl::UnavailableError(absl::StrCat("out of step ", waited,
                                                    ": it went on to a later call (it failed, or ",
                                                    "this rank did)"));
      break;
    default:
      failed_ = absl::UnavailableError(
          absl::StrFormat("an earlier call timed out after %.3g s %s", timeout_ns_ * 1e-9, waited));
      break;
  }
  return failed_;
}

absl::Status DeviceExecutor::Run(const RankProgram& program, const AllReduceArgs& args,
                                 void* stream) {
  if (absl::Status status = CheckEarlierCalls(); !status.ok()) return status;
  // What every rank sees alike (NCCL requires the same count and plan everywhere, and the
  // communicator lowers every rank's program alike): nothing is done, and the ranks stay in step.
  if (args.count < 0 || program.num_ranks != windows_->num_ranks() ||
      program.rank != windows_->rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device executor: count ", args.count, ", a program for rank ", program.rank,
                     " of ", program.num_ranks, " on rank ", windows_->rank(),
                     " of a communicator of ", windows_->num_ranks()));
  }
  if (!program.placement.in_place || program.placement.native_pre_arrival) {
    return LowerForDevice(program).status();  // its error says which
  }
  if (args.count == 0) return absl::OkStatus();
  const int64_t element_size = DataTypeSize(args.type);
  const int64_t window_elements = windows_->options().window_bytes / element_size;
  const DeviceWindowLayout layout =
      DeviceLayoutOf(args.count, program.num_chunks, window_elements, element_size);
  if (layout.region <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device executor: a ", windows_->options().window_bytes, "-byte window cannot hold ",
        program.num_chunks, " chunks of ", DataTypeName(args.type)));
  }
  // From here on the call has a place in the sequence on every rank: a failure of this rank
  // alone is final.
  const uint32_t first_sequence = next_sequence_;
  next_sequence_ += static_cast<uint32_t>(layout.slices);
  if (args.send == nullptr || args.recv == nullptr) {
    return Fail(absl::InvalidArgumentError("device executor: a null buffer"));
  }
  absl::StatusOr<DeviceProgramView> view = Prepare(program);
  if (!view.ok()) return Fail(view.status());
  DeviceStamps* const stamps = timeline_ != nullptr ? timeline_->Run(launches_) : nullptr;
  const DeviceCall call{.windows = windows_->windows(),
                        .signals = windows_->signals(),
                        .scratch = windows_->scratch(),
                        .input = static_cast<const std::byte*>(args.send),
                        .result = static_cast<std::byte*>(args.recv),
                        .count = args.count,
                        .window_elements = window_elements,
                        .first_sequence = first_sequence,
                        .num_ranks_divisor = args.op == ReduceOp::kAvg ? program.num_ranks : 0,
                        .stamps = stamps,
                        .scope = windows_->signal_scope()};
  if (absl::Status status =
          launcher_.Launch(args.type, args.op, *view, call, windows_->Watch(timeout_ns_),
                           windows_->options().ctas, stream, &launch_order_);
      !status.ok()) {
    return Fail(status);
  }
  if (timeline_ != nullptr) timeline_->Launched(launches_);
  ++launches_;
  return absl::OkStatus();
}

absl::Status DeviceExecutor::StartTimeline(int32_t calls_kept) {
  absl::StatusOr<std::unique_ptr<DeviceTimeline>> timeline =
      DeviceTimeline::Create(memory_, calls_kept);
  if (!timeline.ok()) return timeline.status();
  timeline_ = *std::move(timeline);
  return absl::OkStatus();
}

absl::StatusOr<DeviceTimeline::Written> DeviceExecutor::WriteTimeline(const std::string& path) {
  if (timeline_ == nullptr) {
    return absl::FailedPreconditionError("device executor: no timeline was started");
  }
  memory_.Synchronize();
  return timeline_->Write(path);
}

void DeviceExecutor::StopWaits() { windows_->Abort(); }

void DeviceExecutor::Abort() {
  StopWaits();
  if (failed_.ok()) failed_ = absl::UnavailableError("the communicator was aborted");
}

}  // namespace stragglar
