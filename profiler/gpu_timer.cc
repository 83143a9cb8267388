#include "profiler/gpu_timer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_scope.h"
#include "profiler/clock_anchor.h"
#include "profiler/cuda_status.h"
#include "profiler/cupti_api.h"
#include "profiler/cupti_buffers.h"
#include "profiler/cupti_launches.h"

namespace stragglar {
namespace gpu_timer_internal {
namespace {

// Events created at once when a device's pool runs dry.
constexpr int kEventBatch = 16;
// Poll flushes CUPTI at most this often (process-wide), so polling in a loop stays cheap.
constexpr Clock::duration kFlushInterval = std::chrono::milliseconds(1);
// After a call's end event completed, how long its kernel records may take before the call is
// timed with its events instead.
constexpr Clock::duration kCuptiGrace = std::chrono::milliseconds(100);
// Wait() sleeps this long between flushes while records are outstanding.
constexpr Clock::duration kWaitSleep = std::chrono::microseconds(100);

// ---------------------------------------------------------------------------------------------
// The timer: CUDA events always, CUPTI kernel records on top when `api_` is set.
//
// Locks: `device_mu_` guards the per-device state (event pools, clock references) and is held
// across the CUDA calls that maintain it; `mu_` guards the ticket table and is never held across a
// CUDA or CUPTI call, since CUPTI's callbacks take it from inside such calls.

class Timer final : public GpuCallTimer, public LaunchSink, public KernelRecordSink {
 public:
  explicit Timer(const CuptiApi* api) : api_(api) {}
  ~Timer() override;

  // Sets up CUPTI; null with `*why` on failure, everything it enabled undone.
  static std::unique_ptr<Timer> CreateCupti(std::string* why);

  GpuTimerSource source() const override {
    return api_ != nullptr ? GpuTimerSource::kCupti : GpuTimerSource::kCudaEvents;
  }
  absl::StatusOr<uint64_t> Begin(cudaStream_t stream) override;
  absl::Status End(uint64_t ticket, cudaStream_t stream) override;
  absl::StatusOr<std::optional<CallTiming>> Poll(uint64_t ticket) override;
  absl::StatusOr<CallTiming> Wait(uint64_t ticket) override;
  void Release(uint64_t ticket) override;
  GpuTimerStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  // CUPTI callbacks (LaunchSink, KernelRecordSink).
  void OnLaunchEnter(uint64_t ticket, uint32_t correlation_id) override;
  void OnLaunchFailed(uint32_t correlation_id) override;
  void OnKernelRecords(const std::vector<KernelRecord>& records) override;

 private:
  struct Device {
    cudaStream_t stream = nullptr;  // private, non-blocking: where references are recorded
    std::vector<cudaEvent_t> idle;  // pool of timing events of this device
    DeviceClock clock;              // its reference events come from `idle` and go back there
  };
  struct Ticket {
    int device = 0;
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    std::shared_ptr<const ClockAnchor> anchor;
    bool ended = false;
    bool gpu_done = false;  // the end event has completed
    Clock::time_point gpu_done_at;
    // CUPTI: launches counted between Begin and End, and their records so far.
    uint32_t launches = 0;
    uint32_t records = 0;
    bool bad_record = false;
    uint64_t first_start_ns = std::numeric_limits<uint64_t>::max();
    uint64_t last_end_ns = 0;
    absl::InlinedVector<uint32_t, 2> correlation_ids;
    std::optional<CallTiming> timing;  // once read
  };
  absl::StatusOr<Device*> GetDevice(int device);  // device_mu_ held
  absl::StatusOr<std::optional<CallTiming>> Settle(uint64_t ticket, bool events_now);
  bool Flush(bool forced, bool rate_limited);

  const CuptiApi* const api_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool activity_enabled_ = false;
  CuptiClock cupti_clock_;
  std::atomic<int64_t> last_flush_ns_{0};

