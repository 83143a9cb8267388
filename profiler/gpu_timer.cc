#include "profiler/gpu_timer.h"

// CUPTI headers for types, enums and prototypes only: every CUPTI function is reached through
// dlsym, so this library never links libcupti.
#include <cupti.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#ifndef STRAGGLAR_CUPTI_LIBRARY
#define STRAGGLAR_CUPTI_LIBRARY ""
#endif

namespace stragglar {
namespace {

using Clock = std::chrono::steady_clock;

// How often the per-device clock reference of the events is re-taken.
constexpr Clock::duration kAnchorPeriod = std::chrono::seconds(1);
// Bracketed samples per reference; the tightest one wins.
constexpr int kAnchorSamples = 3;
// Events created at once when a device's pool runs dry.
constexpr int kEventBatch = 16;
// Poll flushes CUPTI at most this often (process-wide), so polling in a loop stays cheap.
constexpr Clock::duration kFlushInterval = std::chrono::milliseconds(1);
// After a call's end event completed, how long its kernel records may take before the call is
// timed with its events instead.
constexpr Clock::duration kCuptiGrace = std::chrono::milliseconds(100);
// Wait() sleeps this long between flushes while records are outstanding.
constexpr Clock::duration kWaitSleep = std::chrono::microseconds(100);
// CUPTI activity buffers: size (CUPTI recommends 1-10 MiB) and how many idle ones are kept.
constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlign = 8;
constexpr size_t kMaxIdleBuffers = 4;
// In offset mode (no timestamp callback), how often the CUPTI-to-steady offset is re-measured.
constexpr Clock::duration kOffsetPeriod = std::chrono::seconds(1);

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double ToSeconds(Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// CUPTI's timestamp source when the callback can be registered: steady_clock, in ns.
uint64_t CUPTIAPI SteadyTimestamp() { return static_cast<uint64_t>(SteadyNs()); }

absl::Status CudaError(absl::string_view call, cudaError_t error) {
  // The failing call set the runtime's last error to ours; clear it so that the application's own
  // cudaGetLastError() checks do not blame their next launch for it (sticky errors stay).
  (void)cudaGetLastError();
  std::string message = absl::StrCat(call, ": ", cudaGetErrorString(error));
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// ---------------------------------------------------------------------------------------------
// libcupti through dlopen/dlsym.

struct CuptiApi {
  decltype(&cuptiGetResultString) get_result_string = nullptr;  // optional
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) activity_register_callbacks = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp_callback =
      nullptr;  // optional (CUDA 12.x+)
  decltype(&cuptiActivityGetNextRecord) activity_get_next_record = nullptr;
  decltype(&cuptiActivityFlushAll) activity_flush_all = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;

  std::string Error(absl::string_view call, CUptiResult result) const {
    const char* text = nullptr;
    if (get_result_string != nullptr && get_result_string(result, &text) == CUPTI_SUCCESS &&
        text != nullptr) {
      return absl::StrCat(call, ": ", text);
    }
    return absl::StrCat(call, ": CUPTI error ", static_cast<int>(result));
  }
};

// Loads libcupti once per process; the handle is never closed (CUPTI does not support being
// unloaded). Returns null with `*error` set when it cannot be loaded; later calls give the same.
const CuptiApi* LoadCupti(std::string* error) {
  static std::mutex* mu = new std::mutex;
  static const CuptiApi* api = nullptr;
  static std::string* load_error = nullptr;
  std::lock_guard<std::mutex> lock(*mu);
  if (api != nullptr) return api;
  if (load_error != nullptr) {
    *error = *load_error;
    return nullptr;
  }
  void* handle = nullptr;
  std::string tried;
  std::vector<std::string> names = {"libcupti.so.13", "libcupti.so"};
  if (std::string(STRAGGLAR_CUPTI_LIBRARY).size() > 0) names.push_back(STRAGGLAR_CUPTI_LIBRARY);
  for (const std::string& name : names) {
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* why = dlerror();
    if (tried.empty()) absl::StrAppend(&tried, "dlopen: ", why != nullptr ? why : name);
  }
  if (handle == nullptr) {
    load_error = new std::string(tried.empty() ? "dlopen: no libcupti" : tried);
    *error = *load_error;
    return nullptr;
  }
  auto* loaded = new CuptiApi;
  std::string missing;
  auto resolve = [&](auto& fn, const char* name, bool required) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr && required && missing.empty()) missing = name;
  };
  resolve(loaded->get_result_string, "cuptiGetResultString", false);
  resolve(loaded->subscribe, "cuptiSubscribe", true);
  resolve(loaded->unsubscribe, "cuptiUnsubscribe", true);
  resolve(loaded->enable_callback, "cuptiEnableCallback", true);
  resolve(loaded->activity_enable, "cuptiActivityEnable", true);
  resolve(loaded->activity_disable, "cuptiActivityDisable", true);
  resolve(loaded->activity_register_callbacks, "cuptiActivityRegisterCallbacks", true);
  resolve(loaded->register_timestamp_callback, "cuptiActivityRegisterTimestampCallback", false);
  resolve(loaded->activity_get_next_record, "cuptiActivityGetNextRecord", true);
  resolve(loaded->activity_flush_all, "cuptiActivityFlushAll", true);
  resolve(loaded->get_timestamp, "cuptiGetTimestamp", true);
  if (!missing.empty()) {
    delete loaded;
    load_error = new std::string(absl::StrCat("dlsym: libcupti has no ", missing));
    *error = *load_error;
    return nullptr;
  }
  api = loaded;
  return api;
}

// Activity buffers handed to CUPTI, recycled rather than freed: Poll may flush often.
struct BufferPool {
  std::mutex mu;
  std::vector<uint8_t*> idle;
};

BufferPool& Buffers() {
  static BufferPool* pool = new BufferPool;  // never destroyed: CUPTI may call back at exit
  return *pool;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  *size = kBufferBytes;
  {
    BufferPool& pool = Buffers();
    std::lock_guard<std::mutex> lock(pool.mu);
    if (!pool.idle.empty()) {
      *buffer = pool.idle.back();
      pool.idle.pop_back();
      return;
    }
  }
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  if (*buffer == nullptr) *size = 0;  // CUPTI drops records rather than crash
}

void RecycleBuffer(uint8_t* buffer) {
  if (buffer == nullptr) return;
  BufferPool& pool = Buffers();
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    if (pool.idle.size() < kMaxIdleBuffers) {
      pool.idle.push_back(buffer);
      return;
    }
  }
  std::free(buffer);
}

