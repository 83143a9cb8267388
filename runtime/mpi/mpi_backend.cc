#include "runtime/mpi/mpi_backend.h"

#include <cctype>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace stragglar {

std::string MpiLibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (PMPI_Get_library_version(text, &length) != MPI_SUCCESS || length <= 0) {
    return "MPI (version unknown)";
  }
  std::string version(text, static_cast<size_t>(length));
  version = version.substr(0, version.find_first_of(",\n"));
  while (!version.empty() && std::isspace(static_cast<unsigned char>(version.back()))) {
    version.pop_back();
  }
  return version;
}

std::optional<int64_t> TcpEagerLimit() {
  // The program's own thread level: OpenMPI's MPI_T_init_thread sets the whole library's level to
  // the one it is given (MPI_THREAD_SINGLE here once dropped a MPI_THREAD_MULTIPLE program's
  // locking, and its threads crashed).
  int level = MPI_THREAD_SINGLE, provided = 0;
  if (PMPI_Query_thread(&level) != MPI_SUCCESS) return std::nullopt;
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return std::nullopt;
  std::optional<int64_t> limit;
  int index = 0;
  char name[256];
  char description[1024];
  int name_length = sizeof(name), description_length = sizeof(description);
  int verbosity = 0, bind = 0, scope = 0, count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype = nullptr;
  MPI_T_cvar_handle handle = nullptr;
  if (MPI_T_cvar_get_index("btl_tcp_eager_limit", &index) == MPI_SUCCESS &&
      MPI_T_cvar_get_info(index, name, &name_length, &verbosity, &type, &enumtype, description,
                          &description_length, &bind, &scope) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    if (count == 1 && (type == MPI_UNSIGNED_LONG || type == MPI_UNSIGNED_LONG_LONG)) {
      unsigned long long value = 0;  // NOLINT: the width MPI_T reads for these types
      if (type == MPI_UNSIGNED_LONG) {
        unsigned long narrow = 0;  // NOLINT
        if (MPI_T_cvar_read(handle, &narrow) == MPI_SUCCESS) value = narrow;
      } else if (MPI_T_cvar_read(handle, &value) != MPI_SUCCESS) {
        value = 0;
      }
      if (value > 0) limit = static_cast<int64_t>(value);
    } else if (count == 1 && (type == MPI_INT || type == MPI_UNSIGNED)) {
      int value = 0;
      if (MPI_T_cvar_read(handle, &value) == MPI_SUCCESS && value > 0) limit = value;
    }
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return limit;
}

absl::Status MpiBackend::StartGather(absl::Span<const double> mine) {
  gathered_.assign(mine.size() * size_, 0.0);
  const int values = static_cast<int>(mine.size());
  if (int code = PMPI_Allgather(mine.data(), values, MPI_DOUBLE, gathered_.data(), values,
                                MPI_DOUBLE, own_);
      code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Allgather (epoch exchange)", code);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> MpiBackend::FinishGather() { return std::move(gathered_); }

absl::Status BroadcastTextFromRankZero(MPI_Comm comm, std::string& text) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  int64_t length = static_cast<int64_t>(text.size());
  if (int code = PMPI_Bcast(&length, 1, MPI_INT64_T, 0, comm); code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Bcast", code);
  }
  if (rank != 0) text.assign(length, '\0');
  if (int code = PMPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0, comm);
      code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Bcast", code);
  }
  return absl::OkStatus();
}

absl::Status MpiBackend::BroadcastFromRankZero(std::string& text) {
  return BroadcastTextFromRankZero(own_, text);
}

absl::StatusOr<double> MpiBackend::RingRoundSeconds(int64_t bytes, int repeats, RingPeers peers) {
  if (probe_out_.size() < static_cast<size_t>(bytes)) {
    probe_out_.resize(bytes);
    probe_in_.resize(bytes);
  }
  if (int code = PMPI_Barrier(own_); code != MPI_SUCCESS) return MpiCallFailed("MPI_Barrier", code);
  const double start = Now();
  for (int i = 0; i < repeats; ++i) {
    if (int code = PMPI_Sendrecv(probe_out_.data(), static_cast<int>(bytes), MPI_BYTE, peers.next,
                                 0, probe_in_.data(), static_cast<int>(bytes), MPI_BYTE,
                                 peers.previous, 0, own_, MPI_STATUS_IGNORE);
        code != MPI_SUCCESS) {
      return MpiCallFailed("MPI_Sendrecv (link probe)", code);
    }
  }
  return (Now() - start) / repeats;
}

absl::Status MpiBackend::MaxOverRanks(absl::Span<double> values) {
  if (int code = PMPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                                MPI_DOUBLE, MPI_MAX, own_);
      code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Allreduce (link probe)", code);
  }
  return absl::OkStatus();
}

CallOutcome MpiAllReduceWork::Run(const CallDecision& decision, const RankProgram* program) {
  if (progress_ != nullptr) {
    progress_->call.store(decision.call, std::memory_order_relaxed);
    const Algorithm runs = program == nullptr ? Algorithm::kNative : decision.algorithm;
    progress_->algorithm.store(static_cast<int>(runs), std::memory_order_relaxed);
  }
  if (program == nullptr) {
    ran_native_ = true;
    const int code = PMPI_Allreduce(sendbuf_, recvbuf_, count_, datatype_, op_, user_);
    if (code == MPI_SUCCESS) return {};
    return {.status = MpiCallFailed("MPI_Allreduce", code)};
  }
  return {.status = mpi::Run(*program, args_, options_, own_, progress_, alarm_)};
}

}  // namespace stragglar
