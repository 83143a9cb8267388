#include "pipeline/links/transfer_log.h"

namespace stragglar {

uint64_t TransferLog::NextIndex(int peer, bool send) {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_[{peer, send}]++;
}

void TransferLog::AddTimed(uint64_t ticket, std::vector<TransferSide> sides) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back({ticket, std::move(sides)});
}

std::vector<TransferSide> TransferLog::TakeTimed(int max, const PollSeconds& poll,
                                                 const ReleaseTicket& release) {
  // A stream runs its work in order, so the first unit still running stops the scan; units on
  // other streams wait behind it for an exchange or two, which the matching does not mind. Only
  // this (the exchange) thread removes units, so the front stays the front while it is polled,
  // outside the lock: a poll can flush CUPTI's buffers, and the calling threads must not wait.
  while (true) {
    uint64_t ticket = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (pending_.empty()) break;
      ticket = pending_.front().ticket;
    }
    absl::StatusOr<std::optional<double>> seconds = poll(ticket);
    if (seconds.ok() && !seconds->has_value()) break;
    release(ticket);
    std::lock_guard<std::mutex> lock(mutex_);
    Unit unit = std::move(pending_.front());
    pending_.pop_front();
    if (!seconds.ok()) {
      ++abandoned_;
      continue;
    }
    for (TransferSide& side : unit.sides) {
      side.seconds = **seconds;
      timed_.push_back(side);
    }
    // More than the exchange takes (it fell behind or stopped): the oldest go, counted.
    while (timed_.size() > kMaxWaiting) {
      timed_.pop_front();
      ++dropped_;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TransferSide> taken;
  while (!timed_.empty() && static_cast<int>(taken.size()) < max) {
    taken.push_back(timed_.front());
    timed_.pop_front();
  }
  return taken;
}

void TransferLog::Abandon(const ReleaseTicket& release) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Unit& unit : pending_) release(unit.ticket);
  abandoned_ += static_cast<int64_t>(pending_.size());
  pending_.clear();
}

int64_t TransferLog::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

int64_t TransferLog::abandoned() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return abandoned_;
}

}  // namespace stragglar