struct KernelRecord {
  uint32_t correlation_id;
  uint64_t start_ns;
  uint64_t end_ns;
};

class Timer;

// The CUPTI timer that owns the process's subscription, if any. Buffer-completion callbacks
// carry no user data and may come from CUPTI's own thread, at any time (exit included): they
// deliver records while holding this mutex, so the owner unregisters itself under it before it
// is destroyed. Lock order: OwnerMu() before Timer::mu_.
std::mutex& OwnerMu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
Timer* g_owner = nullptr;  // guarded by OwnerMu()
bool g_claimed = false;    // guarded by OwnerMu(): a CUPTI timer exists or is being set up
std::atomic<const CuptiApi*> g_api{nullptr};  // set once libcupti is loaded, never cleared

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes);

// Per-thread state read by the launch callbacks, which fire for every launch in the process.
struct ThreadState {
  const Timer* timer = nullptr;  // the timer of the open ticket
  uint64_t ticket = 0;           // this thread's open ticket (Begin..End), 0 when none
  int runtime_launch_depth = 0;  // inside a runtime launch: its nested driver launch is the same
};
thread_local ThreadState t_thread;

void CUPTIAPI OnApiCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* cbdata);

constexpr std::array<CUpti_CallbackId, 6> kDriverLaunches = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};
// Kernels launched through the runtime (<<<>>>, cudaLaunchKernel*: our own reduction kernels).
constexpr std::array<CUpti_CallbackId, 6> kRuntimeLaunches = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
};

