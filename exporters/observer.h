// Hooks through which exporters (metrics, traces) watch a communicator without depending on the
// runtime that drives it: the communicator calls them, the exporters implement them. They are
// given plain data (policy/reports.h) and the rank it concerns.
#pragma once

#include <cstdint>

#include "policy/reports.h"
#include "profiler/arrival.h"

namespace stragglar {

class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  // Rank `rank` entered a call of `bytes` bytes and will run `decision`. Counting here, not at
  // completion, makes a hang visible: the ranks that entered a call the others never joined are
  // one call ahead.
  virtual void OnStart(int rank, const CallDecision& decision, int64_t bytes) {}
  // Rank `rank`'s timing of a call of `bytes` bytes that ran `decision` is known: at once on the
  // host, once the GPU has run it for a GPU call. In call order for each rank. Called from that
  // rank's thread; different ranks may call concurrently (ranks as threads), so an observer keeps
  // per-rank state apart.
  virtual void OnCall(int rank, const CallDecision& decision, int64_t bytes,
                      const CallTiming& timing) = 0;
  // Rank `rank` absorbed an epoch exchange. Every rank of the communicator gets the same report.
  virtual void OnEpoch(int rank, const EpochReport& report) = 0;
};

}  // namespace stragglar
