// The activity buffers the GPU call timer hands CUPTI, the kernel records that come back in them,
// and the one owner those records go to. CUPTI's buffer callbacks carry no user data, so the
// process's CUPTI subscription has one owner at a time, registered here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "profiler/cupti_api.h"

namespace stragglar::gpu_timer_internal {

// What the timer reads from a kernel activity record.
struct KernelRecord {
  uint32_t correlation_id;
  uint64_t start_ns;
  uint64_t end_ns;
};

// Receives the kernel records of each completed buffer, possibly on CUPTI's own thread, while the
// owner registration's mutex is held (lock order: that mutex before the sink's own).
class KernelRecordSink {
 public:
  virtual ~KernelRecordSink() = default;
  virtual void OnKernelRecords(const std::vector<KernelRecord>& records) = 0;
};

// CUPTI's buffer callbacks, for cuptiActivityRegisterCallbacks.
void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes);

// Claims the process's CUPTI subscription for a timer about to set it up with `api` (which then
// parses every completed buffer); false when another timer holds it or is setting it up.
bool ClaimCuptiOwnership(const CuptiApi* api);
// From now on, completed buffers' kernel records go to `owner` (the holder of the claim).
void SetCuptiOwner(KernelRecordSink* owner);
// Gives the claim back. Once it returns, no record reaches `owner`: a delivery in progress has
// finished, so `owner` may be destroyed.
void ReleaseCuptiOwnership(const KernelRecordSink* owner);

}  // namespace stragglar::gpu_timer_internal