// A call's timing from its events: arrival against the device's clock reference.
absl::StatusOr<CallTiming> EventTiming(cudaEvent_t anchor, double anchor_host_s, cudaEvent_t begin,
                                       cudaEvent_t end) {
  float since_anchor_ms = 0;
  float duration_ms = 0;
  if (cudaError_t err = cudaEventElapsedTime(&since_anchor_ms, anchor, begin); err != cudaSuccess) {
    return CudaError("cudaEventElapsedTime", err);
  }
  if (cudaError_t err = cudaEventElapsedTime(&duration_ms, begin, end); err != cudaSuccess) {
    return CudaError("cudaEventElapsedTime", err);
  }
  return CallTiming{.arrival_s = anchor_host_s + since_anchor_ms / 1e3,
                    .duration_s = std::max(0.0, duration_ms / 1e3)};
}

// ---------------------------------------------------------------------------------------------
// The timer: CUDA events always, CUPTI kernel records on top when `api_` is set.
//
// Locks: `device_mu_` guards the per-device state (event pools, clock references) and is held
// across the CUDA calls that maintain it; `mu_` guards the ticket table and is never held across a
// CUDA or CUPTI call, since CUPTI's callbacks take it from inside such calls.

class Timer final : public GpuCallTimer {
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

  // CUPTI callbacks.
  void OnLaunchEnter(uint64_t ticket, uint32_t correlation_id);
  void OnLaunchFailed(uint32_t correlation_id);
  void OnKernelRecords(const std::vector<KernelRecord>& records);

 private:
  // The host time of a device's GPU clock at `event`.
  struct Anchor {
    cudaEvent_t event = nullptr;
    double host_s = 0;
  };
  struct Device {
    cudaStream_t stream = nullptr;  // private, non-blocking: where references are recorded
    std::vector<cudaEvent_t> idle;  // pool of timing events of this device
    std::shared_ptr<const Anchor> anchor;
    Clock::time_point anchor_taken;
    std::vector<std::shared_ptr<const Anchor>> retired;  // still referenced by open tickets
  };
  struct Ticket {
    int device = 0;
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    std::shared_ptr<const Anchor> anchor;
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
  absl::StatusOr<Device*> GetDevice(int device);       // device_mu_ held
  absl::Status TakeAnchor(int device, Device& state);  // device_mu_ held
  absl::StatusOr<std::optional<CallTiming>> Settle(uint64_t ticket, bool events_now);
  bool Flush(bool forced, bool rate_limited);
  double CuptiSeconds(uint64_t ns);
  void RefreshOffset();

  const CuptiApi* const api_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool activity_enabled_ = false;
  bool timestamp_callback_ = false;    // CUPTI timestamps are steady_clock ns
  std::atomic<int64_t> offset_ns_{0};  // otherwise steady = CUPTI + offset
  std::atomic<int64_t> offset_taken_ns_{0};
  std::atomic<int64_t> last_flush_ns_{0};

  std::mutex device_mu_;
  std::unordered_map<int, std::unique_ptr<Device>> devices_;  // guarded by device_mu_

