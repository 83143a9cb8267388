#include "kernels/exec/mpi/mpi_network.h"

#include "absl/strings/str_cat.h"
#include "kernels/exec/mpi/mpi_executor.h"

namespace stragglar {

absl::StatusOr<ReadyTags> ReadyTags::For(MPI_Comm comm, const RankProgram& program) {
  int* tag_ub = nullptr;
  int found = 0;
  if (int code = PMPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &found); code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Comm_get_attr", code);
  }
  const int base = found ? *tag_ub / 2 + 1 : 16384;
  const int32_t last_round = program.steps.empty() ? 0 : program.steps.back().round;
  if (last_round >= base - 1) {
    return absl::InvalidArgumentError(absl::StrCat("a plan of ", last_round + 1,
                                                   " rounds needs more tags than MPI_TAG_UB (",
                                                   found ? *tag_ub : 32767, ") gives"));
  }
  return ReadyTags(base);
}

}  // namespace stragglar
