// Puts GPU times on the host's steady_clock (CLOCK_MONOTONIC), the clock every timing the GPU call
// timer reports is on. CUDA events: a per-device reference event whose host time is known, and
// cudaEventElapsedTime from it. CUPTI: its timestamps are steady_clock already when it takes ours,
// and otherwise an offset between cuptiGetTimestamp() and steady_clock converts them.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profiler/arrival.h"
#include "profiler/cupti_api.h"

namespace stragglar::gpu_timer_internal {

using Clock = std::chrono::steady_clock;

// steady_clock now, in ns since its epoch.
int64_t SteadyNs();
// `t` in seconds since steady_clock's epoch.
double ToSeconds(Clock::time_point t);

// The host time of a device's GPU clock at `event`.
struct ClockAnchor {
  cudaEvent_t event = nullptr;
  double host_s = 0;
};

// A call's timing from its events: arrival against the device's clock reference.
absl::StatusOr<CallTiming> EventTiming(const ClockAnchor& anchor, cudaEvent_t begin,
                                       cudaEvent_t end);

// One device's clock reference, re-taken every second since the GPU clock drifts against the
// host's. Tickets hold the reference current at their Begin (a shared_ptr), so a replaced one is
// kept, with its event, until no ticket holds it.
class DeviceClock {
 public:
  // The current reference; null until Take first succeeds.
  const std::shared_ptr<const ClockAnchor>& anchor() const { return anchor_; }
  // Whether there is no reference yet or it is due to be re-taken.
  bool Stale(Clock::time_point now) const;
  // Takes a new reference on `device`, recording on `stream` (a private stream of that device).
  // Events come from the device's pool `idle`, and the unused ones, and those of replaced
  // references no ticket holds any more, go back to it. On failure the current reference stays.
  absl::Status Take(int device, cudaStream_t stream, std::vector<cudaEvent_t>& idle);
  // Destroys the events of the current and the replaced references (teardown; errors ignored).
  void DestroyEvents();

 private:
  std::shared_ptr<const ClockAnchor> anchor_;
  Clock::time_point taken_;
  std::vector<std::shared_ptr<const ClockAnchor>> retired_;  // still referenced by open tickets
};

// Converts CUPTI timestamps to steady_clock seconds. Thread-safe once set up.
class CuptiClock {
 public:
  // Hands CUPTI steady_clock as its timestamp source where libcupti supports that; offset mode
  // otherwise. CUPTI requires this before any activity kind is enabled.
  void UseSteadyTimestamps(const CuptiApi& api);
  // Offset mode: re-measures the offset when it is older than a second; nothing otherwise.
  void RefreshOffset(const CuptiApi& api);
  double Seconds(uint64_t cupti_ns) const;

 private:
  bool steady_ = false;                // CUPTI timestamps are steady_clock ns
  std::atomic<int64_t> offset_ns_{0};  // otherwise steady = CUPTI + offset
  std::atomic<int64_t> offset_taken_ns_{0};
};

}  // namespace stragglar::gpu_timer_internal
