#include "runtime/call_gate.h"

#include <utility>

namespace stragglar {

CallGate::Call::Call(CallGate& gate) : gate_(gate) { gate_.calling_.lock(); }

CallGate::Call::~Call() { gate_.RunHandedOverAndOpen(); }

void CallGate::RunHandedOverAndOpen() {
  std::unique_lock<std::mutex> lock(handed_mutex_);
  while (!handed_.empty()) {
    std::vector<absl::AnyInvocable<void()&&>> work = std::move(handed_);
    handed_.clear();
    lock.unlock();
    for (auto& each : work) std::move(each)();
    lock.lock();
  }
  // Opened under handed_mutex_: work handed over from here on finds the gate open (its sender
  // then takes the gate and runs it), and work handed over before was run above.
  calling_.unlock();
}

bool CallGate::RunOrHandOver(absl::AnyInvocable<void() &&> work, std::chrono::milliseconds grace,
                             absl::AnyInvocable<void() &&> while_busy) {
  if (calling_.try_lock_for(grace)) {
    std::move(work)();
    RunHandedOverAndOpen();
    return true;
  }
  // Before the hand-over, so that it never runs beside the handed-over work.
  if (while_busy != nullptr) std::move(while_busy)();
  {
    std::lock_guard<std::mutex> lock(handed_mutex_);
    handed_.push_back(std::move(work));
  }
  // The call may have ended between the wait above and the hand-over: then nobody holds the gate
  // to run it, and this thread does (or the next call does, if one took the gate first).
  if (calling_.try_lock()) RunHandedOverAndOpen();
  return false;
}

}  // namespace stragglar
