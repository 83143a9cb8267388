#include "runtime/call_gate.h"

#include <utility>

namespace stragglar {

CallGate::Call::Call(CallGate& gate) : gate_(gate) {
  std::unique_lock<std::mutex> lock(gate_.mutex_);
  gate_.opened_.wait(lock, [this] { return !gate_.taken_; });
  gate_.taken_ = true;
}

CallGate::Call::~Call() { gate_.RunHandedOverAndOpen(); }

bool CallGate::Take(std::chrono::milliseconds grace) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!opened_.wait_for(lock, grace, [this] { return !taken_; })) return false;
  taken_ = true;
  return true;
}

void CallGate::RunHandedOverAndOpen() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!handed_.empty()) {
    std::vector<absl::AnyInvocable<void()&&>> work = std::move(handed_);
    handed_.clear();
    lock.unlock();
    for (auto& each : work) std::move(each)();
    lock.lock();
  }
  // Opened under the same lock as the hand-over: work handed over from here on finds the gate
  // open (its sender then takes the gate and runs it), and work handed over before ran above.
  taken_ = false;
  opened_.notify_all();
}

bool CallGate::TryRun(absl::FunctionRef<void()> work, std::chrono::milliseconds grace) {
  if (!Take(grace)) return false;
  work();
  RunHandedOverAndOpen();
  return true;
}

bool CallGate::RunOrHandOver(absl::AnyInvocable<void() &&> work, std::chrono::milliseconds grace,
                             absl::AnyInvocable<void() &&> while_busy) {
  if (Take(grace)) {
    std::move(work)();
    RunHandedOverAndOpen();
    return true;
  }
  // Before the hand-over, so that it never runs beside the handed-over work.
  if (while_busy != nullptr) std::move(while_busy)();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (taken_) {
      handed_.push_back(std::move(work));
      return false;
    }
    // The call ended between the wait above and now: this thread runs the work.
    taken_ = true;
  }
  std::move(work)();
  RunHandedOverAndOpen();
  return false;
}

}  // namespace stragglar
