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

// A job uses one or two rank counts, but a sweep (`stragglar rounds`) visits a thousand, whose
// plans together would not fit in memory (O(n^2) transfers each): keep the most recent few.
constexpr size_t kCachedPlans = 16;

absl::StatusOr<std::shared_ptr<const Plan>> CachedCanonical(int num_ranks, int pieces) {
  // std::mutex: see HostTransport for why not absl::Mutex (ThreadSanitizer builds).
  static std::mutex mutex;
  using Key = std::pair<int, int>;  // (num_ranks, pieces)
  static auto& cache = *new absl::flat_hash_map<Key, std::shared_ptr<const Plan>>();
  static auto& insertion_order = *new std::deque<Key>();
  const Key key = {num_ranks, pieces};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  // Synthesize outside the lock; a concurrent duplicate is harmless (deterministic output).
  absl::StatusOr<Plan> plan = SynthesizeCanonical(num_ranks, pieces);
  if (!plan.ok()) return plan.status();
  auto shared = std::make_shared<const Plan>(*std::move(plan));
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key, std::move(shared));
  std::shared_ptr<const Plan> result = it->second;
  if (inserted) {
    insertion_order.push_back(key);
    if (insertion_order.size() > kCachedPlans) {
      cache.erase(insertion_order.front());  // callers still holding it keep it alive
      insertion_order.pop_front();
    }
  }
  return result;
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
  absl::StatusOr<std::shared_ptr<const Plan>> canonical = CachedCanonical(num_ranks, pieces);
  if (!canonical.ok()) return canonical.status();
  if (straggler == num_ranks - 1) return **canonical;
  return SwapRanks(**canonical, straggler, num_ranks - 1);
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
