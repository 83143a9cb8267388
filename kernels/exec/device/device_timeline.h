// The host's half of the device executor's timeline (kernels/exec/device/device_stamps.h): a ring
// of the last calls' stamp slots in host-mapped memory, the host's own times for each call (when
// it entered the executor, and when its launch returned), and the CSV they make together once
// the kernels are done.
//
// The CSV has one row per stamp, `call,source,event,ns,peer`:
//   - `call` counts the executor's launches from 0 (the same call on every rank);
//   - `source` is host (steady_clock, CLOCK_MONOTONIC) or gpu (%globaltimer);
//   - `event` is run or launched for the host; enter, wait_begin, wait_end, post_begin, post_end
//     or exit for the GPU;
//   - `peer` is the rank a wait is for, -1 otherwise.
// The two clocks differ: compare intervals across them, not instants. GPU instants compare
// across the ranks of one GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/peer_memory.h"
#include "kernels/exec/device/device_stamps.h"

namespace stragglar {

class DeviceTimeline {
 public:
  // Slots for the last `calls_kept` calls (2 KiB each, host-mapped).
  static absl::StatusOr<std::unique_ptr<DeviceTimeline>> Create(PeerMemory& memory,
                                                                int32_t calls_kept);
  ~DeviceTimeline();
  DeviceTimeline(const DeviceTimeline&) = delete;
  DeviceTimeline& operator=(const DeviceTimeline&) = delete;

  // Call `call` (launches so far) enters the executor: the device address of its slot.
  DeviceStamps* Run(int64_t call);
  // Its kernel is enqueued.
  void Launched(int64_t call);

  struct Written {
    int64_t calls = 0;            // the last ones, at most calls_kept
    int64_t stamps_not_kept = 0;  // past a call's capacity
  };
  // The CSV of the calls kept, once every kernel that writes their slots is done.
  absl::StatusOr<Written> Write(const std::string& path) const;

 private:
  struct HostTimes {
    uint64_t run_ns = 0;
    uint64_t launched_ns = 0;
  };
  DeviceTimeline(PeerMemory& memory, int32_t calls_kept, DeviceStamps* host, DeviceStamps* device)
      : memory_(memory), host_(host), device_(device), times_(calls_kept) {}

  PeerMemory& memory_;
  DeviceStamps* const host_;
  DeviceStamps* const device_;
  std::vector<HostTimes> times_;  // by call modulo calls_kept, as the slots
  int64_t calls_ = 0;             // calls that entered Run
};

}  // namespace stragglar
