// How a transfer of any size travels as one MPI message. An MPI count is an int, so up to
// `largest` bytes (1 GiB by default) a message is that many MPI_BYTEs; beyond it, one element of
// a derived type: whole blocks of `largest` bytes, then the rest. Sender and receiver build the
// same type from the same size, so a transfer of 2 GiB or more is one message with one request,
// as every other, in both of the executor's ways of running a program.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace stragglar {

inline constexpr int64_t kLargestPlainMessageBytes = int64_t{1} << 30;

class WireMessage {
 public:
  // InvalidArgument for a negative size or a `largest` outside [1, INT_MAX]; the MPI library's
  // error (MpiCallFailed) when a type cannot be made.
  static absl::StatusOr<WireMessage> Of(int64_t bytes, int64_t largest = kLargestPlainMessageBytes);
  // Frees the derived type, if any: MPI lets operations already posted with it finish.
  ~WireMessage();
  WireMessage(WireMessage&& other) noexcept;
  WireMessage& operator=(WireMessage&&) = delete;
  WireMessage(const WireMessage&) = delete;
  WireMessage& operator=(const WireMessage&) = delete;

  MPI_Datatype type() const { return type_; }
  int count() const { return count_; }
  bool derived() const { return derived_; }
  // The bytes a completed receive of this message got, counted as MPI counts them: its size in
  // bytes when they fit an int, else in the message's own elements scaled back (-1 when MPI
  // cannot say, e.g. a partial element).
  int64_t ReceivedBytes(const MPI_Status& status) const;

 private:
  WireMessage(MPI_Datatype type, int count, bool derived, int64_t bytes)
      : type_(type), count_(count), derived_(derived), bytes_(bytes) {}

  MPI_Datatype type_;
  int count_;
  bool derived_;
  int64_t bytes_;
};

}  // namespace stragglar
