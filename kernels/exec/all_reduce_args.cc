#include "kernels/exec/all_reduce_args.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace stragglar {

absl::Status CheckAllReduceArgs(const RankProgram& program, const AllReduceArgs& args) {
  const int rank = program.rank;
  if (static_cast<size_t>(args.type) >= kAllDataTypes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": unknown data type ", static_cast<int>(args.type)));
  }
  if (static_cast<size_t>(args.op) >= kEveryReduceOp.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": unknown reduce op ", static_cast<int>(args.op)));
  }
  if (args.count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": count must be >= 0, got ", args.count));
  }
  if (args.count > std::numeric_limits<int64_t>::max() / DataTypeSize(args.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": count ", args.count, " overflows the byte size"));
  }
  if (args.count > 0 && (args.send == nullptr || args.recv == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": ",
                                                   args.send == nullptr ? "send" : "recv",
                                                   " buffer is null with count ", args.count));
  }
  if (args.count > 0 && program.placement.in_place != (args.send == args.recv)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": the program was lowered for ",
                     program.placement.in_place ? "in-place" : "out-of-place", " buffers"));
  }
  return absl::OkStatus();
}

}  // namespace stragglar
