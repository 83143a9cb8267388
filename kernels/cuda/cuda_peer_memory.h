// PeerMemory over CUDA: cudaMalloc'd windows shared between processes with CUDA IPC
// (cudaIpcGetMemHandle / cudaIpcOpenMemHandle), which also maps memory between processes that
// share one GPU (several ranks on one device, under MPS or not), and pinned host memory mapped
// into the device for the abort word and the failure record. Everything works on the current
// device, and synchronously, but waits only for its own copies (on a private stream), never for
// the rest of the device: a copy on a communicator's first call of a new plan must not wait for
// a straggler's kernels or the application's compute.
#pragma once

#include "kernels/cuda/peer_memory.h"

namespace stragglar {

class CudaPeerMemory final : public PeerMemory {
 public:
  ~CudaPeerMemory() override;
  absl::StatusOr<DeviceUuid> OwnDevice() override;
  absl::StatusOr<bool> CanAccess(const DeviceUuid& uuid) override;
  absl::StatusOr<void*> AllocateZeroed(size_t bytes) override;
  void Free(void* device) override;
  absl::Status CopyToDevice(void* device, const void* host, size_t bytes) override;
  void Synchronize() override;
  absl::StatusOr<void*> AllocateMapped(size_t bytes, void** device) override;
  void FreeMapped(void* host) override;
  absl::StatusOr<PeerHandle> Export(void* device) override;
  absl::StatusOr<void*> Import(const PeerHandle& handle) override;
  void CloseImported(void* device) override;

 private:
  // The current device's private stream (non-blocking: it never waits for the legacy default
  // stream), created at its first use.
  absl::StatusOr<void*> PrivateStream();
  static constexpr int kMaxDevices = 64;
  void* streams_[kMaxDevices] = {};
};

}  // namespace stragglar
