#include "kernels/exec/mpi/mpi_alarm.h"

#include "kernels/exec/library_code.h"
#include "kernels/exec/mpi/mpi_executor.h"

namespace stragglar {

absl::StatusOr<std::unique_ptr<MpiAlarm>> MpiAlarm::Post(MPI_Comm comm) {
  int* tag_ub = nullptr;
  int found = 0;
  if (int code = PMPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &found); code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Comm_get_attr", code);
  }
  std::unique_ptr<MpiAlarm> alarm(new MpiAlarm(comm, found ? *tag_ub : 32767));
  if (int code = PMPI_Irecv(&alarm->failed_call_, 1, MPI_INT64_T, MPI_ANY_SOURCE, alarm->tag_, comm,
                            &alarm->request_);
      code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Irecv", code);
  }
  return alarm;
}

MpiAlarm::~MpiAlarm() {
  if (request_ == MPI_REQUEST_NULL) return;
  PMPI_Cancel(&request_);
  PMPI_Wait(&request_, MPI_STATUS_IGNORE);
}

MpiAlarm::Entry MpiAlarm::Enter() {
  ++calls_;
  if (!Raised()) return Entry::kRun;
  // A call that this rank failed itself has returned already; a peer's alarm names its call.
  if (raised_ || calls_ > failed_call_) return Entry::kPassThrough;
  return Entry::kFailed;
}

bool MpiAlarm::Raised() {
  if (raised_ || request_ == MPI_REQUEST_NULL) return true;
  int came = 0;
  PMPI_Test(&request_, &came, MPI_STATUS_IGNORE);
  return came != 0;
}

void MpiAlarm::Raise() {
  if (raised_) return;
  raised_ = true;
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm_, &rank);
  PMPI_Comm_size(comm_, &size);
  // The payload outlives the sends, which are never waited for (a peer may have freed its
  // communicator, cancelling its receive), and this alarm too: once per broken communicator.
  const int64_t* failed_call = new int64_t(calls_);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    MPI_Request sent = MPI_REQUEST_NULL;
    if (PMPI_Isend(failed_call, 1, MPI_INT64_T, peer, tag_, comm_, &sent) == MPI_SUCCESS) {
      PMPI_Request_free(&sent);
    }
  }
}

absl::Status MpiAlarm::Interrupted() {
  return WithLibraryCode(
      absl::AbortedError("a peer could not finish this call (counts that differ across ranks?)"),
      MPI_ERR_TRUNCATE);
}

}  // namespace stragglar
