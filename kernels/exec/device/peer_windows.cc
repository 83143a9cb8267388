#include "kernels/exec/device/peer_windows.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/exec/device/device_rank.h"

namespace stragglar {
namespace {

// What a rank says after a step of the setup. The same record type in every exchange, so that a
// rank that failed early still takes part in the exchange that tells the others.
enum class Verdict : uint32_t { kOk = 0, kOtherHost = 1, kNoPeerAccess = 2, kFailed = 3 };

struct Record {
  Verdict verdict = Verdict::kOk;
  int32_t other_rank = -1;  // kOtherHost, kNoPeerAccess: the rank it is about
  uint64_t host = 0;        // exchange 1
  DeviceUuid device;        // exchange 1
  PeerHandle handle;        // exchange 2
};

constexpr int64_t kWindowAlignment = 256;

int64_t RoundedWindowBytes(const PeerWindowsOptions& options) {
  return (options.window_bytes + kWindowAlignment - 1) / kWindowAlignment * kWindowAlignment;
}

// Bytes of a rank's exported allocation: the window (rounded up to 256 bytes), then the signals.
int64_t PeerWindowBytes(const PeerWindowsOptions& options, int num_ranks) {
  return RoundedWindowBytes(options) +
         static_cast<int64_t>(DeviceSignalSlots(options.ctas, num_ranks)) * sizeof(uint64_t);
}

absl::StatusOr<std::vector<Record>> Exchange(const GatherBytes& gather, const Record& mine,
                                             int num_ranks) {
  std::vector<Record> all(num_ranks);
  if (absl::Status status = gather(&mine, all.data(), sizeof(Record)); !status.ok()) {
    return status;
  }
  return all;
}

// FailedPrecondition naming the first rank whose verdict is not kOk, worded alike on every rank
// (this rank's own failure adds its detail); OK when every rank is.
absl::Status FirstFailure(const std::vector<Record>& records, int rank,
                          const absl::Status& own_failure) {
  for (size_t r = 0; r < records.size(); ++r) {
    const Record& record = records[r];
    std::string why;
    if (record.verdict == Verdict::kOk) continue;
    if (record.verdict == Verdict::kOtherHost) {
      why = absl::StrCat("rank ", r, " is not on the same host as rank ", record.other_rank);
    } else if (record.verdict == Verdict::kNoPeerAccess) {
      why = absl::StrCat("rank ", r, "'s GPU cannot access rank ", record.other_rank, "'s GPU");
    } else {
      why = absl::StrCat("rank ", r, " could not set up its peer memory");
    }
    if (static_cast<int>(r) == rank && !own_failure.ok()) {
      absl::StrAppend(&why, " (", own_failure.message(), ")");
    }
    return absl::FailedPreconditionError(absl::StrCat("device executor unavailable: ", why));
  }
  return absl::OkStatus();
}

// Whether this rank can take part: every rank on its host, every GPU accessible from its own.
Record Eligibility(const std::vector<Record>& identities, int rank, PeerMemory& memory,
                   absl::Status* failure) {
  const Record& mine = identities[rank];
  for (size_t r = 0; r < identities.size(); ++r) {
    if (identities[r].host != mine.host) {
      return {.verdict = Verdict::kOtherHost, .other_rank = static_cast<int32_t>(r)};
    }
  }
  for (size_t r = 0; r < identities.size(); ++r) {
    absl::StatusOr<bool> can_access = memory.CanAccess(identities[r].device);
    if (!can_access.ok()) {
      *failure = can_access.status();
      return {.verdict = Verdict::kFailed};
    }
    if (!*can_access)
      return {.verdict = Verdict::kNoPeerAccess, .other_rank = static_cast<int32_t>(r)};
  }
  return {};
}

}  // namespace

// The host-mapped words the kernel watches and writes.
struct PeerWindows::Shared {
  uint32_t abort;
  uint32_t padding;
  DeviceFailure failure;
};

absl::StatusOr<std::unique_ptr<PeerWindows>> PeerWindows::Create(int rank, int num_ranks,
                                                                 uint64_t host,
                                                                 const PeerWindowsOptions& options,
                                                                 PeerMemory& memory,
                                                                 const GatherBytes& gather) {
  if (rank < 0 || rank >= num_ranks || options.window_bytes < 1 || options.ctas < 1 ||
      options.program_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("peer windows for rank ", rank, " of ",
                                                   num_ranks, ", ", options.window_bytes,
                                                   "-byte windows, ", options.ctas, " CTAs"));
  }
  std::unique_ptr<PeerWindows> windows(new PeerWindows(rank, num_ranks, options, memory));
  absl::Status failure;

  Record identity{.host = host};
  if (absl::StatusOr<DeviceUuid> device = memory.OwnDevice(); device.ok()) {
    identity.device = *device;
  } else {
    failure = device.status();
    identity.verdict = Verdict::kFailed;
  }
  absl::StatusOr<std::vector<Record>> identities = Exchange(gather, identity, num_ranks);
  if (!identities.ok()) return identities.status();
  if (absl::Status status = FirstFailure(*identities, rank, failure); !status.ok()) return status;

