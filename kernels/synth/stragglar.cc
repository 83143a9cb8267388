// StragglAR plans: the pre-arrival ring ReduceScatter among the punctual ranks, then the
// synthesized post-arrival schedule (kernels/synth/stragglar_schedule.cc; pipelined, with every
// chunk cut into pieces: kernels/synth/stragglar_pipelined.cc), in the canonical labelling where
// the straggler is rank n-1. Other stragglers swap labels with n-1, so rank n-1 then owns the chunk
// that the straggler would have owned.
#include <memory>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/plan/plan_memo.h"
#include "kernels/synth/stragglar_schedule.h"
#include "kernels/synth/synthesizers.h"

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

// The canonical plans, for relabelling: up to 2^22 transfers in all. That keeps 1024 ranks' (2.1
// million transfers, what the policy prices and relabels per straggler) but not 4096 ranks' (25
// million).
PlanMemo& Canonicals() {
  static auto& memo = *new PlanMemo(int64_t{1} << 22);
  return memo;
}

absl::Status CheckRanks(int num_ranks, int straggler) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("stragglar needs at least 2 ranks, got ", num_ranks));
  }
  if (straggler < 0 || straggler >= num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("straggler ", straggler, " outside [0, ",
                                                   num_ranks - 1, "] for ", num_ranks, " ranks"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Plan> SynthesizeStragglar(int num_ranks, int straggler, int pieces) {
  if (absl::Status status = CheckRanks(num_ranks, straggler); !status.ok()) return status;
  const PlanMemo::Key key = {num_ranks, pieces};
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

absl::StatusOr<Plan> SynthesizeStragglarUnkept(int num_ranks, int pieces) {
  if (absl::Status status = CheckRanks(num_ranks, num_ranks - 1); !status.ok()) return status;
  if (std::shared_ptr<const Plan> cached = Canonicals().Find({num_ranks, pieces})) return *cached;
  return SynthesizeCanonical(num_ranks, pieces);
}

absl::StatusOr<Plan> SynthesizePlan(Algorithm algorithm, int num_ranks,
                                    std::optional<int> straggler) {
  if (algorithm == Algorithm::kStragglar) {
    if (!straggler.has_value()) return absl::InvalidArgumentError("stragglar needs a straggler");
    return SynthesizeStragglar(num_ranks, *straggler);
  }
  if (algorithm == Algorithm::kNative) {
    return absl::InvalidArgumentError(
        "native is the communication library's own AllReduce, which has no plan");
  }
  if (straggler.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AlgorithmName(algorithm), " takes no straggler"));
  }
  return algorithm == Algorithm::kRing ? SynthesizeRing(num_ranks)
                                       : SynthesizeHalvingDoubling(num_ranks);
}

}  // namespace stragglar
