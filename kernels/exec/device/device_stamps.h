// The device executor kernel's own timeline of a call, for finding where a call's time goes
// (STRAGGLAR_DEVICE_STAMPS, docs/nccl.md "Where a device call's time goes"): the first thread of
// CTA 0 reads the GPU's global timer (%globaltimer: nanoseconds, one clock for every process on
// the GPU) when the kernel starts, around each of its waits and posts, and when it ends, and
// copies the stamps to host-mapped memory at its end. The other CTAs run the same rounds with the
// same peers, so CTA 0 stands for the call.
#pragma once

#include <cstdint>

#include "kernels/reduce/reduce_element.h"  // STRAGGLAR_HOST_DEVICE

namespace stragglar {

// A post's stamps bracket its fence and store, after the CTA's barrier: the barrier's time is the
// data movement's before it.
enum class DeviceStampEvent : uint32_t {
  kEnter = 1,
  kWaitBegin = 2,
  kWaitEnd = 3,
  kExit = 4,
  kPostBegin = 5,
  kPostEnd = 6,
};

// Plain data, without initializers: the kernel stages stamps in shared memory, which takes no
// constructor.
struct DeviceStamp {
  uint64_t ns;
  uint32_t event;  // DeviceStampEvent
  int32_t peer;    // the rank a wait is for; -1 otherwise
};

// Enough for Ring on 8 ranks (14 rounds: 22 waits and 28 posts, 2 stamps each); a call with more
// keeps its first stamps and counts the rest.
inline constexpr uint32_t kDeviceStampsPerCall = 127;

// One call's stamps (2 KiB).
struct DeviceStamps {
  uint32_t count = 0;  // stamps taken, also those past the capacity (not kept)
  uint32_t unused = 0;
  DeviceStamp at[kDeviceStampsPerCall];
};

// Takes one call's stamps into `staging` (kDeviceStampsPerCall of them) and copies them into the
// call's slot at Finish. On the GPU the staging is the CTA's shared memory: a write to host-mapped
// memory during the call would be one more write that each post's system-scope fence orders,
// and so part of what the stamps measure.
class DeviceStampWriter {
 public:
  STRAGGLAR_HOST_DEVICE DeviceStampWriter(DeviceStamps* slot, DeviceStamp* staging)
      : slot_(slot), staging_(staging) {}

  STRAGGLAR_HOST_DEVICE void Take(DeviceStampEvent event, int32_t peer, uint64_t ns) {
    if (count_ < kDeviceStampsPerCall) {
      staging_[count_].ns = ns;
      staging_[count_].event = static_cast<uint32_t>(event);
      staging_[count_].peer = peer;
    }
    ++count_;
  }
  STRAGGLAR_HOST_DEVICE void Finish() {
    const uint32_t kept = count_ < kDeviceStampsPerCall ? count_ : kDeviceStampsPerCall;
    if (staging_ != slot_->at) {
      for (uint32_t i = 0; i < kept; ++i) slot_->at[i] = staging_[i];
    }
    slot_->count = count_;
  }

 private:
  DeviceStamps* slot_;
  DeviceStamp* staging_;
  uint32_t count_ = 0;
};

}  // namespace stragglar
