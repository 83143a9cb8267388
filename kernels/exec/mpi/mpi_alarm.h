// A call's way out when a peer cannot finish it. Every rank keeps a receive posted for an alarm
// on the communicator, and every wait of a call waits for it as well. A rank whose call fails (a
// peer's message of another size, from counts that differ across ranks: an erroneous program;
// or a failed MPI call) raises it to every peer before it returns its error; a peer then returns
// an error from whatever it waits for, instead of waiting for a message that will never come.
// MPI_Allreduce's promise: an erroneous call returns on every rank, with MPI's error class.
//
// Once raised, the communicator's messages are out of step: its owner runs no more plans on it.
// The alarm names the call that failed (each rank counts its calls, Enter()), so that a rank that
// enters that call only after the alarm came returns its error too, rather than passing it to the
// library, where its peers, already returned, would never meet it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stragglar {

class MpiAlarm {
 public:
  // Posts the alarm's receive on `comm` (which carries only plans' traffic; the alarm's tag is
  // MPI_TAG_UB, above every round's). Local.
  static absl::StatusOr<std::unique_ptr<MpiAlarm>> Post(MPI_Comm comm);
  // Cancels the receive if nothing came.
  ~MpiAlarm();
  MpiAlarm(const MpiAlarm&) = delete;
  MpiAlarm& operator=(const MpiAlarm&) = delete;

  // What a call on the communicator does, said as it starts (it counts the call).
  enum class Entry {
    kRun,          // no alarm: run the call
    kFailed,       // the alarm names this very call: return Interrupted(), running nothing
    kPassThrough,  // an earlier call failed: the communicator's plans are out of step
  };
  Entry Enter();

  // Whether a peer raised it, or this rank did (MPI_Test: it never waits).
  bool Raised();
  // Tells every other rank that the call in progress failed (sends that need no completion), once.
  void Raise();
  // The request a wait adds to its own; MPI_REQUEST_NULL once the alarm came.
  MPI_Request& request() { return request_; }
  // What a call returns when the alarm interrupts it: MPI_ERR_TRUNCATE's class, MPI's own for
  // messages of another size than the receiver expected.
  static absl::Status Interrupted();

 private:
  MpiAlarm(MPI_Comm comm, int tag) : comm_(comm), tag_(tag) {}

  MPI_Comm comm_;
  int tag_;
  int64_t calls_ = 0;         // calls entered on this rank; the one in progress is number calls_
  int64_t failed_call_ = -1;  // the received alarm's payload: the call that failed on its sender
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool raised_ = false;
};

}  // namespace stragglar
