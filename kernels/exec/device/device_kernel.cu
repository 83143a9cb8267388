// The GPU platform of kernels/exec/device/device_rank.h: one CTA. Thread 0 polls a signal with
// acquire loads (the signal lives in a peer's memory, or is written by one) and the CTA's barrier
// hands what it saw to the other threads; a post waits for every thread's writes at the barrier,
// then thread 0 stores with release, which orders them before the signal (a release is
// cumulative over what the barrier ordered before it). Both at the call's DeviceSignalScope: the
// GPU's when every peer shares it, else the system's. Data moves with the element loops of
// cuda_elementwise.h, over the CTA's threads.
#include <cuda/atomic>

#include "absl/strings/str_cat.h"
#include "kernels/exec/device/device_kernel.h"
#include "kernels/reduce/cuda_elementwise.h"
#include "kernels/reduce/reduce_element.h"

namespace stragglar {
namespace {

using cuda_elementwise::CopyFunction;
using cuda_elementwise::DivideFunction;
using cuda_elementwise::ElementwiseAnyAlignment;
using cuda_elementwise::Operands;
using cuda_elementwise::ReduceFunction;

// Polls between two looks at the abort word and the clock: each is a load over PCIe or a clock
// read, the poll itself a load from memory close by.
constexpr uint32_t kPollsPerCheck = 256;

__device__ __forceinline__ uint64_t GlobalNanoseconds() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

template <typename Codec>
class GpuCta {
 public:
  using Storage = typename Codec::Storage;
  static constexpr DeviceFault kFault = DeviceFault::kNone;

  // `stamps`: the call's timeline for the thread that keeps it (thread 0 of CTA 0), else null.
  __device__ GpuCta(const DeviceWatch& watch, DeviceSignalScope scope, DeviceStampWriter* stamps)
      : watch_(watch), scope_(scope), stamps_(stamps) {}

  __device__ bool Wait(uint64_t* signal, uint64_t awaited, int32_t peer) {
    int gave_up = 0;
    if (threadIdx.x == 0) {
      const uint64_t started = GlobalNanoseconds();
      if (stamps_ != nullptr) stamps_->Take(DeviceStampEvent::kWaitBegin, peer, started);
      for (uint32_t poll = 1;; ++poll) {
        const SignalState state = CheckSignal(Acquire(signal), awaited);
        if (state == SignalState::kReached) break;
        if (state == SignalState::kOutOfStep) {
          gave_up = static_cast<int>(DeviceGiveUp::kOutOfStep);
        } else if (poll % kPollsPerCheck == 0) {
          if (*static_cast<const volatile uint32_t*>(watch_.abort) != 0) {
            gave_up = static_cast<int>(DeviceGiveUp::kAborted);
          } else if (watch_.timeout_ns > 0 && GlobalNanoseconds() - started > watch_.timeout_ns) {
            gave_up = static_cast<int>(DeviceGiveUp::kTimedOut);
          } else {
            __nanosleep(64);
          }
        }
        if (gave_up != 0) break;
      }
      if (gave_up != 0) Record(static_cast<uint32_t>(gave_up), peer, awaited >> 32);
      if (stamps_ != nullptr) stamps_->Take(DeviceStampEvent::kWaitEnd, peer, GlobalNanoseconds());
    }
    return __syncthreads_or(gave_up) == 0;
  }

  __device__ void Sync() { __syncthreads(); }

  __device__ bool Stopped() {
    int stopped = 0;
    if (threadIdx.x == 0) {
      stopped = *static_cast<const volatile uint32_t*>(watch_.claim) != 0 ||
                *static_cast<const volatile uint32_t*>(watch_.abort) != 0;
    }
    return __syncthreads_or(stopped) != 0;
  }

  // One release store: it is its own fence (a separate fence before it would be a second one).
  __device__ void Post(uint64_t* signal, uint64_t value) {
    __syncthreads();
    if (threadIdx.x == 0) {
      if (stamps_ != nullptr) stamps_->Take(DeviceStampEvent::kPostBegin, -1, GlobalNanoseconds());
      if (scope_ == DeviceSignalScope::kGpu) {
        cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(*signal).store(
            value, cuda::memory_order_release);
      } else {
        cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*signal).store(
            value, cuda::memory_order_release);
      }
      if (stamps_ != nullptr) stamps_->Take(DeviceStampEvent::kPostEnd, -1, GlobalNanoseconds());
    }
  }

  __device__ void Copy(Storage* out, const Storage* in, int64_t elements) {
    ElementwiseAnyAlignment<Operands::kCopy, Storage>(
        out, in, nullptr, elements, CopyFunction<Storage>{}, threadIdx.x, blockDim.x);
  }

