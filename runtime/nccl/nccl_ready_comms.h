// STRAGGLAR_PRE_ARRIVAL=nccl: StragglAR's pre-arrival phase as NCCL collectives on a communicator
// of the ready ranks, one per straggler, split off the user's communicator at its first use.
#pragma once

#include <nccl.h>

#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace stragglar {

class NcclReadyComms {
 public:
  // `comm` is the user's communicator, on which this process is `rank` of `size`.
  NcclReadyComms(ncclComm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  NcclReadyComms(const NcclReadyComms&) = delete;
  NcclReadyComms& operator=(const NcclReadyComms&) = delete;

  // The communicator of the ready ranks when `straggler` is late, each at the index of the block
  // it owns (`block`; -1 on the straggler, which gets nullptr), split off at its first use: a
  // collective call, in which every rank, the straggler too, takes part.
  absl::StatusOr<ncclComm_t> Get(int straggler, int block);
  // Every one split off so far: what a revocation revokes with the user's. Safe on any thread.
  std::vector<ncclComm_t> Live() const;
  // Frees them all: aborted when the user's communicator is (a peer may be gone, and destroying
  // would wait for it), destroyed otherwise.
  void Release(bool abort);

 private:
  ncclComm_t comm_;
  int rank_;
  int size_;
  // By straggler; nullptr on the straggler. Under mutex_: a revocation reads it from the watchdog's
  // thread.
  mutable std::mutex mutex_;
  absl::flat_hash_map<int, ncclComm_t> comms_;
};

}  // namespace stragglar
