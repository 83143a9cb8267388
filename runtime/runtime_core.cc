#include "runtime/runtime_core.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {

absl::StatusOr<RuntimeCore> RuntimeCore::Create(RuntimeConfig config, int rank, int num_ranks,
                                                LinkModel link) {
  absl::StatusOr<Policy> policy = Policy::Create(std::move(config), num_ranks, link);
  if (!policy.ok()) return policy.status();
  if (rank < 0 || rank >= num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside [0, ", num_ranks, ")"));
  }
  return RuntimeCore(*std::move(policy), rank);
}

RuntimeCore::RuntimeCore(Policy policy, int rank) : policy_(std::move(policy)), rank_(rank) {
  epoch_.calls.reserve(config().epoch_calls);
  epoch_.timings.reserve(config().epoch_calls);
}

absl::StatusOr<CallDecision> RuntimeCore::Decide(int64_t bytes) {
  absl::StatusOr<CallDecision> decision = policy_.Decide(next_call_++, bytes);
  if (decision.ok()) pending_ = {*decision, bytes};
  return decision;
}

void RuntimeCore::Append(const RecordedCall& call, const CallTiming& timing) {
  epoch_.calls.push_back(call);
  epoch_.timings.push_back(timing);
  // The current epoch ends at the last call counted.
  epoch_.first_call = next_call_ - static_cast<int64_t>(epoch_.calls.size());
}

void RuntimeCore::Record(const CallTiming& timing, bool ran_decision) {
  RecordedCall call;
  if (pending_.has_value()) {
    call = {.decision = pending_->first, .bytes = pending_->second, .measured = ran_decision};
    pending_.reset();
  }
  Append(call, timing);
}

void RuntimeCore::Record(const CallTiming& timing, const CallDecision& ran, bool measured) {
  if (pending_.has_value()) {
    const int64_t call = pending_->first.call;
    pending_->first = ran;
    pending_->first.call = call;
  }
  Record(timing, measured);
}

void RuntimeCore::RecordPending(const CallDecision& ran, PendingTiming pending) {
  Record(CallTiming{}, ran);
  pending_timings_.emplace_back(epoch_.first_call + static_cast<int64_t>(epoch_.calls.size()) - 1,
                                pending);
}

std::optional<std::pair<int64_t, PendingTiming>> RuntimeCore::OldestPending() const {
  if (pending_timings_.empty()) return std::nullopt;
  return pending_timings_.front();
}

RuntimeCore::Epoch* RuntimeCore::EpochOf(int64_t call) {
  return const_cast<Epoch*>(static_cast<const RuntimeCore*>(this)->EpochOf(call));
}

const RuntimeCore::Epoch* RuntimeCore::EpochOf(int64_t call) const {
  for (const Epoch* epoch : {sealed_.has_value() ? &*sealed_ : nullptr, &epoch_}) {
    if (epoch != nullptr && call >= epoch->first_call &&
        call < epoch->first_call + static_cast<int64_t>(epoch->calls.size())) {
      return epoch;
    }
  }
  return nullptr;
}

absl::Status RuntimeCore::Fill(int64_t call, const CallTiming& timing) {
  auto pending = std::find_if(pending_timings_.begin(), pending_timings_.end(),
                              [call](const auto& entry) { return entry.first == call; });
  Epoch* epoch = EpochOf(call);
  if (pending == pending_timings_.end() || epoch == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("call ", call, " awaits no timing"));
  }
  epoch->timings[call - epoch->first_call] = timing;
  pending_timings_.erase(pending);
  return absl::OkStatus();
}

const RecordedCall* RuntimeCore::Recorded(int64_t call, CallTiming* timing) const {
  const Epoch* epoch = EpochOf(call);
  if (epoch == nullptr) return nullptr;
  if (timing != nullptr) *timing = epoch->timings[call - epoch->first_call];
  return &epoch->calls[call - epoch->first_call];
}

std::vector<double> RuntimeCore::EpochPayload() const {
  const Epoch& epoch = sealed_.has_value() ? *sealed_ : epoch_;
  std::vector<double> payload;
  payload.reserve(2 * epoch.timings.size());
  for (const CallTiming& timing : epoch.timings) {
    payload.push_back(timing.arrival_s);
    payload.push_back(timing.duration_s);
  }
  return payload;
}

absl::Status RuntimeCore::SealEpoch() {
  if (sealed_.has_value()) {
    return absl::FailedPreconditionError("an epoch is already sealed; absorb it first");
  }
  if (!ExchangeDue()) {
    return absl::FailedPreconditionError(absl::StrCat("the epoch holds ", epoch_.calls.size(),
                                                      " of ", config().epoch_calls, " calls"));
  }
  epoch_.first_call = next_call_ - static_cast<int64_t>(epoch_.calls.size());
  sealed_ = std::move(epoch_);
  epoch_ = Epoch{};
  epoch_.calls.reserve(config().epoch_calls);
  epoch_.timings.reserve(config().epoch_calls);
  return absl::OkStatus();
}

absl::Status RuntimeCore::AbsorbEpoch(absl::Span<const double> all_payloads) {
  Epoch& epoch = sealed_.has_value() ? *sealed_ : epoch_;
  const int64_t first_call = sealed_.has_value()
                                 ? epoch.first_call
                                 : next_call_ - static_cast<int64_t>(epoch.calls.size());
  absl::StatusOr<EpochReport> report = policy_.Absorb(first_call, epoch.calls, all_payloads);
  if (!report.ok()) return report.status();
  last_epoch_ = *std::move(report);
  last_epoch_.link_speeds = link_speeds_;
  // Its pending timings are dropped with it: nothing will read them any more.
  const int64_t end = first_call + static_cast<int64_t>(epoch.calls.size());
  std::erase_if(pending_timings_, [&](const auto& entry) { return entry.first < end; });
  if (sealed_.has_value()) {
    sealed_.reset();
  } else {
    epoch_.calls.clear();
    epoch_.timings.clear();
  }
  return absl::OkStatus();
}

}  // namespace stragglar
