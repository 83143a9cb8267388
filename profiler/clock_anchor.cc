#include "profiler/clock_anchor.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include "kernels/cuda/device_scope.h"
#include "profiler/cuda_status.h"

namespace stragglar::gpu_timer_internal {
namespace {

// How often the per-device clock reference of the events is re-taken.
constexpr Clock::duration kAnchorPeriod = std::chrono::seconds(1);
// Bracketed samples per reference; the tightest one wins.
constexpr int kAnchorSamples = 3;
// In offset mode (no timestamp callback), how often the CUPTI-to-steady offset is re-measured.
constexpr Clock::duration kOffsetPeriod = std::chrono::seconds(1);

// CUPTI's timestamp source when the callback can be registered: steady_clock, in ns.
uint64_t CUPTIAPI SteadyTimestamp() { return static_cast<uint64_t>(SteadyNs()); }

}  // namespace

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double ToSeconds(Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

absl::StatusOr<CallTiming> EventTiming(const ClockAnchor& anchor, cudaEvent_t begin,
                                       cudaEvent_t end) {
  float since_anchor_ms = 0;
  float duration_ms = 0;
  if (cudaError_t err = cudaEventElapsedTime(&since_anchor_ms, anchor.event, begin);
      err != cudaSuccess) {
    return CudaError("cudaEventElapsedTime", err);
  }
  if (cudaError_t err = cudaEventElapsedTime(&duration_ms, begin, end); err != cudaSuccess) {
    return CudaError("cudaEventElapsedTime", err);
  }
  return CallTiming{.arrival_s = anchor.host_s + since_anchor_ms / 1e3,
                    .duration_s = std::max(0.0, duration_ms / 1e3)};
}

bool DeviceClock::Stale(Clock::time_point now) const {
  return anchor_ == nullptr || now - taken_ >= kAnchorPeriod;
}

absl::Status DeviceClock::Take(int device, cudaStream_t stream, std::vector<cudaEvent_t>& idle) {
  DeviceScope scope(device);
  // Return the events of old references no ticket holds any more.
  std::erase_if(retired_, [&](const std::shared_ptr<const ClockAnchor>& anchor) {
    if (anchor.use_count() > 1) return false;
    idle.push_back(anchor->event);
    return true;
  });
  std::array<cudaEvent_t, kAnchorSamples> events{};
  for (cudaEvent_t& event : events) {
    if (!idle.empty()) {
      event = idle.back();
      idle.pop_back();
    } else if (cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDefault);
               err != cudaSuccess) {
      for (cudaEvent_t e : events) {
        if (e != nullptr) idle.push_back(e);
      }
      return CudaError("cudaEventCreate", err);
    }
  }
  // The GPU stamps the event between the two host readings: the tightest bracket's midpoint is
  // within half its width of the truth.
  int best = -1;
  Clock::duration best_width = Clock::duration::max();
  Clock::time_point best_mid;
  absl::Status status;
  for (int i = 0; i < kAnchorSamples; ++i) {
    Clock::time_point before = Clock::now();
    if (cudaError_t err = cudaEventRecord(events[i], stream); err != cudaSuccess) {
      status = CudaError("cudaEventRecord", err);
      break;
    }
    if (cudaError_t err = cudaEventSynchronize(events[i]); err != cudaSuccess) {
      status = CudaError("cudaEventSynchronize", err);
      break;
    }
    Clock::time_point after = Clock::now();
    if (after - before < best_width) {
      best = i;
      best_width = after - before;
      best_mid = before + (after - before) / 2;
    }
  }
  for (int i = 0; i < kAnchorSamples; ++i) {
    if (i != best) idle.push_back(events[i]);
  }
  if (best < 0) return status.ok() ? absl::InternalError("clock reference failed") : status;
  if (anchor_ != nullptr) retired_.push_back(std::move(anchor_));
  anchor_ = std::make_shared<const ClockAnchor>(ClockAnchor{events[best], ToSeconds(best_mid)});
  taken_ = best_mid;
  return absl::OkStatus();
}

void DeviceClock::DestroyEvents() {
  if (anchor_ != nullptr) (void)cudaEventDestroy(anchor_->event);
  for (const auto& anchor : retired_) (void)cudaEventDestroy(anchor->event);
}

void CuptiClock::UseSteadyTimestamps(const CuptiApi& api) {
  if (api.register_timestamp_callback != nullptr) {
    steady_ = api.register_timestamp_callback(&SteadyTimestamp) == CUPTI_SUCCESS;
  }
}

void CuptiClock::RefreshOffset(const CuptiApi& api) {
  if (steady_) return;
  int64_t now = SteadyNs();
  if (now - offset_taken_ns_.load(std::memory_order_relaxed) <
      std::chrono::nanoseconds(kOffsetPeriod).count()) {
    return;
  }
  // The tightest of a few brackets of cuptiGetTimestamp() by steady_clock readings.
  int64_t best_width = std::numeric_limits<int64_t>::max();
  int64_t best_offset = offset_ns_.load(std::memory_order_relaxed);
  for (int i = 0; i < 3; ++i) {
    uint64_t cupti_ns = 0;
    int64_t before = SteadyNs();
    if (api.get_timestamp(&cupti_ns) != CUPTI_SUCCESS) return;
    int64_t after = SteadyNs();
    if (after - before < best_width) {
      best_width = after - before;
      best_offset = before + (after - before) / 2 - static_cast<int64_t>(cupti_ns);
    }
  }
  offset_ns_.store(best_offset, std::memory_order_relaxed);
  offset_taken_ns_.store(SteadyNs(), std::memory_order_relaxed);
}

double CuptiClock::Seconds(uint64_t cupti_ns) const {
  if (steady_) return static_cast<double>(cupti_ns) / 1e9;
  return static_cast<double>(static_cast<int64_t>(cupti_ns) +
                             offset_ns_.load(std::memory_order_relaxed)) /
         1e9;
}

}  // namespace stragglar::gpu_timer_internal
