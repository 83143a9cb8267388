#include "runtime/runtime_core.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {

absl::StatusOr<RuntimeCore> RuntimeCore::Create(RuntimeConfig config, int rank, int num_ranks,
                                                LinkModel link) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(absl::StrCat("need at least 2 ranks, got ", num_ranks));
  }
  if (rank < 0 || rank >= num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside [0, ", num_ranks, ")"));
  }
  if (config.epoch_calls < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch_calls must be at least 1, got ", config.epoch_calls));
  }
  if (config.candidates.empty()) return absl::InvalidArgumentError("no candidate algorithms");
  return RuntimeCore(std::move(config), rank, num_ranks, link);
}

RuntimeCore::RuntimeCore(RuntimeConfig config, int rank, int num_ranks, LinkModel link)
    : config_(std::move(config)),
      rank_(rank),
      num_ranks_(num_ranks),
      link_(link),
      detector_(num_ranks, config_.detector),
      chooser_(num_ranks, config_.candidates, config_.min_predicted_gain),
      predicted_arrival_s_(num_ranks, 0.0) {
  epoch_.reserve(config_.epoch_calls);
}

absl::StatusOr<CallDecision> RuntimeCore::Decide(int64_t bytes) {
  CallDecision decision{.call = next_call_++, .algorithm = config_.default_algorithm};
  // Until the first exchange nothing is known, so there is nothing to adapt to.
  if (config_.mode != RuntimeMode::kAdapt || bytes < config_.min_bytes || epochs_ == 0) {
    return decision;
  }
  if (auto it = decisions_by_bytes_.find(bytes); it != decisions_by_bytes_.end()) {
    CallDecision cached = it->second;
    cached.call = decision.call;
    return cached;
  }
  absl::StatusOr<Choice> choice = chooser_.Choose(static_cast<double>(bytes), predicted_arrival_s_,
                                                  detector_.straggler(), link_);
  if (!choice.ok()) return choice.status();
  decision.algorithm = choice->algorithm;
  decision.straggler = choice->straggler;
  decision.predicted_s = choice->predicted_s;
  decision.default_predicted_s = choice->baseline_predicted_s;
  decisions_by_bytes_[bytes] = decision;
  return decision;
}

void RuntimeCore::Record(const CallTiming& timing) { epoch_.push_back(timing); }

std::vector<double> RuntimeCore::EpochPayload() const {
  std::vector<double> payload;
  payload.reserve(2 * epoch_.size());
  for (const CallTiming& timing : epoch_) {
    payload.push_back(timing.arrival_s);
    payload.push_back(timing.duration_s);
  }
  return payload;
}

absl::Status RuntimeCore::AbsorbEpoch(absl::Span<const double> all_payloads) {
  const size_t calls = epoch_.size();
  if (all_payloads.size() != 2 * calls * num_ranks_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epoch exchange: expected ", 2 * calls * num_ranks_, " values (", calls, " calls x ",
        num_ranks_, " ranks), got ", all_payloads.size(), "; ranks disagree on the call count"));
  }
  const std::optional<int> before = detector_.straggler();
  std::vector<CallTiming> per_rank(num_ranks_);
  for (size_t call = 0; call < calls; ++call) {
    for (int r = 0; r < num_ranks_; ++r) {
      const size_t offset = (r * calls + call) * 2;
      per_rank[r] = {all_payloads[offset], all_payloads[offset + 1]};
    }
    detector_.Observe(LagsFromTimings(per_rank, config_.lag_source));
  }
  for (int r = 0; r < num_ranks_; ++r) predicted_arrival_s_[r] = detector_.median_lag(r);
  if (detector_.straggler() != before) {
    const int rank = detector_.straggler().value_or(before.value_or(0));
    detections_.push_back({.call = next_call_ - 1,
                           .straggler = detector_.straggler(),
                           .persistence = detector_.persistence(rank),
                           .mean_lag_s = detector_.mean_lag(rank)});
  }
  decisions_by_bytes_.clear();
  epoch_.clear();
  ++epochs_;
  return absl::OkStatus();
}

}  // namespace stragglar
