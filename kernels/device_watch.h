// How the device executor's kernel is kept from hanging, and how it says it gave up: a word the
// host sets to stop every wait (ncclCommAbort), a timeout per wait, and a record of the first
// wait that gave up, in host-mapped memory so that the host reads it without synchronising.
#pragma once

#include <cstdint>

namespace stragglar {

enum class DeviceGiveUp : uint32_t { kNone = 0, kAborted = 1, kTimedOut = 2 };

// Written once per launch that gives up (by its first CTA to), read and cleared by the host. The
// writer claims `reason`, fills in the rest, and sets `recorded` last: a reader trusts the record
// only once `recorded` is set.
struct DeviceFailure {
  uint32_t reason = 0;    // DeviceGiveUp
  int32_t peer = -1;      // the rank the wait was for
  uint32_t sequence = 0;  // the slice's sequence number
  uint32_t recorded = 0;
};

// Device addresses.
struct DeviceWatch {
  const uint32_t* abort = nullptr;   // nonzero makes every wait give up
  DeviceFailure* failure = nullptr;  // zero until a wait gives up
  uint64_t timeout_ns = 0;           // per wait; 0 waits until aborted
};

}  // namespace stragglar
