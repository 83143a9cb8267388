// How the device executor's kernel is kept from hanging or from going on out of step, and how it
// says it gave up: a word the host sets to stop every wait (ncclCommAbort), a timeout per wait,
// and a record of the first wait that gave up. Waits compare signals through CheckSignal, so that
// a signal of a later slice than the one awaited (a peer that went on after this rank failed)
// stops the wait instead of satisfying it.
#pragma once

#include <cstdint>

#include "kernels/reduce/reduce_element.h"  // STRAGGLAR_HOST_DEVICE

namespace stragglar {

enum class DeviceGiveUp : uint32_t { kNone = 0, kAborted = 1, kTimedOut = 2, kOutOfStep = 3 };

// A signal word: the slice's sequence number in the high half, a count of transfers in the low.
STRAGGLAR_HOST_DEVICE uint64_t DeviceSignal(uint32_t sequence, uint32_t transfers) {
  return (static_cast<uint64_t>(sequence) << 32) | transfers;
}

enum class SignalState : uint8_t { kWaiting, kReached, kOutOfStep };

// Where a signal word stands against the awaited one: reached when it is of the same slice with
// at least as many transfers; out of step when it is of a later slice, which a correct run never
// shows a waiter (a peer posts its next slice's signals only once this rank has taken all of this
// slice's from it).
STRAGGLAR_HOST_DEVICE SignalState CheckSignal(uint64_t value, uint64_t awaited) {
  if ((value >> 32) > (awaited >> 32)) return SignalState::kOutOfStep;
  return (value >> 32) == (awaited >> 32) && value >= awaited ? SignalState::kReached
                                                              : SignalState::kWaiting;
}

// The record of the first wait that gave up, in host-mapped memory: the writer fills it in and
// sets `recorded` last, so a reader trusts it only once `recorded` is set. A failure is final:
// the executor stops launching, and nothing clears the record.
struct DeviceFailure {
  uint32_t reason = 0;    // DeviceGiveUp
  int32_t peer = -1;      // the rank the wait was for
  uint32_t sequence = 0;  // the slice's sequence number
  uint32_t recorded = 0;
};

// Device addresses.
struct DeviceWatch {
  const uint32_t* abort = nullptr;   // host-mapped; nonzero makes every wait give up
  uint32_t* claim = nullptr;         // device memory: nonzero once a CTA has given up (atomics
                                     // on host-mapped memory are not atomic over PCIe)
  DeviceFailure* failure = nullptr;  // host-mapped; written by the CTA that claimed
  uint64_t timeout_ns = 0;           // per wait; 0 waits until aborted
};

}  // namespace stragglar