  mutable std::mutex mu_;
  uint64_t next_ticket_ = 1;                            // guarded by mu_
  std::unordered_map<uint64_t, Ticket> tickets_;        // guarded by mu_
  std::unordered_map<uint32_t, uint64_t> correlation_;  // guarded by mu_: id -> ticket
  GpuTimerStats stats_;                                 // guarded by mu_
};

// Makes `device` current for a scope (events and streams are created on the current device).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) {
      if (cudaSetDevice(device) == cudaSuccess) switched_ = true;
    }
  }
  ~DeviceScope() {
    if (switched_) (void)cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
  bool switched_ = false;
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
  if (state.anchor == nullptr || Clock::now() - state.anchor_taken >= kAnchorPeriod) {
    if (absl::Status status = TakeAnchor(device, state); !status.ok()) {
      if (state.anchor == nullptr) return status;
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

absl::Status Timer::TakeAnchor(int device, Device& state) {
  DeviceScope scope(device);
  // Return the events of old references no ticket holds any more.
  std::erase_if(state.retired, [&](const std::shared_ptr<const Anchor>& anchor) {
    if (anchor.use_count() > 1) return false;
    state.idle.push_back(anchor->event);
    return true;
  });
  std::array<cudaEvent_t, kAnchorSamples> events{};
  for (cudaEvent_t& event : events) {
    if (!state.idle.empty()) {
      event = state.idle.back();
      state.idle.pop_back();
    } else if (cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDefault);
               err != cudaSuccess) {
      for (cudaEvent_t e : events) {
        if (e != nullptr) state.idle.push_back(e);
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
    if (cudaError_t err = cudaEventRecord(events[i], state.stream); err != cudaSuccess) {
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
    if (i != best) state.idle.push_back(events[i]);
  }
  if (best < 0) return status.ok() ? absl::InternalError("clock reference failed") : status;
  if (state.anchor != nullptr) state.retired.push_back(std::move(state.anchor));
  state.anchor = std::make_shared<const Anchor>(Anchor{events[best], ToSeconds(best_mid)});
  state.anchor_taken = best_mid;
  return absl::OkStatus();
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
    ticket.anchor = (*state)->anchor;
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
  if (api_ != nullptr) t_thread = ThreadState{this, id, t_thread.runtime_launch_depth};
  return id;
}

absl::Status Timer::End(uint64_t ticket, cudaStream_t stream) {
  if (ticket == 0) return absl::InvalidArgumentError("GpuCallTimer::End: ticket 0 is never issued");
  if (t_thread.ticket == ticket && t_thread.timer == this) t_thread.ticket = 0;
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
  if (t_thread.ticket == ticket && t_thread.timer == this) t_thread.ticket = 0;
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
  if (api_ != nullptr && !timestamp_callback_) RefreshOffset();
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<const Anchor> anchor;  // a reference keeps its event out of the pool
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
            .arrival_s = CuptiSeconds(t.first_start_ns),
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
    absl::StatusOr<CallTiming> timing = EventTiming(anchor->event, anchor->host_s, begin, end);
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
  if (!timestamp_callback_) RefreshOffset();
  return api_->activity_flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0) == CUPTI_SUCCESS;
}

void Timer::RefreshOffset() {
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
    if (api_->get_timestamp(&cupti_ns) != CUPTI_SUCCESS) return;
    int64_t after = SteadyNs();
    if (after - before < best_width) {
      best_width = after - before;
      best_offset = before + (after - before) / 2 - static_cast<int64_t>(cupti_ns);
    }
  }
  offset_ns_.store(best_offset, std::memory_order_relaxed);
  offset_taken_ns_.store(SteadyNs(), std::memory_order_relaxed);
}

double Timer::CuptiSeconds(uint64_t ns) {
  if (timestamp_callback_) return static_cast<double>(ns) / 1e9;
  return static_cast<double>(static_cast<int64_t>(ns) +
                             offset_ns_.load(std::memory_order_relaxed)) /
         1e9;
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

void CUPTIAPI OnApiCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* cbdata) {
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  ThreadState& thread = t_thread;
  bool enter = data->callbackSite == CUPTI_API_ENTER;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    // A runtime launch may reach the driver's launch entry points inside it: count it once, as
    // the runtime call (whose correlation id its kernel record carries).
    if (enter) {
      if (thread.runtime_launch_depth++ > 0) return;
    } else {
      if (thread.runtime_launch_depth == 0) return;  // entered before we subscribed
      if (--thread.runtime_launch_depth > 0) return;
    }
  } else if (domain != CUPTI_CB_DOMAIN_DRIVER_API || thread.runtime_launch_depth > 0) {
    return;
  }
  auto* timer = static_cast<Timer*>(userdata);
  if (enter) {
    if (thread.ticket != 0 && thread.timer == timer) {
      timer->OnLaunchEnter(thread.ticket, data->correlationId);
    }
    return;
  }
  // Exit: a launch that failed produces no record; stop waiting for it.
  bool failed = domain == CUPTI_CB_DOMAIN_RUNTIME_API
                    ? *static_cast<const cudaError_t*>(data->functionReturnValue) != cudaSuccess
                    : *static_cast<const CUresult*>(data->functionReturnValue) != CUDA_SUCCESS;
  if (failed && thread.ticket != 0 && thread.timer == timer) {
    timer->OnLaunchFailed(data->correlationId);
  }
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  // Parse before taking OwnerMu(): no CUPTI call is made under our locks.
  std::vector<KernelRecord> kernels;
  const CuptiApi* api = g_api.load(std::memory_order_acquire);
  if (api != nullptr && buffer != nullptr && valid_bytes > 0) {
    CUpti_Activity* record = nullptr;
    while (api->activity_get_next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
          record->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
        continue;
      }
      // start, end and correlationId sit at the same offsets in every CUpti_ActivityKernel
      // version, so a newer libcupti's records read correctly through CUDA 13.0's struct.
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      kernels.push_back({kernel->correlationId, kernel->start, kernel->end});
    }
  }
  RecycleBuffer(buffer);
  if (kernels.empty()) return;
  std::lock_guard<std::mutex> lock(OwnerMu());
  if (g_owner != nullptr) g_owner->OnKernelRecords(kernels);
}

std::unique_ptr<Timer> Timer::CreateCupti(std::string* why) {
  const CuptiApi* api = LoadCupti(why);
  if (api == nullptr) return nullptr;
  {
    std::lock_guard<std::mutex> lock(OwnerMu());
    if (g_claimed) {
      *why = "another GpuCallTimer in this process holds the CUPTI subscription";
      return nullptr;
    }
    g_claimed = true;
    g_api.store(api, std::memory_order_release);
  }
  auto timer = std::make_unique<Timer>(api);
  // Subscribe first: when another tool holds CUPTI (Nsight), it also owns the activity buffers
  // and kinds, which we must then leave alone.
  if (CUptiResult r = api->subscribe(&timer->subscriber_, &OnApiCallback, timer.get());
      r != CUPTI_SUCCESS) {
    timer->subscriber_ = nullptr;
    *why = api->Error("cuptiSubscribe", r);
    return nullptr;  // ~Timer releases the claim
  }
  for (CUpti_CallbackId cbid : kDriverLaunches) {
    if (CUptiResult r =
            api->enable_callback(1, timer->subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
        r != CUPTI_SUCCESS) {
      *why = api->Error("cuptiEnableCallback", r);
      return nullptr;
    }
  }
  for (CUpti_CallbackId cbid : kRuntimeLaunches) {
    if (CUptiResult r =
            api->enable_callback(1, timer->subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
        r != CUPTI_SUCCESS) {
      *why = api->Error("cuptiEnableCallback", r);
      return nullptr;
    }
  }
  // Before any activity kind is enabled, as CUPTI requires; optional (offset mode otherwise).
  if (api->register_timestamp_callback != nullptr) {
    timer->timestamp_callback_ =
        api->register_timestamp_callback(&SteadyTimestamp) == CUPTI_SUCCESS;
  }
  if (CUptiResult r = api->activity_register_callbacks(&BufferRequested, &BufferCompleted);
      r != CUPTI_SUCCESS) {
    *why = api->Error("cuptiActivityRegisterCallbacks", r);
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(OwnerMu());
    g_owner = timer.get();
  }
  if (CUptiResult r = api->activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      r != CUPTI_SUCCESS) {
    *why = api->Error("cuptiActivityEnable", r);
    return nullptr;
  }
  timer->activity_enabled_ = true;
  if (!timer->timestamp_callback_) timer->RefreshOffset();
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
    std::lock_guard<std::mutex> lock(OwnerMu());
    if (g_owner == this) g_owner = nullptr;
    g_claimed = false;
  }
  if (t_thread.timer == this) t_thread = ThreadState{nullptr, 0, t_thread.runtime_launch_depth};
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
    if (device->anchor != nullptr) (void)cudaEventDestroy(device->anchor->event);
    for (const auto& anchor : device->retired) (void)cudaEventDestroy(anchor->event);
    if (device->stream != nullptr) (void)cudaStreamDestroy(device->stream);
  }
  (void)cudaGetLastError();
}

}  // namespace

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
    if (std::unique_ptr<Timer> timer = Timer::CreateCupti(&why)) {
      if (fallback_reason != nullptr) fallback_reason->clear();
      return timer;
    }
  }
  if (fallback_reason != nullptr) {
    *fallback_reason =
        prefer_cupti ? absl::StrCat("CUPTI unavailable (", why, "); timing with CUDA events") : "";
  }
  return std::make_unique<Timer>(nullptr);
}

}  // namespace stragglar
