// One communicator's calls and the work that must not run beside them. A preload's communicator
// can be aborted, or revoked by the watchdog, from another thread while a call is inside the
// library (PyTorch's watchdog aborts a stuck communicator so): what that thread then does to the
// communicator's state (write its outputs, free it) must run either now, when no call is in
// progress or the one in progress leaves within a grace period, or else on the calling thread as
// it leaves. Never beside the call, never twice, never lost.
#pragma once

#include <chrono>
#include <mutex>
#include <vector>

#include "absl/functional/any_invocable.h"

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

  // Runs `work` here if no call holds the gate, or the one that does ends within `grace`: true.
  // Otherwise runs `while_busy` here (what makes a stuck call end: a revocation), and hands `work`
  // to the call, which runs it as it ends (or this thread does, if the call ended meanwhile):
  // false.
  bool RunOrHandOver(absl::AnyInvocable<void() &&> work, std::chrono::milliseconds grace,
                     absl::AnyInvocable<void() &&> while_busy = nullptr);

 private:
  // Runs what was handed over, then opens the gate; called with it held.
  void RunHandedOverAndOpen();

  std::timed_mutex calling_;
  std::mutex handed_mutex_;  // guards handed_; held while the gate opens (see the .cc)
  std::vector<absl::AnyInvocable<void() &&>> handed_;
};

}  // namespace stragglar
