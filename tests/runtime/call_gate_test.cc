// The gate between a communicator's calls and what another thread does to its state (an abort,
// STRAGGLAR_TIMEOUT's ending): handed-over work runs once, never beside a call, and never lost.
#include "runtime/call_gate.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace stragglar {
namespace {

using std::chrono::milliseconds;

TEST(CallGateTest, WithNoCallInsideTheWorkRunsAtOnceHere) {
  CallGate gate;
  int ran = 0;
  const std::thread::id here = std::this_thread::get_id();
  std::thread::id ran_on;
  bool busy = false;
  EXPECT_TRUE(gate.RunOrHandOver(
      [&] {
        ++ran;
        ran_on = std::this_thread::get_id();
      },
      milliseconds(0), [&] { busy = true; }));
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(ran_on, here);
  EXPECT_FALSE(busy);
  // The gate is open again: a call can come in.
  { CallGate::Call call(gate); }
}

TEST(CallGateTest, ACallThatLeavesWithinTheGraceIsWaitedFor) {
  CallGate gate;
  absl::Notification inside;
  std::atomic<bool> in_call{false};
  std::thread caller([&] {
    CallGate::Call call(gate);
    in_call = true;
    inside.Notify();
    std::this_thread::sleep_for(milliseconds(20));
    in_call = false;
  });
  ASSERT_TRUE(inside.WaitForNotificationWithTimeout(absl::Seconds(10)));
  bool beside_the_call = true;
  // 20 ms inside against a grace of 10 s: the wait, not a race, decides.
  EXPECT_TRUE(gate.RunOrHandOver([&] { beside_the_call = in_call.load(); }, milliseconds(10'000)));
  EXPECT_FALSE(beside_the_call);
  caller.join();
}

TEST(CallGateTest, ACallThatStaysRunsTheWorkAsItLeavesAfterWhileBusy) {
  CallGate gate;
  absl::Notification inside, handed_over;
  std::atomic<bool> revoked{false};
  std::thread::id caller_id, ran_on;
  int ran = 0;
  bool revoked_first = false;
  std::thread caller([&] {
    caller_id = std::this_thread::get_id();
    CallGate::Call call(gate);
    inside.Notify();
    // Stays until the work is handed over (its wait ended by while_busy, as a revocation ends a
    // stuck call's), bounded in case the hand-over never comes.
    ASSERT_TRUE(handed_over.WaitForNotificationWithTimeout(absl::Seconds(10)));
    EXPECT_EQ(ran, 0) << "the handed-over work ran beside the call";
  });
  ASSERT_TRUE(inside.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(gate.RunOrHandOver(
      [&] {
        ++ran;
        ran_on = std::this_thread::get_id();
        revoked_first = revoked.load();
      },
      milliseconds(1), [&] { revoked = true; }));
  handed_over.Notify();
  caller.join();
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(revoked_first);
  EXPECT_EQ(ran_on, caller_id);
}

TEST(CallGateTest, TryRunLeavesTheWorkUnrunWhileACallStays) {
  CallGate gate;
  absl::Notification inside, leave;
  std::thread caller([&] {
    CallGate::Call call(gate);
    inside.Notify();
    EXPECT_TRUE(leave.WaitForNotificationWithTimeout(absl::Seconds(10)));
  });
  ASSERT_TRUE(inside.WaitForNotificationWithTimeout(absl::Seconds(10)));
  int ran = 0;
  EXPECT_FALSE(gate.TryRun([&] { ++ran; }, milliseconds(1)));
  EXPECT_EQ(ran, 0);
  leave.Notify();
  caller.join();
  EXPECT_TRUE(gate.TryRun([&] { ++ran; }, milliseconds(0)));
  EXPECT_EQ(ran, 1);
}

// A thread running its work under the gate also runs what another thread hands over meanwhile
// (the watchdog's ending does so; the NCCL preload stops it before handing over a teardown).
TEST(CallGateTest, ASenderHoldingTheGateRunsWhatIsHandedOverMeanwhile) {
  CallGate gate;
  absl::Notification running, release;
  std::thread::id sender_id, ran_on;
  std::thread sender([&] {
    sender_id = std::this_thread::get_id();
    EXPECT_TRUE(gate.RunOrHandOver(
        [&] {
          running.Notify();
          EXPECT_TRUE(release.WaitForNotificationWithTimeout(absl::Seconds(10)));
        },
        milliseconds(0)));
  });
  ASSERT_TRUE(running.WaitForNotificationWithTimeout(absl::Seconds(10)));
  bool ran = false;
  EXPECT_FALSE(gate.RunOrHandOver(
      [&] {
        ran = true;
        ran_on = std::this_thread::get_id();
      },
      milliseconds(0)));
  release.Notify();
  sender.join();
  EXPECT_TRUE(ran);
  EXPECT_EQ(ran_on, sender_id);
}

// The race that would lose a piece of work: the call leaves between the hand-over's failed wait
// and its push. `while_busy` runs in that window, so the test makes the call leave there.
TEST(CallGateTest, ACallThatLeavesDuringTheHandOverLosesNothing) {
  CallGate gate;
  absl::Notification inside, leave, left;
  std::thread caller([&] {
    {
      CallGate::Call call(gate);
      inside.Notify();
      EXPECT_TRUE(leave.WaitForNotificationWithTimeout(absl::Seconds(10)));
    }
    left.Notify();
  });
  ASSERT_TRUE(inside.WaitForNotificationWithTimeout(absl::Seconds(10)));
  int ran = 0;
  std::thread::id ran_on;
  EXPECT_FALSE(gate.RunOrHandOver(
      [&] {
        ++ran;
        ran_on = std::this_thread::get_id();
      },
      milliseconds(0),
      [&] {
        leave.Notify();
        EXPECT_TRUE(left.WaitForNotificationWithTimeout(absl::Seconds(10)));
      }));
  caller.join();
  EXPECT_EQ(ran, 1) << "the work was lost";
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// Calls coming and going on two threads while a third hands work over with no grace: every piece
// runs exactly once, and none beside a call (the other thread's, were a leaving call to run it
// after opening the gate). Each round ends with the calls gone, and nothing handed over is left.
TEST(CallGateTest, HandedOverWorkRunsOnceAndNeverBesideACall) {
  constexpr int kRounds = 40, kPerRound = 50;
  int unfinished_rounds = 0, beside = 0, handed = 0;
  for (int round = 0; round < kRounds; ++round) {
    CallGate gate;
    std::atomic<bool> in_call{false}, stop{false};
    std::atomic<int> ran{0}, ran_beside{0}, callers_in{0};
    auto calls = [&] {
      bool first = true;
      while (!stop.load()) {
        CallGate::Call call(gate);
        if (first) ++callers_in;
        first = false;
        in_call = true;
        // Inside long enough that most hand-overs find the gate held.
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        in_call = false;
      }
    };
    std::thread caller(calls), other_caller(calls);
    // Both calling before the first hand-over (bounded: a machine too loaded to start them only
    // makes the round weaker, never wrong).
    for (int wait = 0; wait < 10'000 && callers_in.load() < 2; ++wait) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    for (int i = 0; i < kPerRound; ++i) {
      const bool here = gate.RunOrHandOver(
          [&] {
            if (in_call.load()) ++ran_beside;
            ++ran;
          },
          milliseconds(0));
      if (!here) ++handed;
    }
    stop = true;
    caller.join();
    other_caller.join();
    if (ran.load() != kPerRound) ++unfinished_rounds;
    beside += ran_beside.load();
  }
  EXPECT_EQ(unfinished_rounds, 0) << "of " << kRounds << "; " << handed << " hand-overs";
  EXPECT_EQ(beside, 0) << handed << " hand-overs";
}

}  // namespace
}  // namespace stragglar
