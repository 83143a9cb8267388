// What the device executor needs from CUDA to share memory between the ranks of one host: device
// and host-mapped allocations, and exporting and importing them across processes. An interface,
// so that the setup's logic (kernels/exec/device/peer_windows.h) runs in CI over host memory, and
// the CUDA implementation (CudaPeerMemory, kernels/cuda/cuda_peer_memory.h) stays a thin layer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stragglar {

// A cudaIpcMemHandle_t, as bytes (CUDA_IPC_HANDLE_SIZE).
struct PeerHandle {
  std::array<uint8_t, 64> bytes{};
};

// A GPU's UUID (cudaDeviceProp::uuid): the same on every process, whatever the device numbering.
struct DeviceUuid {
  std::array<uint8_t, 16> bytes{};
  friend bool operator==(const DeviceUuid&, const DeviceUuid&) = default;
};

class PeerMemory {
 public:
  virtual ~PeerMemory() = default;

  // The current device's UUID, and whether it can read and write memory of the device with
  // `uuid` (the same device, or one it has peer access to, as this process numbers them).
  virtual absl::StatusOr<DeviceUuid> OwnDevice() = 0;
  virtual absl::StatusOr<bool> CanAccess(const DeviceUuid& uuid) = 0;

  // Device memory of the current device, zeroed.
  virtual absl::StatusOr<void*> AllocateZeroed(size_t bytes) = 0;
  virtual void Free(void* device) = 0;
  // Synchronous, but without waiting for any other work on the device.
  virtual absl::Status CopyToDevice(void* device, const void* host, size_t bytes) = 0;
  // Waits until all work of this process on the current device is done.
  virtual void Synchronize() = 0;
  // Pinned host memory the device reads and writes, zeroed; `*device` is its device address.
  virtual absl::StatusOr<void*> AllocateMapped(size_t bytes, void** device) = 0;
  virtual void FreeMapped(void* host) = 0;

  // Another process's allocation, exported and imported.
  virtual absl::StatusOr<PeerHandle> Export(void* device) = 0;
  virtual absl::StatusOr<void*> Import(const PeerHandle& handle) = 0;
  virtual void CloseImported(void* device) = 0;
};

}  // namespace stragglar