  const bool one_gpu =
      std::all_of(identities->begin(), identities->end(),
                  [&](const Record& other) { return other.device == identity.device; });
  if (one_gpu && !options.system_scope) windows->signal_scope_ = DeviceSignalScope::kGpu;

  Record exported = Eligibility(*identities, rank, memory, &failure);
  if (exported.verdict == Verdict::kOk) {
    failure = windows->AllocateAndExport(&exported.handle);
    if (!failure.ok()) exported.verdict = Verdict::kFailed;
  }
  absl::StatusOr<std::vector<Record>> handles = Exchange(gather, exported, num_ranks);
  if (!handles.ok()) return handles.status();
  if (absl::Status status = FirstFailure(*handles, rank, failure); !status.ok()) return status;

  std::vector<PeerHandle> peer_handles;
  for (const Record& record : *handles) peer_handles.push_back(record.handle);
  Record imported;
  failure = windows->ImportPeers(peer_handles);
  if (!failure.ok()) imported.verdict = Verdict::kFailed;
  absl::StatusOr<std::vector<Record>> verdicts = Exchange(gather, imported, num_ranks);
  if (!verdicts.ok()) return verdicts.status();
  if (absl::Status status = FirstFailure(*verdicts, rank, failure); !status.ok()) return status;
  return windows;
}

absl::Status PeerWindows::AllocateAndExport(PeerHandle* handle) {
  const int64_t own_bytes = PeerWindowBytes(options_, num_ranks_);
  absl::StatusOr<void*> own = memory_.AllocateZeroed(own_bytes);
  if (!own.ok()) return own.status();
  own_ = *own;
  absl::StatusOr<void*> scratch =
      memory_.AllocateZeroed(RoundedWindowBytes(options_) + kWindowAlignment);
  if (!scratch.ok()) return scratch.status();
  scratch_ = static_cast<std::byte*>(*scratch);
  device_claim_ = reinterpret_cast<uint32_t*>(scratch_ + RoundedWindowBytes(options_));
  absl::StatusOr<void*> arena = memory_.AllocateZeroed(options_.program_bytes);
  if (!arena.ok()) return arena.status();
  program_arena_ = static_cast<std::byte*>(*arena);
  absl::StatusOr<void*> arrays = memory_.AllocateZeroed(2 * num_ranks_ * sizeof(void*));
  if (!arrays.ok()) return arrays.status();
  address_arrays_ = *arrays;
  device_windows_ = static_cast<std::byte* const*>(address_arrays_);
  device_signals_ = reinterpret_cast<uint64_t* const*>(device_windows_ + num_ranks_);
  void* device_shared = nullptr;
  absl::StatusOr<void*> shared = memory_.AllocateMapped(sizeof(Shared), &device_shared);
  if (!shared.ok()) return shared.status();
  shared_ = static_cast<Shared*>(*shared);
  auto* device_view = static_cast<Shared*>(device_shared);
  device_abort_ = &device_view->abort;
  device_failure_ = &device_view->failure;
  absl::StatusOr<PeerHandle> exported = memory_.Export(own_);
  if (!exported.ok()) return exported.status();
  *handle = *exported;
  return absl::OkStatus();
}

absl::Status PeerWindows::ImportPeers(const std::vector<PeerHandle>& handles) {
  imported_.assign(num_ranks_, nullptr);
  std::vector<void*> addresses(2 * num_ranks_);
  for (int r = 0; r < num_ranks_; ++r) {
    void* window = own_;
    if (r != rank_) {
      absl::StatusOr<void*> imported = memory_.Import(handles[r]);
      if (!imported.ok()) {
        return absl::Status(
            imported.status().code(),
            absl::StrCat("importing rank ", r, "'s memory: ", imported.status().message()));
      }
      window = imported_[r] = *imported;
    }
    addresses[r] = window;
    addresses[num_ranks_ + r] = static_cast<std::byte*>(window) + RoundedWindowBytes(options_);
  }
  return memory_.CopyToDevice(address_arrays_, addresses.data(), addresses.size() * sizeof(void*));
}

PeerWindows::~PeerWindows() {
  // Our kernels may still read the peers' windows and write their signals.
  if (own_ != nullptr) memory_.Synchronize();
  for (void* imported : imported_) {
    if (imported != nullptr) memory_.CloseImported(imported);
  }
  if (shared_ != nullptr) memory_.FreeMapped(shared_);
  for (void* device :
       {address_arrays_, static_cast<void*>(program_arena_), static_cast<void*>(scratch_), own_}) {
    if (device != nullptr) memory_.Free(device);
  }
}

void PeerWindows::Abort() {
  std::atomic_ref<uint32_t>(shared_->abort).store(1, std::memory_order_release);
}

DeviceFailure PeerWindows::ReadFailure() const {
  DeviceFailure& shared = shared_->failure;
  if (std::atomic_ref<uint32_t>(shared.recorded).load(std::memory_order_acquire) == 0) return {};
  return {.reason = std::atomic_ref<uint32_t>(shared.reason).load(std::memory_order_relaxed),
          .peer = std::atomic_ref<int32_t>(shared.peer).load(std::memory_order_relaxed),
          .sequence = std::atomic_ref<uint32_t>(shared.sequence).load(std::memory_order_relaxed),
          .recorded = 1};
}

}  // namespace stragglar
