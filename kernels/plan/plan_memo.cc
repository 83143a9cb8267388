#include "kernels/plan/plan_memo.h"

namespace stragglar {

int64_t TransferCount(const Plan& plan) {
  int64_t count = 0;
  for (const Round& round : plan.rounds) count += static_cast<int64_t>(round.transfers.size());
  return count;
}

std::shared_ptr<const Plan> PlanMemo::Find(Key key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(key);
  return it == plans_.end() ? nullptr : it->second.plan;
}

void PlanMemo::Keep(Key key, const Plan& plan) {
  const int64_t transfers = TransferCount(plan);
  if (transfers > max_transfers_) return;
  auto shared = std::make_shared<const Plan>(plan);  // copied outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  if (!plans_.try_emplace(key, Entry{std::move(shared), transfers}).second) return;
  order_.push_back(key);
  kept_transfers_ += transfers;
  while (kept_transfers_ > max_transfers_) {
    kept_transfers_ -= plans_.at(order_.front()).transfers;
    plans_.erase(order_.front());
    order_.pop_front();
  }
}

int64_t PlanMemo::kept_transfers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_transfers_;
}

size_t PlanMemo::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

}  // namespace stragglar