  std::mutex device_mu_;
  std::unordered_map<int, std::unique_ptr<Device>> devices_;  // guarded by device_mu_

  mutable std::mutex mu_;
  uint64_t next_ticket_ = 1;                            // guarded by mu_
  std::unordered_map<uint64_t, Ticket> tickets_;        // guarded by mu_
  std::unordered_map<uint32_t, uint64_t> correlation_;  // guarded by mu_: id -> ticket
  GpuTimerStats stats_;                                 // guarded by mu_
};

absl::StatusOr<Timer::Device*> Timer::GetDevice(int device) {
  auto it = devices_.find(device);
  if (it == devices_.end()) {
    auto state = std::make_unique<Device>();
    DeviceScope scope(device);
    if (cudaError_t err = cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking);
        err != cudaSuccess) {
      return CudaError("cudaStreamCreateWithFlags", err);
    }
    it = devices_.emplace(device, std::move(state)).first;
  }
  Device& state = *it->second;
  if (state.clock.Stale(Clock::now())) {
    if (absl::Status status = state.clock.Take(device, state.stream, state.idle); !status.ok()) {
      if (state.clock.anchor() == nullptr) return status;
      // Keep timing against the previous reference; retry at the next Begin.
    }
  }
  if (state.idle.size() < 2) {
    DeviceScope scope(device);
    for (int i = 0; i < kEventBatch; ++i) {
      cudaEvent_t event;
      if (cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDefault);
          err != cudaSuccess) {
        return CudaError("cudaEventCreate", err);
      }
      state.idle.push_back(event);
    }
  }
  return &state;
}

absl::StatusOr<uint64_t> Timer::Begin(cudaStream_t stream) {
  int device = 0;
  if (cudaError_t err = cudaStreamGetDevice(stream, &device); err != cudaSuccess) {
    return CudaError("cudaStreamGetDevice", err);
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t err = cudaStreamIsCapturing(stream, &capture); err != cudaSuccess) {
    return CudaError("cudaStreamIsCapturing", err);
  }
  if (capture != cudaStreamCaptureStatusNone) {
    return absl::FailedPreconditionError(
        "cudaStreamIsCapturing: the stream is being captured into a CUDA graph; not timed");
  }
  Ticket ticket;
  ticket.device = device;
  {
    std::lock_guard<std::mutex> lock(device_mu_);
    absl::StatusOr<Device*> state = GetDevice(device);
    if (!state.ok()) return state.status();
    ticket.begin = (*state)->idle.back();
    (*state)->idle.pop_back();
    ticket.end = (*state)->idle.back();
    (*state)->idle.pop_back();
    ticket.anchor = (*state)->clock.anchor();
  }
  cudaEvent_t begin = ticket.begin;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_ticket_++;
    tickets_.emplace(id, std::move(ticket));
  }
  if (cudaError_t err = cudaEventRecord(begin, stream); err != cudaSuccess) {
    absl::Status status = CudaError("cudaEventRecord", err);
    Release(id);
    return status;
  }
  if (api_ != nullptr) OpenTicketOnThread(this, id);
  return id;
}

absl::Status Timer::End(uint64_t ticket, cudaStream_t stream) {
  if (ticket == 0) return absl::InvalidArgumentError("GpuCallTimer::End: ticket 0 is never issued");
  CloseTicketOnThread(this, ticket);
  cudaEvent_t end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tickets_.find(ticket);
    if (it == tickets_.end()) {
      return absl::NotFoundError(absl::StrCat("GpuCallTimer::End: unknown ticket ", ticket));
    }
    if (it->second.ended) {
      return absl::FailedPreconditionError(
          absl::StrCat("GpuCallTimer::End: ticket ", ticket, " already ended"));
    }
    end = it->second.end;
  }
  if (cudaError_t err = cudaEventRecord(end, stream); err != cudaSuccess) {
    return CudaError("cudaEventRecord", err);
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tickets_.find(ticket);
  if (it != tickets_.end()) it->second.ended = true;
  return absl::OkStatus();
}

