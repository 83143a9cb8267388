// The real NCCL, as the preload library reaches it: through its profiling names (pnccl*, found
// with dlsym(RTLD_NEXT)), so that stragglar's own traffic never re-enters its own definitions of
// the nccl* functions. Also: which NCCL types and ops our kernels reduce.
#pragma once

#include <dlfcn.h>
#include <nccl.h>

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "kernels/exec/nccl/nccl_executor.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {

// An NCCL that is loaded but not in the global scope: Python imports extension modules with
// RTLD_LOCAL, so PyTorch's libnccl.so.2 (a dependency of libtorch_cuda.so) is invisible to
// RTLD_NEXT, while PyTorch's calls still bind to our definitions, which come first.
void* PrivatelyLoadedNccl();

// The real NCCL function: its pnccl* name (NCCL exports both), or the nccl* one after ours;
// failing that, the one in an NCCL loaded outside the global scope. Null, said in one line, when
// NCCL is not in the process.
template <typename Function>
Function* Real(const char* profiling_name, const char* name) {
  void* symbol = dlsym(RTLD_NEXT, profiling_name);
  if (symbol == nullptr) symbol = dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    // Looked up from the library itself, so the nccl* name is NCCL's and never ours.
    if (void* nccl = PrivatelyLoadedNccl(); nccl != nullptr) {
      symbol = dlsym(nccl, profiling_name);
      if (symbol == nullptr) symbol = dlsym(nccl, name);
    }
  }
  if (symbol == nullptr) {
    LogAlways(LogLevel::kWarn, absl::StrCat("libstragglar.so: ", name,
                                            " not found in the process; is NCCL loaded?"));
  }
  return reinterpret_cast<Function*>(symbol);
}

#define STRAGGLAR_REAL(name) ::stragglar::Real<decltype(p##name)>("p" #name, #name)

// The NCCL functions stragglar's own work needs, resolved once.
struct NcclApi {
  decltype(&pncclAllReduce) all_reduce = STRAGGLAR_REAL(ncclAllReduce);
  decltype(&pncclAllGather) all_gather = STRAGGLAR_REAL(ncclAllGather);
  decltype(&pncclBroadcast) broadcast = STRAGGLAR_REAL(ncclBroadcast);
  decltype(&pncclCommCount) comm_count = STRAGGLAR_REAL(ncclCommCount);
  decltype(&pncclCommUserRank) comm_user_rank = STRAGGLAR_REAL(ncclCommUserRank);
  decltype(&pncclCommCuDevice) comm_cu_device = STRAGGLAR_REAL(ncclCommCuDevice);
  // For STRAGGLAR_PRE_ARRIVAL=nccl: the ready ranks' communicators and their collectives.
  decltype(&pncclCommSplit) comm_split = STRAGGLAR_REAL(ncclCommSplit);
  decltype(&pncclCommDestroy) comm_destroy = STRAGGLAR_REAL(ncclCommDestroy);
  decltype(&pncclCommAbort) comm_abort = STRAGGLAR_REAL(ncclCommAbort);
  decltype(&pncclGetVersion) get_version = STRAGGLAR_REAL(ncclGetVersion);
  NcclCollectives collectives{.reduce_scatter = STRAGGLAR_REAL(ncclReduceScatter),
                              .reduce = STRAGGLAR_REAL(ncclReduce)};
  NcclPointToPoint point_to_point{.send = STRAGGLAR_REAL(ncclSend),
                                  .recv = STRAGGLAR_REAL(ncclRecv),
                                  .group_start = STRAGGLAR_REAL(ncclGroupStart),
                                  .group_end = STRAGGLAR_REAL(ncclGroupEnd)};

  bool complete() const {
    return all_reduce && all_gather && broadcast && comm_count && comm_user_rank &&
           comm_cu_device && point_to_point.send && point_to_point.recv &&
           point_to_point.group_start && point_to_point.group_end;
  }
};

// Resolved at first use; never destroyed: calls may come during exit.
const NcclApi& Api();

// The NCCL in the process as people write it, e.g. "NCCL 2.28.9" (NCCL's version code is
// major * 10000 + minor * 100 + patch since 2.9); "NCCL (version unknown)" when it cannot say.
std::string NcclVersionText(const NcclApi& api);
// Just the number, e.g. "2.28.9", or "unknown": the backend_version of stragglar_build_info.
std::string NcclVersionNumber(const NcclApi& api);

// Our element type for an NCCL type; nullopt for fp8 and anything newer.
std::optional<DataType> MapType(ncclDataType_t type);
// Our op for an NCCL op; nullopt for PreMulSum handles (>= ncclNumOps).
std::optional<ReduceOp> MapOp(ncclRedOp_t op);

}  // namespace stragglar
