#include "profiler/cupti_buffers.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace stragglar::gpu_timer_internal {
namespace {

// CUPTI activity buffers: size (CUPTI recommends 1-10 MiB) and how many idle ones are kept.
constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlign = 8;
constexpr size_t kMaxIdleBuffers = 4;

// Activity buffers handed to CUPTI, recycled rather than freed: Poll may flush often.
struct BufferPool {
  std::mutex mu;
  std::vector<uint8_t*> idle;
};

BufferPool& Buffers() {
  static BufferPool* pool = new BufferPool;  // never destroyed: CUPTI may call back at exit
  return *pool;
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

// The CUPTI timer that owns the process's subscription, if any. Buffer-completion callbacks
// carry no user data and may come from CUPTI's own thread, at any time (exit included): they
// deliver records while holding this mutex, so the owner unregisters itself under it before it
// is destroyed. Lock order: OwnerMu() before the owner's own locks (Timer::mu_).
std::mutex& OwnerMu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
KernelRecordSink* g_owner = nullptr;  // guarded by OwnerMu()
bool g_claimed = false;  // guarded by OwnerMu(): a CUPTI timer exists or is being set up
std::atomic<const CuptiApi*> g_api{nullptr};  // set once libcupti is loaded, never cleared

}  // namespace

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

bool ClaimCuptiOwnership(const CuptiApi* api) {
  std::lock_guard<std::mutex> lock(OwnerMu());
  if (g_claimed) return false;
  g_claimed = true;
  g_api.store(api, std::memory_order_release);
  return true;
}

void SetCuptiOwner(KernelRecordSink* owner) {
  std::lock_guard<std::mutex> lock(OwnerMu());
  g_owner = owner;
}

void ReleaseCuptiOwnership(const KernelRecordSink* owner) {
  std::lock_guard<std::mutex> lock(OwnerMu());
  if (g_owner == owner) g_owner = nullptr;
  g_claimed = false;
}

}  // namespace stragglar::gpu_timer_internal
