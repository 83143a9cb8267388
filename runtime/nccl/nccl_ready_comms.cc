#include "runtime/nccl/nccl_ready_comms.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "runtime/nccl/nccl_api.h"
#include "runtime/nccl/nccl_codes.h"

namespace stragglar {

absl::StatusOr<ncclComm_t> NcclReadyComms::Get(int straggler, int block) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = comms_.find(straggler); it != comms_.end()) return it->second;
  }
  const NcclApi& api = Api();
  if (api.comm_split == nullptr || api.collectives.reduce_scatter == nullptr ||
      api.collectives.reduce == nullptr) {
    return absl::InternalError("ncclCommSplit, ncclReduceScatter or ncclReduce not found");
  }
  // The key orders the ready ranks by the block each owns, which NCCL's layout then matches.
  ncclComm_t ready_comm = nullptr;
  if (ncclResult_t code = api.comm_split(comm_, block >= 0 ? 0 : NCCL_SPLIT_NOCOLOR,
                                         std::max(block, 0), &ready_comm, nullptr);
      code != ncclSuccess) {
    return NcclCallFailed(
        absl::StrCat("ncclCommSplit (ready ranks without straggler ", straggler, ")"), code);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comms_.emplace(straggler, ready_comm);
  }
  if (rank_ == 0) {
    Log(LogLevel::kInfo, absl::StrCat("StragglAR's pre-arrival phase as NCCL collectives on the ",
                                      size_ - 1, " ranks other than ", straggler));
  }
  return ready_comm;
}

std::vector<ncclComm_t> NcclReadyComms::Live() const {
  std::vector<ncclComm_t> live;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [straggler, ready_comm] : comms_) {
    if (ready_comm != nullptr) live.push_back(ready_comm);
  }
  return live;
}

void NcclReadyComms::Release(bool abort) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [straggler, ready_comm] : comms_) {
    if (ready_comm == nullptr) continue;
    if (abort && Api().comm_abort != nullptr) {
      Api().comm_abort(ready_comm);
    } else if (Api().comm_destroy != nullptr) {
      Api().comm_destroy(ready_comm);
    }
  }
  comms_.clear();
}

}  // namespace stragglar