void Timer::Release(uint64_t ticket) {
  CloseTicketOnThread(this, ticket);
  Ticket released;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tickets_.find(ticket);
    if (it == tickets_.end()) return;
    released = std::move(it->second);
    tickets_.erase(it);
    for (uint32_t id : released.correlation_ids) correlation_.erase(id);
  }
  // An event still pending on the GPU may be re-recorded by the next Begin: that is allowed.
  std::lock_guard<std::mutex> lock(device_mu_);
  auto device = devices_.find(released.device);
  if (device == devices_.end()) return;
  device->second->idle.push_back(released.begin);
  device->second->idle.push_back(released.end);
}

// Decides an ended ticket whose end event has completed: CUPTI timing when all its records are
// in, the events when it launched nothing, when a record was bad, when `events_now`, or when the
// records are later than kCuptiGrace; otherwise pending (after one rate-limited flush).
absl::StatusOr<std::optional<CallTiming>> Timer::Settle(uint64_t ticket, bool events_now) {
  if (api_ != nullptr) cupti_clock_.RefreshOffset(*api_);
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<const ClockAnchor> anchor;  // a reference keeps its event out of the pool
    cudaEvent_t begin = nullptr, end = nullptr;
    bool no_launch = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = tickets_.find(ticket);
      if (it == tickets_.end()) {
        return absl::NotFoundError(absl::StrCat("GpuCallTimer: unknown ticket ", ticket));
      }
      Ticket& t = it->second;
      if (t.timing.has_value()) return t.timing;
      Clock::time_point now = Clock::now();
      if (!t.gpu_done) {
        t.gpu_done = true;
        t.gpu_done_at = now;
      }
      if (api_ != nullptr && t.launches > 0 && t.records == t.launches && !t.bad_record) {
        t.timing = CallTiming{
            .arrival_s = cupti_clock_.Seconds(t.first_start_ns),
            .duration_s = t.last_end_ns > t.first_start_ns
                              ? static_cast<double>(t.last_end_ns - t.first_start_ns) / 1e9
                              : 0.0};
        ++stats_.timed_by_cupti;
        return t.timing;
      }
      bool use_events = api_ == nullptr || t.launches == 0 || t.bad_record || events_now ||
                        now - t.gpu_done_at >= kCuptiGrace;
      if (use_events) {
        no_launch = t.launches == 0;
        anchor = t.anchor;
        begin = t.begin;
        end = t.end;
      } else if (attempt > 0) {
        return std::nullopt;
      }
    }
    if (anchor == nullptr) {
      if (!Flush(/*forced=*/false, /*rate_limited=*/true)) return std::nullopt;
      continue;
    }
    absl::StatusOr<CallTiming> timing = EventTiming(*anchor, begin, end);
    if (!timing.ok()) return timing.status();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tickets_.find(ticket);
    if (it == tickets_.end()) return std::optional<CallTiming>(*timing);
    if (!it->second.timing.has_value()) {
      it->second.timing = *timing;
      ++stats_.timed_by_events;
      if (api_ != nullptr) ++(no_launch ? stats_.cupti_no_launch : stats_.cupti_incomplete);
    }
    return it->second.timing;
  }
}

absl::StatusOr<std::optional<CallTiming>> Timer::Poll(uint64_t ticket) {
  if (ticket == 0) {
    return absl::InvalidArgumentError("GpuCallTimer::Poll: ticket 0 is never issued");
  }
  cudaEvent_t end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tickets_.find(ticket);
    if (it == tickets_.end()) {
      return absl::NotFoundError(absl::StrCat("GpuCallTimer::Poll: unknown ticket ", ticket));
    }
    const Ticket& t = it->second;
    if (!t.ended) {
      return absl::FailedPreconditionError(
          absl::StrCat("GpuCallTimer::Poll: ticket ", ticket, " has not ended"));
    }
    if (t.timing.has_value()) return t.timing;
    end = t.gpu_done ? nullptr : t.end;
  }
  if (end != nullptr) {
    cudaError_t err = cudaEventQuery(end);
    if (err == cudaErrorNotReady) return std::nullopt;
    if (err != cudaSuccess) return CudaError("cudaEventQuery", err);
  }
  return Settle(ticket, /*events_now=*/false);
}

