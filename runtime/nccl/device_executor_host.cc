#include "runtime/nccl/device_executor_host.h"

#include <fstream>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/units.h"
#include "kernels/cuda/cuda_peer_memory.h"
#include "kernels/exec/device/device_kernel.h"
#include "kernels/synth/synthesizers.h"
#include "runtime/nccl/nccl_codes.h"

namespace stragglar {
namespace {

// The calls a device executor's timeline keeps (STRAGGLAR_DEVICE_STAMPS): 2 MiB of host-mapped
// memory, more than a benchmark's timed calls.
constexpr int32_t kDeviceTimelineCalls = 1024;

// Equal on every process of one boot of one host: its name and boot id, hashed (std::hash is
// not seeded per process, and every rank runs this same library).
uint64_t HostIdentity() {
  std::string boot_id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, boot_id);
  return std::hash<std::string>()(absl::StrCat(HostName(), "/", boot_id));
}

}  // namespace

void DeviceExecutorHost::Start(const PeerWindowsOptions& options, double timeout_s,
                               const std::string& stamps_prefix, const GatherBytes& gather) {
  static CudaPeerMemory memory;
  static CudaDeviceLauncher launcher;
  absl::StatusOr<std::unique_ptr<PeerWindows>> windows =
      PeerWindows::Create(rank_, size_, HostIdentity(), options, memory, gather);
  if (!windows.ok()) {
    // The same verdict on every rank: rank 0 says it, and so does the rank it names (with its own
    // detail, e.g. CUDA's error).
    if (rank_ == 0 || absl::StrContains(windows.status().message(),
                                        absl::StrCat("unavailable: rank ", rank_, " "))) {
      LogOnce(LogLevel::kWarn, "device-executor",
              absl::StrCat(windows.status().message(), "; plans run over NCCL send/recv"));
    }
    return;
  }
  executor_ = std::make_unique<DeviceExecutor>(*std::move(windows), memory, launcher,
                                               static_cast<uint64_t>(timeout_s * 1e9));
  if (!stamps_prefix.empty()) {
    if (absl::Status status = executor_->StartTimeline(kDeviceTimelineCalls); status.ok()) {
      stamps_file_ = absl::StrCat(stamps_prefix, "-rank", rank_, ".csv");
    } else {
      LogOnce(LogLevel::kWarn, "device-stamps",
              absl::StrCat("STRAGGLAR_DEVICE_STAMPS: no timeline: ", status.message()));
    }
  }
  if (rank_ == 0) {
    Log(LogLevel::kInfo, absl::StrCat("device executor: ", size_, " ranks, ",
                                      FormatBytes(static_cast<double>(options.window_bytes)),
                                      " windows, ", options.ctas, " CTAs per call"));
  }
}

void DeviceExecutorHost::Release(bool abort) {
  if (executor_ == nullptr) return;
  if (abort) executor_->Abort();
  if (!stamps_file_.empty() && !abort) {
    absl::StatusOr<DeviceTimeline::Written> written = executor_->WriteTimeline(stamps_file_);
    if (!written.ok()) {
      Log(LogLevel::kWarn, absl::StrCat("STRAGGLAR_DEVICE_STAMPS: ", written.status().message()));
    } else {
      Log(LogLevel::kInfo,
          absl::StrCat("device executor: the timeline of the last ", written->calls, " calls in ",
                       stamps_file_,
                       written->stamps_not_kept == 0
                           ? ""
                           : absl::StrCat(" (", written->stamps_not_kept,
                                          " stamps past a call's capacity not kept)")));
    }
  }
  executor_.reset();
}

// A round's share of the call's copies in and out of the window is in the probe's time, as it is
// in every plan's call on this executor.
absl::Status DeviceExecutorHost::PrepareRing() {
  if (ring_program_ != nullptr) return absl::OkStatus();
  absl::StatusOr<Plan> ring = SynthesizeRing(size_);
  if (!ring.ok()) return ring.status();
  absl::StatusOr<RankProgram> program = LowerPlan(*ring, rank_, {.in_place = true});
  if (!program.ok()) return program.status();
  ring_program_ = std::make_unique<RankProgram>(*std::move(program));
  return absl::OkStatus();
}

absl::StatusOr<int> DeviceExecutorHost::RunRing(std::byte* buffer, int64_t count, int repeats,
                                                cudaStream_t stream) {
  if (executor_ == nullptr) return absl::FailedPreconditionError("no device executor");
  if (absl::Status prepared = PrepareRing(); !prepared.ok()) return prepared;
  for (int i = 0; i < repeats; ++i) {
    const absl::Status status =
        executor_->Run(*ring_program_, {.send = buffer, .recv = buffer, .count = count}, stream);
    if (!status.ok()) return WithDeviceExecutorCode(status);
  }
  return repeats * (ring_program_->steps.empty() ? 0 : ring_program_->steps.back().round + 1);
}

}  // namespace stragglar
