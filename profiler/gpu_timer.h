// Times the GPU work of each collective call on a rank: when its stream reached the call (the
// rank's arrival) and how long the call ran there, waiting for the peers included. Two sources:
// CUPTI activity records of the kernels the call launched (correlated through driver-API
// callbacks, since NCCL launches with cuLaunchKernelEx), and CUDA events recorded around the call
// on its stream when CUPTI is unavailable or another tool holds it (one CUPTI subscriber per
// process). The caller never blocks the stream; Poll() reads finished calls without waiting.
//
// Both sources report on the host's CLOCK_MONOTONIC (std::chrono::steady_clock):
//  - CUDA events: one reference event per device is recorded on a private stream and waited for,
//    bracketed by two steady_clock readings (best of 3, midpoint: error <= half the bracket, a few
//    µs); arrival = reference + cudaEventElapsedTime(reference, begin). The elapsed time has
//    ~0.5 µs resolution and the GPU timer drifts slowly against the host clock, so the reference
//    is re-taken every second (which also keeps the float milliseconds precise).
//  - CUPTI: a timestamp callback hands CUPTI steady_clock nanoseconds, so kernel start/end come
//    back on the host clock directly; when that registration is unavailable, an offset between
//    cuptiGetTimestamp() and steady_clock is measured at Create and refreshed every second.
// The CUPTI source records the CUDA events too (from a pool, never created per call), and times
// a call with them when it launched nothing CUPTI can see (no kernel, a graph launch) or when its
// kernel records do not all arrive within 100 ms of its end event (dropped or stuck records).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "profiler/arrival.h"

namespace stragglar {

enum class GpuTimerSource { kCupti, kCudaEvents };

// "cupti", "cuda-events".
absl::string_view GpuTimerSourceName(GpuTimerSource source);

// How the calls read so far were timed (counted once per ticket, when its timing is first read).
struct GpuTimerStats {
  uint64_t timed_by_cupti = 0;   // from the kernel records of the launches between Begin and End
  uint64_t timed_by_events = 0;  // from the CUDA events (every call of the events source)
  // CUPTI source only, included in timed_by_events: calls that launched no kernel CUPTI saw, and
  // calls whose kernel records were missing, incomplete or late.
  uint64_t cupti_no_launch = 0;
  uint64_t cupti_incomplete = 0;
};

class GpuCallTimer {
 public:
  virtual ~GpuCallTimer() = default;

  // One per process. With `prefer_cupti`, CUPTI when it loads and subscribes; otherwise, or when
  // it cannot (no libcupti, no GPU, another subscriber), CUDA events, and `*fallback_reason` (when
  // not null) says why in one line for the caller's log; it is cleared otherwise. Never fails.
  // libcupti is loaded with dlopen (never linked): the program runs where it is missing.
  static std::unique_ptr<GpuCallTimer> Create(bool prefer_cupti, std::string* fallback_reason);

  virtual GpuTimerSource source() const = 0;

  // Bracket what one call enqueues on `stream` from the calling thread: Begin() before its first
  // launch, End() after its last. Calls on different threads may interleave; on one thread they
  // must not nest (CUPTI attributes a launch to the calling thread's open ticket). An error (no
  // GPU, a CUDA failure, a stream being captured into a graph) names the CUDA call and its
  // message; the caller falls back to host clocks. Per call: one event record in Begin and one in
  // End, events from a per-device pool (gpu_timer_test prints the measured cost); about once a
  // second per device Begin also re-takes the clock reference (three short waits on a private
  // stream). Begin and End of one call belong on the same thread.
  virtual absl::StatusOr<uint64_t> Begin(cudaStream_t stream) = 0;
  virtual absl::Status End(uint64_t ticket, cudaStream_t stream) = 0;

  // The call's timing once its GPU work has finished and been measured, nullopt before; never
  // blocks. arrival_s: when the stream started the call's first work, in seconds on the host's
  // CLOCK_MONOTONIC (steady_clock), comparable across the processes of one host; duration_s:
  // from there to the end of its last work. NotFound for a ticket not issued or released,
  // InvalidArgument for 0, FailedPrecondition before End. Not concurrently with Release of the
  // same ticket.
  virtual absl::StatusOr<std::optional<CallTiming>> Poll(uint64_t ticket) = 0;
  // The same, blocking the host (never the stream) until the call's GPU work has finished.
  virtual absl::StatusOr<CallTiming> Wait(uint64_t ticket) = 0;
  // Forgets a ticket and frees what it held; call it once its timing was read or abandoned.
  // Unknown tickets are ignored.
  virtual void Release(uint64_t ticket) = 0;

  // Counters for logs and tests; a default for other implementations (fakes).
  virtual GpuTimerStats stats() const { return {}; }
};

}  // namespace stragglar