absl::StatusOr<CallTiming> Timer::Wait(uint64_t ticket) {
  if (ticket == 0) {
    return absl::InvalidArgumentError("GpuCallTimer::Wait: ticket 0 is never issued");
  }
  cudaEvent_t end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tickets_.find(ticket);
    if (it == tickets_.end()) {
      return absl::NotFoundError(absl::StrCat("GpuCallTimer::Wait: unknown ticket ", ticket));
    }
    const Ticket& t = it->second;
    if (!t.ended) {
      return absl::FailedPreconditionError(
          absl::StrCat("GpuCallTimer::Wait: ticket ", ticket, " has not ended"));
    }
    if (t.timing.has_value()) return *t.timing;
    end = t.gpu_done ? nullptr : t.end;
  }
  if (end != nullptr) {
    if (cudaError_t err = cudaEventSynchronize(end); err != cudaSuccess) {
      return CudaError("cudaEventSynchronize", err);
    }
  }
  // The GPU work is done; the kernel records may still be on their way.
  Clock::time_point start = Clock::now();
  bool forced = false;
  for (;;) {
    bool late = Clock::now() - start >= kCuptiGrace;
    absl::StatusOr<std::optional<CallTiming>> timing = Settle(ticket, /*events_now=*/late);
    if (!timing.ok()) return timing.status();
    if (timing->has_value()) return **timing;
    // Half-way through the grace period, force out the buffers with incomplete records too.
    bool force = !forced && Clock::now() - start >= kCuptiGrace / 2;
    forced |= force;
    Flush(force, /*rate_limited=*/false);
    std::this_thread::sleep_for(kWaitSleep);
  }
}

bool Timer::Flush(bool forced, bool rate_limited) {
  if (api_ == nullptr) return false;
  if (rate_limited) {
    int64_t now = SteadyNs();
    int64_t last = last_flush_ns_.load(std::memory_order_relaxed);
    if (now - last < std::chrono::nanoseconds(kFlushInterval).count()) return false;
    if (!last_flush_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      return false;  // another thread is flushing
    }
  }
  cupti_clock_.RefreshOffset(*api_);
  return api_->activity_flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0) == CUPTI_SUCCESS;
}

void Timer::OnLaunchEnter(uint64_t ticket, uint32_t correlation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tickets_.find(ticket);
  if (it == tickets_.end() || it->second.ended) return;
  ++it->second.launches;
  it->second.correlation_ids.push_back(correlation_id);
  correlation_[correlation_id] = ticket;
}

void Timer::OnLaunchFailed(uint32_t correlation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto link = correlation_.find(correlation_id);
  if (link == correlation_.end()) return;
  auto it = tickets_.find(link->second);
  correlation_.erase(link);
  if (it == tickets_.end()) return;
  Ticket& t = it->second;
  auto id = std::find(t.correlation_ids.begin(), t.correlation_ids.end(), correlation_id);
  if (id != t.correlation_ids.end()) t.correlation_ids.erase(id);
  if (t.launches > 0) --t.launches;
}

void Timer::OnKernelRecords(const std::vector<KernelRecord>& records) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const KernelRecord& record : records) {
    auto link = correlation_.find(record.correlation_id);
    if (link == correlation_.end()) continue;  // a launch outside any ticket
    auto it = tickets_.find(link->second);
    correlation_.erase(link);
    if (it == tickets_.end()) continue;
    Ticket& t = it->second;
    ++t.records;
    // A forced flush hands over records of kernels that have not finished: no timestamps yet.
    if (record.start_ns == 0 || record.end_ns < record.start_ns) {
      t.bad_record = true;
      continue;
    }
    t.first_start_ns = std::min(t.first_start_ns, record.start_ns);
    t.last_end_ns = std::max(t.last_end_ns, record.end_ns);
  }
}

