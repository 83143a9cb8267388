#include "runtime/transfer_log.h"

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
  std::lock_guard<std::mutex> lock(mutex_);
  // A stream runs its work in order, so the first unit still running stops the scan; units on
  // other streams wait behind it for an exchange or two, which the matching does not mind.
  while (!pending_.empty()) {
    Unit& unit = pending_.front();
    absl::StatusOr<std::optional<double>> seconds = poll(unit.ticket);
    if (seconds.ok() && !seconds->has_value()) break;
    release(unit.ticket);
    if (seconds.ok()) {
      for (TransferSide& side : unit.sides) {
        side.seconds = **seconds;
        timed_.push_back(side);
      }
      // More than the exchange takes (it fell behind or stopped): the oldest go, counted.
      while (timed_.size() > kMaxWaiting) {
        timed_.pop_front();
        ++dropped_;
      }
    } else {
      ++abandoned_;
    }
    pending_.pop_front();
  }
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
