// Synthesized plans kept for reuse, bounded by their transfers rather than their number: a plan
// has O(n^2) transfers, so a sweep over rank counts (`stragglar rounds`) must not keep them all,
// and one huge plan (flat StragglAR at 4096 ranks: 25 million transfers, 1 GB) is cheaper to
// rebuild than to hold twice, once here and once in the caller's copy. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "kernels/plan/plan.h"

namespace stragglar {

int64_t TransferCount(const Plan& plan);

class PlanMemo {
 public:
  using Key = std::pair<int, int>;  // e.g. (num_ranks, pieces)

  explicit PlanMemo(int64_t max_transfers) : max_transfers_(max_transfers) {}

  // The plan kept for `key`, or nullptr.
  std::shared_ptr<const Plan> Find(Key key);
  // Keeps a copy of `plan` for `key` unless it alone is over the budget, then drops the oldest
  // plans until the rest fit. A key kept already keeps its first plan. Callers still holding a
  // dropped plan keep it alive.
  void Keep(Key key, const Plan& plan);

  int64_t kept_transfers() const;
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<const Plan> plan;
    int64_t transfers = 0;
  };
  const int64_t max_transfers_;
  // std::mutex: see HostTransport for why not absl::Mutex (ThreadSanitizer builds).
  mutable std::mutex mutex_;
  absl::flat_hash_map<Key, Entry> plans_;
  std::deque<Key> order_;  // oldest first
  int64_t kept_transfers_ = 0;
};

}  // namespace stragglar
