// StragglAR plans: the pre-arrival ring ReduceScatter among the punctual ranks, then the
// synthesized post-arrival schedule (kernels/stragglar_schedule.cc; pipelined, with every chunk cut
// into pieces: kernels/stragglar_pipelined.cc), in the canonical labelling
// where the straggler is rank n-1. Other stragglers swap labels with n-1, so rank n-1 then owns the
// chunk that the straggler would have owned.
#include <deque>
#include <memory>
#include <mutex>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/stragglar_schedule.h"
#include "kernels/synthesizers.h"

namespace stragglar {
namespace {

absl::StatusOr<Plan> SynthesizeCanonical(int num_ranks, int pieces) {
  const int straggler = num_ranks - 1;
  absl::StatusOr<PostArrivalSchedule> schedule = SynthesizePipelinedPostArrival(num_ranks, pieces);
  if (!schedule.ok()) return schedule.status();
  Plan plan{.algorithm = Algorithm::kStragglar,
            .num_ranks = num_ranks,
            .num_chunks = (num_ranks - 1) * pieces,
            .straggler = straggler};
  std::vector<int> punctual(num_ranks - 1);
  std::iota(punctual.begin(), punctual.end(), 0);
  AppendRingReduceScatter(punctual, plan, pieces);
  plan.pre_arrival_rounds = plan.num_rounds();
  for (const std::vector<ScheduleMove>& moves : *schedule) {
    std::vector<Transfer>& transfers = plan.rounds.emplace_back().transfers;
    transfers.reserve(moves.size());
    for (const ScheduleMove& move : moves) {
      transfers.push_back({move.src, move.dst,
                           move.reduce ? TransferOp::kReduce : TransferOp::kCopy,
                           ChunkList{move.chunk}});
    }
  }
  return plan;
}

// A job uses one or two rank counts, but a sweep (`stragglar rounds`) visits a thousand, and a
// plan has O(n^2) transfers: keep the most recent plans, kCachedTransfers transfers in all, and
// none larger. That keeps 1024 ranks' (2.1 million transfers, what the policy prices and relabels
// per straggler) but not 4096 ranks' (25 million, 1 GB), which a cached copy would double.
constexpr int64_t kCachedTransfers = int64_t{1} << 22;

int64_t TransferCount(const Plan& plan) {
  int64_t count = 0;
  for (const Round& round : plan.rounds) count += static_cast<int64_t>(round.transfers.size());
  return count;
}

class CanonicalCache {
 public:
  using Key = std::pair<int, int>;  // (num_ranks, pieces)

  std::shared_ptr<const Plan> Find(Key key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : it->second.plan;
  }

  // Keeps a copy of `plan` when it fits, dropping the oldest until it does.
  void Keep(Key key, const Plan& plan) {
    const int64_t transfers = TransferCount(plan);
    if (transfers > kCachedTransfers) return;
    auto shared = std::make_shared<const Plan>(plan);
    std::lock_guard<std::mutex> lock(mutex_);
    // A concurrent duplicate is harmless: the output is deterministic.
    if (!plans_.try_emplace(key, Entry{std::move(shared), transfers}).second) return;
    order_.push_back(key);
    cached_transfers_ += transfers;
    while (cached_transfers_ > kCachedTransfers) {
      // Callers still holding a plan keep it alive.
      cached_transfers_ -= plans_.at(order_.front()).transfers;
      plans_.erase(order_.front());
      order_.pop_front();
    }
  }

 private:
  struct Entry {
    std::shared_ptr<const Plan> plan;
    int64_t transfers = 0;
  };
  // std::mutex: see HostTransport for why not absl::Mutex (ThreadSanitizer builds).
  std::mutex mutex_;
  absl::flat_hash_map<Key, Entry> plans_;
  std::deque<Key> order_;
  int64_t cached_transfers_ = 0;
};

CanonicalCache& Canonicals() {
  static auto& cache = *new CanonicalCache();
  return cache;
}

}  // namespace

absl::StatusOr<Plan> SynthesizeStragglar(int num_ranks, int straggler, int pieces) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("stragglar needs at least 2 ranks, got ", num_ranks));
  }
  if (straggler < 0 || straggler >= num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("straggler ", straggler, " outside [0, ",
                                                   num_ranks - 1, "] for ", num_ranks, " ranks"));
  }
  const CanonicalCache::Key key = {num_ranks, pieces};
  if (std::shared_ptr<const Plan> cached = Canonicals().Find(key)) {
    return straggler == num_ranks - 1 ? *cached : SwapRanks(*cached, straggler, num_ranks - 1);
  }
  // Synthesized outside the cache's lock, and relabelled in place when the cache keeps no copy.
  absl::StatusOr<Plan> canonical = SynthesizeCanonical(num_ranks, pieces);
  if (!canonical.ok()) return canonical.status();
  Canonicals().Keep(key, *canonical);
  if (straggler == num_ranks - 1) return canonical;
  return SwapRanks(*std::move(canonical), straggler, num_ranks - 1);
}

absl::StatusOr<Plan> SynthesizePlan(Algorithm algorithm, int num_ranks,
                                    std::optional<int> straggler) {
  if (algorithm == Algorithm::kStragglar) {
    if (!straggler.has_value()) return absl::InvalidArgumentError("stragglar needs a straggler");
    return SynthesizeStragglar(num_ranks, *straggler);
  }
  if (straggler.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AlgorithmName(algorithm), " takes no straggler"));
  }
  return algorithm == Algorithm::kRing ? SynthesizeRing(num_ranks)
                                       : SynthesizeHalvingDoubling(num_ranks);
}

}  // namespace stragglar
