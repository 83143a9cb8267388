#include "kernels/rank_steps.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

absl::Status ValidateTransfer(const Plan& plan, int round, const Transfer& transfer) {
  if (transfer.src < 0 || transfer.src >= plan.num_ranks || transfer.dst < 0 ||
      transfer.dst >= plan.num_ranks || transfer.src == transfer.dst) {
    return absl::InvalidArgumentError(absl::StrCat("round ", round, ": bad transfer ", transfer.src,
                                                   " -> ", transfer.dst, " for ", plan.num_ranks,
                                                   " ranks"));
  }
  for (int32_t chunk : transfer.chunks) {
    if (chunk < 0 || chunk >= plan.num_chunks) {
      return absl::InvalidArgumentError(
          absl::StrCat("round ", round, ": chunk ", chunk, " outside [0, ", plan.num_chunks, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<RankStep>> RankSteps(const Plan& plan, int rank) {
  std::vector<RankStep> steps;
  for (int round = 0; round < plan.num_rounds(); ++round) {
    RankStep step{.round = round};
    for (const Transfer& transfer : plan.rounds[round].transfers) {
      if (transfer.src != rank && transfer.dst != rank) continue;
      if (absl::Status status = ValidateTransfer(plan, round, transfer); !status.ok()) {
        return status;
      }
      const Transfer*& slot = transfer.src == rank ? step.send : step.receive;
      if (slot != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("round ", round, ": rank ", rank,
                         transfer.src == rank ? " sends" : " receives", " more than one transfer"));
      }
      slot = &transfer;
    }
    if (step.send != nullptr || step.receive != nullptr) steps.push_back(step);
  }
  return steps;
}

std::vector<int64_t> ChunkByteOffsets(int64_t count, int64_t element_size, int num_chunks) {
  std::vector<int64_t> offsets(num_chunks + 1);
  for (int chunk = 0; chunk < num_chunks; ++chunk) {
    offsets[chunk] = ChunkElements(count, num_chunks, chunk).begin * element_size;
  }
  offsets[num_chunks] = count * element_size;
  return offsets;
}

void FinishAllReduce(const Plan& plan, const std::vector<bool>& written,
                     const std::vector<int64_t>& offsets, const std::byte* input, std::byte* result,
                     int64_t count, DataType type, ReduceOp op) {
  for (int32_t chunk = 0; chunk < plan.num_chunks; ++chunk) {
    const int64_t bytes = offsets[chunk + 1] - offsets[chunk];
    if (!written[chunk] && bytes > 0) {
      std::memcpy(result + offsets[chunk], input + offsets[chunk], bytes);
    }
  }
  if (op == ReduceOp::kAvg && count > 0) FinalizeReduction(type, op, result, count, plan.num_ranks);
}

}  // namespace stragglar
