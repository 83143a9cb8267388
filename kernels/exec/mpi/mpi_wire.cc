#include "kernels/exec/mpi/mpi_wire.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/exec/mpi/mpi_executor.h"

namespace stragglar {

absl::StatusOr<WireMessage> WireMessage::Of(int64_t bytes, int64_t largest) {
  if (bytes < 0 || largest < 1 || largest > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a message of ", bytes, " bytes in pieces of at most ", largest));
  }
  if (bytes <= largest) return WireMessage(MPI_BYTE, static_cast<int>(bytes), false, bytes);
  const int64_t blocks = bytes / largest;
  const int64_t rest = bytes % largest;
  if (blocks > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("a message of ", bytes, " bytes"));
  }
  MPI_Datatype block = MPI_DATATYPE_NULL, whole = MPI_DATATYPE_NULL;
  if (int code = PMPI_Type_contiguous(static_cast<int>(largest), MPI_BYTE, &block);
      code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Type_contiguous", code);
  }
  int lengths[2] = {static_cast<int>(blocks), static_cast<int>(rest)};
  MPI_Aint offsets[2] = {0, static_cast<MPI_Aint>(blocks * largest)};
  MPI_Datatype types[2] = {block, MPI_BYTE};
  int code = PMPI_Type_create_struct(rest > 0 ? 2 : 1, lengths, offsets, types, &whole);
  PMPI_Type_free(&block);  // the struct keeps what it needs of it
  if (code != MPI_SUCCESS) return MpiCallFailed("MPI_Type_create_struct", code);
  if ((code = PMPI_Type_commit(&whole)) != MPI_SUCCESS) {
    PMPI_Type_free(&whole);
    return MpiCallFailed("MPI_Type_commit", code);
  }
  return WireMessage(whole, 1, true, bytes);
}

WireMessage::WireMessage(WireMessage&& other) noexcept
    : type_(other.type_), count_(other.count_), derived_(other.derived_), bytes_(other.bytes_) {
  other.derived_ = false;
}

WireMessage::~WireMessage() {
  if (derived_) PMPI_Type_free(&type_);
}

int64_t WireMessage::ReceivedBytes(const MPI_Status& status) const {
  int count = 0;
  if (PMPI_Get_count(&status, type_, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) return -1;
  return derived_ ? (count == 1 ? bytes_ : -1) : count;
}

}  // namespace stragglar
