#include "kernels/exec/device/device_timeline.h"

#include <algorithm>
#include <chrono>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

uint64_t SteadyNanoseconds() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

const char* EventName(uint32_t event) {
  switch (static_cast<DeviceStampEvent>(event)) {
    case DeviceStampEvent::kEnter:
      return "enter";
    case DeviceStampEvent::kWaitBegin:
      return "wait_begin";
    case DeviceStampEvent::kWaitEnd:
      return "wait_end";
    case DeviceStampEvent::kExit:
      return "exit";
    case DeviceStampEvent::kPostBegin:
      return "post_begin";
    case DeviceStampEvent::kPostEnd:
      return "post_end";
  }
  return "unknown";
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceTimeline>> DeviceTimeline::Create(PeerMemory& memory,
                                                                       int32_t calls_kept) {
  if (calls_kept < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("device timeline: keeps at least one call, not ", calls_kept));
  }
  void* device = nullptr;
  absl::StatusOr<void*> host = memory.AllocateMapped(sizeof(DeviceStamps) * calls_kept, &device);
  if (!host.ok()) return host.status();
  return std::unique_ptr<DeviceTimeline>(new DeviceTimeline(
      memory, calls_kept, static_cast<DeviceStamps*>(*host), static_cast<DeviceStamps*>(device)));
}

DeviceTimeline::~DeviceTimeline() { memory_.FreeMapped(host_); }

DeviceStamps* DeviceTimeline::Run(int64_t call) {
  const int64_t slot = call % static_cast<int64_t>(times_.size());
  times_[slot] = {.run_ns = SteadyNanoseconds()};
  calls_ = std::max(calls_, call + 1);
  return device_ + slot;
}

void DeviceTimeline::Launched(int64_t call) {
  times_[call % static_cast<int64_t>(times_.size())].launched_ns = SteadyNanoseconds();
}

absl::StatusOr<DeviceTimeline::Written> DeviceTimeline::Write(const std::string& path) const {
  std::ofstream file(path);
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  file << "call,source,event,ns,peer\n";
  const int64_t kept = static_cast<int64_t>(times_.size());
  Written written;
  for (int64_t call = std::max<int64_t>(0, calls_ - kept); call < calls_; ++call) {
    const HostTimes& times = times_[call % kept];
    file << call << ",host,run," << times.run_ns << ",-1\n";
    ++written.calls;
    // A call that failed before its launch has no kernel: its slot holds an older call's stamps.
    if (times.launched_ns == 0) continue;
    file << call << ",host,launched," << times.launched_ns << ",-1\n";
    const DeviceStamps& stamps = host_[call % kept];
    const uint32_t count = std::min(stamps.count, kDeviceStampsPerCall);
    for (uint32_t i = 0; i < count; ++i) {
      const DeviceStamp& stamp = stamps.at[i];
      file << call << ",gpu," << EventName(stamp.event) << ',' << stamp.ns << ',' << stamp.peer
           << '\n';
    }
    written.stamps_not_kept += stamps.count - count;
  }
  file.flush();
  if (!file) return absl::UnavailableError(absl::StrCat("writing ", path, " failed"));
  return written;
}

}  // namespace stragglar
