// Hooks through which exporters (metrics, traces) watch a communicator without the runtime
// depending on them: the backend calls them, the exporters implement them.
#pragma once

#include <cstdint>

#include "profiler/arrival.h"
#include "runtime/runtime_core.h"

namespace stragglar {

class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  // Rank core.rank() entered a call of `bytes` bytes and will run `decision`. Counting here, not
  // at completion, makes a hang visible: the ranks that entered a call the others never joined
  // are one call ahead.
  virtual void OnStart(const RuntimeCore& core, const CallDecision& decision, int64_t bytes) {}
  // Rank core.rank() finished a call of `bytes` bytes that ran `decision`. Called from that
  // rank's thread; different ranks may call concurrently (the host runtime), so an observer keeps
  // per-rank state apart.
  virtual void OnCall(const RuntimeCore& core, const CallDecision& decision, int64_t bytes,
                      const CallTiming& timing) = 0;
  // Rank core.rank() absorbed an epoch exchange (core.last_epoch() is `report`). Every rank of
  // the communicator gets the same report.
  virtual void OnEpoch(const RuntimeCore& core, const EpochReport& report) = 0;
};

}  // namespace stragglar
