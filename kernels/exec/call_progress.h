// What a call in progress is waiting for, for a watchdog on another thread
// (runtime/call_watchdog.h). The calling thread writes it with relaxed atomic stores, a few per
// round, and the watchdog reads it without a lock: it needs a recent value, not an exact one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace stragglar {

// What CallProgress::started_ns counts.
inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct CallProgress {
  // Set when a call starts; 0 while no call is in progress.
  std::atomic<int64_t> started_ns{0};  // std::chrono::steady_clock, in nanoseconds
  std::atomic<int64_t> call{0};        // the call's index on its communicator
  // What runs it, once decided: an Algorithm as an int (kernels/plan/plan.h); -1 until then.
  std::atomic<int> algorithm{-1};
  // The rank and the plan's round the call waits on now; -1 when unknown (the library's own
  // collective, the epoch exchange, or a plan on link-class queues).
  std::atomic<int32_t> peer{-1};
  std::atomic<int32_t> round{-1};
  // The call waits for its work on the GPU to finish (its host side has returned: NCCL's calls
  // only enqueue), where neither the peer nor the round can be seen.
  std::atomic<bool> on_gpu{false};

  // A call starts: nothing decided or waited for yet.
  void Start() {
    algorithm.store(-1, std::memory_order_relaxed);
    on_gpu.store(false, std::memory_order_relaxed);
    Waiting(-1, -1);
    started_ns.store(SteadyNowNs(), std::memory_order_relaxed);
  }
  void Finish() { started_ns.store(0, std::memory_order_relaxed); }

  void Waiting(int32_t waited_peer, int32_t waited_round) {
    peer.store(waited_peer, std::memory_order_relaxed);
    round.store(waited_round, std::memory_order_relaxed);
  }
};

}  // namespace stragglar