  template <typename Op>
  __device__ void Reduce(Storage* out, const Storage* first, const Storage* second,
                         int64_t elements) {
    const ReduceFunction<Codec, Op> function;
    if (out == first) {
      ElementwiseAnyAlignment<Operands::kInPlace, Storage>(out, nullptr, second, elements, function,
                                                           threadIdx.x, blockDim.x);
    } else {
      ElementwiseAnyAlignment<Operands::kOutOfPlace, Storage>(out, first, second, elements,
                                                              function, threadIdx.x, blockDim.x);
    }
  }

  __device__ void Divide(Storage* out, const Storage* in, int64_t elements, int divisor) {
    ElementwiseAnyAlignment<Operands::kCopy, Storage>(
        out, in, nullptr, elements, DivideFunction<Codec>{divisor}, threadIdx.x, blockDim.x);
  }

 private:
  __device__ uint64_t Acquire(uint64_t* signal) const {
    if (scope_ == DeviceSignalScope::kGpu) {
      return cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(*signal).load(
          cuda::memory_order_acquire);
    }
    return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*signal).load(
        cuda::memory_order_acquire);
  }

  // The claim is an atomic in device memory, the record plain stores to host memory.
  __device__ void Record(uint32_t reason, int32_t peer, uint64_t sequence) {
    if (atomicCAS(watch_.claim, 0u, 1u) != 0u) return;  // another CTA did
    volatile DeviceFailure* failure = watch_.failure;
    failure->reason = reason;
    failure->peer = peer;
    failure->sequence = static_cast<uint32_t>(sequence);
    __threadfence_system();
    failure->recorded = 1;
    __threadfence_system();
  }

  const DeviceWatch& watch_;
  const DeviceSignalScope scope_;
  DeviceStampWriter* const stamps_;
};

template <typename Codec, typename Op>
__global__ void __launch_bounds__(kDeviceThreadsPerCta)
    DeviceProgramKernel(DeviceProgramView program, DeviceCall call, DeviceWatch watch) {
  const bool keeps_stamps = call.stamps != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
  __shared__ DeviceStamp staging[kDeviceStampsPerCall];  // 2 KiB, read only with a timeline
  DeviceStampWriter writer(call.stamps, staging);
  if (keeps_stamps) writer.Take(DeviceStampEvent::kEnter, -1, GlobalNanoseconds());
  GpuCta<Codec> platform(watch, call.scope, keeps_stamps ? &writer : nullptr);
  RunDeviceRank<Codec, Op>(platform, program, call, static_cast<int32_t>(blockIdx.x),
                           static_cast<int32_t>(gridDim.x));
  if (keeps_stamps) {
    writer.Take(DeviceStampEvent::kExit, -1, GlobalNanoseconds());
    writer.Finish();
  }
}

}  // namespace

cudaError_t LaunchDeviceProgram(DataType type, ReduceOp op, const DeviceProgramView& program,
                                const DeviceCall& call, const DeviceWatch& watch, int ctas,
                                cudaStream_t stream) {
  if (ctas < 1) return cudaErrorInvalidValue;
  cudaError_t result = cudaErrorInvalidValue;  // unless `type` and `op` are known
  reduce_element::DispatchOnType(type, [&]<typename Codec>(reduce_element::CodecTag<Codec>) {
    reduce_element::DispatchOnNcclOp(op, [&]<typename Op>(reduce_element::OpTag<Op>) {
      // clang-format off
      DeviceProgramKernel<Codec, Op><<<ctas, kDeviceThreadsPerCta, 0, stream>>>(
          program, call, watch);
      // clang-format on
      result = cudaGetLastError();
    });
  });
  return result;
}

absl::Status CudaDeviceLauncher::Launch(DataType type, ReduceOp op,
                                        const DeviceProgramView& program, const DeviceCall& call,
                                        const DeviceWatch& watch, int ctas, void* stream,
                                        void** order) {
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  cudaEvent_t previous = static_cast<cudaEvent_t>(*order);
  cudaError_t code = cudaSuccess;
  if (previous == nullptr) {
    code = cudaEventCreateWithFlags(&previous, cudaEventDisableTiming);
    if (code != cudaSuccess) {
      return absl::InternalError(absl::StrCat("cudaEventCreate: ", cudaGetErrorString(code)));
    }
    *order = previous;
  } else if ((code = cudaStreamWaitEvent(cuda_stream, previous, 0)) != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaStreamWaitEvent: ", cudaGetErrorString(code)));
  }
  code = LaunchDeviceProgram(type, op, program, call, watch, ctas, cuda_stream);
  if (code != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("launching the device executor's kernel: ", cudaGetErrorString(code)));
  }
  if ((code = cudaEventRecord(previous, cuda_stream)) != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaEventRecord: ", cudaGetErrorString(code)));
  }
  return absl::OkStatus();
}

void CudaDeviceLauncher::ReleaseOrder(void* order) {
  cudaEventDestroy(static_cast<cudaEvent_t>(order));
}

}  // namespace stragglar
