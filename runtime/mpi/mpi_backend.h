// The MPI backend of the communicator protocol: the protocol's own traffic over a communicator
// private to stragglar (a duplicate of the user's), and each MPI_Allreduce's work: the MPI
// library's own Allreduce on the user's communicator, or this rank's program over point-to-point
// (kernels/exec/mpi/mpi_executor.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/exec/mpi/mpi_executor.h"
#include "runtime/comm_backend.h"

namespace stragglar {

// The MPI library in the process, its first line as MPI_Get_library_version gives it up to the
// first comma, e.g. "Open MPI v4.1.4" (callable before MPI_Init).
std::string MpiLibraryVersion();

// The largest message the MPI library's TCP transport sends eagerly (without a rendezvous
// handshake), header included, read through the MPI tool interface: OpenMPI's
// btl_tcp_eager_limit (64 KiB by default). nullopt where the library has no such variable. After
// MPI_Init; the tool interface is opened at the program's thread level (MPI_Query_thread).
std::optional<int64_t> TcpEagerLimit();

// Rank 0's `text` on every rank of `comm` (collective); an error naming MPI_Bcast, carrying its
// code (MpiCallFailed).
absl::Status BroadcastTextFromRankZero(MPI_Comm comm, std::string& text);

class MpiBackend final : public CommBackend {
 public:
  // `own` carries only stragglar's traffic; it is the caller's to free.
  MpiBackend(MPI_Comm own, int rank, int size) : own_(own), rank_(rank), size_(size) {}

  // Its failures carry MPI's code (MpiCallFailed), for the preload to return unchanged.
  MPI_Comm own() const { return own_; }

  double Now() override { return MonotonicSeconds(); }
  absl::Status StartGather(absl::Span<const double> mine) override;
  absl::StatusOr<std::vector<double>> FinishGather() override;
  absl::Status BroadcastFromRankZero(std::string& text) override;
  absl::StatusOr<double> RingRoundSeconds(int64_t bytes, int repeats, RingPeers peers) override;
  absl::Status MaxOverRanks(absl::Span<double> values) override;

 private:
  MPI_Comm own_;
  int rank_;
  int size_;
  std::vector<double> gathered_;
  std::vector<std::byte> probe_out_, probe_in_;
};

// One MPI_Allreduce's work. `args` holds the resolved buffers (MPI_IN_PLACE is the receive
// buffer) and our element type and op.
class MpiAllReduceWork final : public CallWork {
 public:
  MpiAllReduceWork(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm user, const AllReduceArgs& args, const MpiExecutorOptions& options,
                   MPI_Comm own, CallProgress* progress = nullptr, MpiAlarm* alarm = nullptr)
      : sendbuf_(sendbuf),
        recvbuf_(recvbuf),
        count_(count),
        datatype_(datatype),
        op_(op),
        user_(user),
        args_(args),
        options_(options),
        own_(own),
        progress_(progress),
        alarm_(alarm) {}

  CallOutcome Run(const CallDecision& decision, const RankProgram* program) override;

  // Whether it ran the library's own Allreduce (which reports its errors itself). Its failures
  // carry MPI's code (MpiCallFailed).
  bool ran_native() const { return ran_native_; }

 private:
  const void* sendbuf_;
  void* recvbuf_;
  int count_;
  MPI_Datatype datatype_;
  MPI_Op op_;
  MPI_Comm user_;
  const AllReduceArgs& args_;
  const MpiExecutorOptions& options_;
  MPI_Comm own_;
  CallProgress* progress_;  // may be null: what the call's watchdog reads
  MpiAlarm* alarm_;         // may be null: kernels/exec/mpi/mpi_alarm.h
  bool ran_native_ = false;
};

}  // namespace stragglar
