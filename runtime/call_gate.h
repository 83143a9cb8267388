// One communicator's calls and the work that must not run beside them. A preload's communicator
// can be aborted, or revoked by the watchdog, from another thread while a call is inside the
// library (PyTorch's watchdog aborts a stuck communicator so): what that thread then does to the
// communicator's state (write its outputs, free it) must run either now, when no call is in
// progress or the one in progress leaves within a grace period, or else on the calling thread as
// it leaves. Never beside the call, never twice, never lost.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"

namespace stragglar {

class CallGate {
 public:
  // A call inside the library; while it lives, no handed-over work runs but on its thread, as it
  // ends. Calls on one gate run one at a time (a communicator's calls are ordered anyway).
  class Call {
   public:
    explicit Call(CallGate& gate);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    CallGate& gate_;
  };

  // Whoever takes the gate to run work, here or in the two below, also runs the work handed over
  // to the gate until then, other threads' too, before opening it.

  // Runs `work` here if no call holds the gate, or the one that does ends within `grace`: true.
  // Otherwise false, and `work` has not run.
  bool TryRun(absl::FunctionRef<void()> work, std::chrono::milliseconds grace);

  // Runs `work` here if no call holds the gate, or the one that does ends within `grace`: true.
  // Otherwise runs `while_busy` here (what makes a stuck call end: a revocation), and hands `work`
  // to the call, which runs it as it ends (or this thread does, if the call ended meanwhile):
  // false.
  bool RunOrHandOver(absl::AnyInvocable<void() &&> work, std::chrono::milliseconds grace,
                     absl::AnyInvocable<void() &&> while_busy = nullptr);

 private:
  // Takes the gate if it is open or opens within `grace`.
  bool Take(std::chrono::milliseconds grace);
  // Runs what was handed over, then opens the gate; called with it taken.
  void RunHandedOverAndOpen();

  // A flag and a condition variable rather than a timed mutex: ThreadSanitizer does not see a
  // std::timed_mutex taken with a timeout (pthread_mutex_clocklock), and reports its unlock.
  std::mutex mutex_;
  std::condition_variable opened_;
  bool taken_ = false;                                 // under mutex_
  std::vector<absl::AnyInvocable<void() &&>> handed_;  // under mutex_
};

}  // namespace stragglar