std::unique_ptr<Timer> Timer::CreateCupti(std::string* why) {
  const CuptiApi* api = LoadCupti(why);
  if (api == nullptr) return nullptr;
  if (!ClaimCuptiOwnership(api)) {
    *why = "another GpuCallTimer in this process holds the CUPTI subscription";
    return nullptr;
  }
  auto timer = std::make_unique<Timer>(api);
  // Subscribe first: when another tool holds CUPTI (Nsight), it also owns the activity buffers
  // and kinds, which we must then leave alone.
  if (!SubscribeToLaunches(*api, timer.get(), &timer->subscriber_, why)) {
    return nullptr;  // ~Timer unsubscribes (when subscribed) and releases the claim
  }
  // Before any activity kind is enabled, as CUPTI requires; optional (offset mode otherwise).
  timer->cupti_clock_.UseSteadyTimestamps(*api);
  if (CUptiResult r = api->activity_register_callbacks(&BufferRequested, &BufferCompleted);
      r != CUPTI_SUCCESS) {
    *why = api->Error("cuptiActivityRegisterCallbacks", r);
    return nullptr;
  }
  SetCuptiOwner(timer.get());
  if (CUptiResult r = api->activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      r != CUPTI_SUCCESS) {
    *why = api->Error("cuptiActivityEnable", r);
    return nullptr;
  }
  timer->activity_enabled_ = true;
  timer->cupti_clock_.RefreshOffset(*api);
  return timer;
}

Timer::~Timer() {
  if (api_ != nullptr) {
    // No more launch callbacks, no more records; deliver what CUPTI still holds, then let go.
    if (subscriber_ != nullptr) (void)api_->unsubscribe(subscriber_);
    if (activity_enabled_) {
      (void)api_->activity_disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      (void)api_->activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    ReleaseCuptiOwnership(this);
  }
  ForgetSinkOnThread(this);
  // Errors are ignored: at process exit the CUDA runtime may already be gone.
  std::lock_guard<std::mutex> lock(device_mu_);
  for (auto& [id, ticket] : tickets_) {
    if (auto device = devices_.find(ticket.device); device != devices_.end()) {
      device->second->idle.push_back(ticket.begin);
      device->second->idle.push_back(ticket.end);
    }
  }
  tickets_.clear();
  for (auto& [id, device] : devices_) {
    for (cudaEvent_t event : device->idle) (void)cudaEventDestroy(event);
    device->clock.DestroyEvents();
    if (device->stream != nullptr) (void)cudaStreamDestroy(device->stream);
  }
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace gpu_timer_internal

absl::string_view GpuTimerSourceName(GpuTimerSource source) {
  switch (source) {
    case GpuTimerSource::kCupti:
      return "cupti";
    case GpuTimerSource::kCudaEvents:
      return "cuda-events";
  }
  return "unknown";
}

std::unique_ptr<GpuCallTimer> GpuCallTimer::Create(bool prefer_cupti,
                                                   std::string* fallback_reason) {
  std::string why;
  if (prefer_cupti) {
    if (std::unique_ptr<gpu_timer_internal::Timer> timer =
            gpu_timer_internal::Timer::CreateCupti(&why)) {
      if (fallback_reason != nullptr) fallback_reason->clear();
      return timer;
    }
  }
  if (fallback_reason != nullptr) {
    *fallback_reason =
        prefer_cupti ? absl::StrCat("CUPTI unavailable (", why, "); timing with CUDA events") : "";
  }
  return std::make_unique<gpu_timer_internal::Timer>(nullptr);
}

}  // namespace stragglar
