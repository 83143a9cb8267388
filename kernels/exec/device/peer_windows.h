// The memory of the device executor for one communicator: each rank's window (its working copy
// of a call's slice, which peers read) and signal array (which peers write), exported to and
// mapped by every other rank, plus this rank's private scratch, the device arrays of everyone's
// addresses that the kernel indexes, and the host-mapped abort word and failure record
// (kernels/exec/device/device_watch.h).
//
// Setting it up is collective: every rank calls PeerWindows::Create alike, and three exchanges
// (gathers of a fixed-size record per rank) make every rank reach the same verdict:
//   1. identities: the host and the GPU of every rank. Eligible only if every rank is on this
//      host and this rank's GPU can access every other rank's (the same GPU, or peer access).
//   2. verdicts and handles: each rank has allocated and exported its memory, or says why not.
//   3. verdicts: each rank has imported every peer's memory, or says why not.
// After each exchange a rank that sees any other verdict than kOk on any rank undoes what it did
// and returns FailedPrecondition naming the first rank that failed and why, so the caller falls
// back to another executor on every rank at once. Nothing can fail after the last exchange.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/peer_memory.h"
#include "kernels/exec/device/device_rank.h"
#include "kernels/exec/device/device_watch.h"

namespace stragglar {

struct PeerWindowsOptions {
  int64_t window_bytes = 64 << 20;  // per rank; a call larger than this runs in slices
  int32_t ctas = 8;                 // CTAs per call: signal slots are per CTA
  // Device memory for the executor's programs, allocated with the rest at setup so that a new
  // plan's first call does not allocate (which may wait for the whole device).
  int64_t program_bytes = 1 << 20;
  // Signals at the system's scope even where every rank shares this rank's GPU (where the GPU's
  // scope would do): for measuring what the narrower scope saves.
  bool system_scope = false;
};

// Gathers `bytes` from every rank into `all` (rank order), on every rank, synchronously.
using GatherBytes = std::function<absl::Status(const void* mine, void* all, size_t bytes)>;

class PeerWindows {
 public:
  // `host` identifies this rank's host (equal on every rank of one host, e.g. a hash of its name
  // and boot id). FailedPrecondition when the device executor cannot run (the same on every
  // rank), the gather's error when an exchange fails.
  static absl::StatusOr<std::unique_ptr<PeerWindows>> Create(int rank, int num_ranks, uint64_t host,
                                                             const PeerWindowsOptions& options,
                                                             PeerMemory& memory,
                                                             const GatherBytes& gather);
  // Waits for this rank's kernels (after Abort() they stop at once), then unmaps and frees.
  ~PeerWindows();
  PeerWindows(const PeerWindows&) = delete;
  PeerWindows& operator=(const PeerWindows&) = delete;

  int rank() const { return rank_; }
  int num_ranks() const { return num_ranks_; }
  const PeerWindowsOptions& options() const { return options_; }
  // Device arrays of every rank's window and signal array, as mapped here.
  std::byte* const* windows() const { return device_windows_; }
  uint64_t* const* signals() const { return device_signals_; }
  std::byte* scratch() const { return scratch_; }
  // Device memory for programs: options().program_bytes bytes, 256-byte aligned.
  std::byte* program_arena() const { return program_arena_; }
  // kGpu when every rank's GPU is this rank's (and options().system_scope is off), else kSystem:
  // the same on every rank, from the identities every rank exchanged.
  DeviceSignalScope signal_scope() const { return signal_scope_; }
  DeviceWatch Watch(uint64_t timeout_ns) const {
    return {.abort = device_abort_,
            .claim = device_claim_,
            .failure = device_failure_,
            .timeout_ns = timeout_ns};
  }

  // Makes every wait of this rank's kernels give up, now and later (ncclCommAbort).
  void Abort();
  // The first wait that gave up (recorded 0: none yet). Final: nothing clears it.
  DeviceFailure ReadFailure() const;

 private:
  struct Shared;  // host-mapped: the abort word and the failure record
  PeerWindows(int rank, int num_ranks, const PeerWindowsOptions& options, PeerMemory& memory)
      : rank_(rank), num_ranks_(num_ranks), options_(options), memory_(memory) {}
  // Allocates, and exports this rank's window and signals; an error says what failed.
  absl::Status AllocateAndExport(PeerHandle* handle);
  // Imports every peer's memory and uploads the address arrays.
  absl::Status ImportPeers(const std::vector<PeerHandle>& handles);

  const int rank_;
  const int num_ranks_;
  const PeerWindowsOptions options_;
  PeerMemory& memory_;
  void* own_ = nullptr;           // this rank's window, then its signals: one exported allocation
  std::byte* scratch_ = nullptr;  // then the claim word
  std::byte* program_arena_ = nullptr;
  uint32_t* device_claim_ = nullptr;
  void* address_arrays_ = nullptr;  // device: windows[num_ranks], then signals[num_ranks]
  std::byte* const* device_windows_ = nullptr;
  uint64_t* const* device_signals_ = nullptr;
  std::vector<void*> imported_;  // by rank; nullptr for this rank and what is not imported
  Shared* shared_ = nullptr;     // host address
  const uint32_t* device_abort_ = nullptr;
  DeviceSignalScope signal_scope_ = DeviceSignalScope::kSystem;
  DeviceFailure* device_failure_ = nullptr;
};

}  // namespace stragglar
