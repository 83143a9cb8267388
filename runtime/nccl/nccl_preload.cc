// libstragglar.so: the NCCL interposition layer. Preloaded (LD_PRELOAD) into an unmodified NCCL
// job, it defines the NCCL entry points stragglar needs and reaches the real ones through NCCL's
// own profiling names (pnccl*, found with dlsym(RTLD_NEXT)); every function it does not define
// goes to NCCL directly. Errors from NCCL are returned to the caller unchanged.
//
// What is here: symbol interposition for AllReduce and the communicator lifecycle, the
// STRAGGLAR_* configuration and logging, and the group-depth tracking that will keep grouped
// calls on NCCL's path. What is not yet (issue 5): the GPU executor, the CUDA reduction kernels
// and the CUPTI arrival profiler. Until they land every call passes through to NCCL, in every
// mode, and the library says so once at INFO.
#include <dlfcn.h>
#include <nccl.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/env_config.h"
#include "runtime/log.h"

namespace stragglar {
namespace {

// The real NCCL function: its pnccl* name (NCCL exports both), or the nccl* one after ours.
template <typename Function>
Function* Real(const char* profiling_name, const char* name) {
  void* symbol = dlsym(RTLD_NEXT, profiling_name);
  if (symbol == nullptr) symbol = dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    LogAlways(LogLevel::kWarn, absl::StrCat("libstragglar.so: ", name,
                                            " not found in the process; is NCCL loaded?"));
  }
  return reinterpret_cast<Function*>(symbol);
}

const PreloadConfig& Config() {
  static std::once_flag once;
  static PreloadConfig* config = nullptr;
  std::call_once(once, [] {
    // Never destroyed: NCCL calls may come from other threads while the process exits.
    config = new PreloadConfig(PreloadConfigFromEnv());
    SetLogLevel(config->debug);
    Log(LogLevel::kInfo, absl::StrCat("libstragglar.so loaded: ", DescribeConfig(*config)));
  });
  return *config;
}

// ncclGroupStart/End nesting on this thread: calls inside a user's group are NCCL's business.
thread_local int group_depth = 0;

}  // namespace
}  // namespace stragglar

using stragglar::Config;
using stragglar::Real;

extern "C" {

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  static auto* real = Real<decltype(pncclCommInitRank)>("pncclCommInitRank", "ncclCommInitRank");
  Config();
  return real == nullptr ? ncclInternalError : real(comm, nranks, id, rank);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  static auto* real =
      Real<decltype(pncclCommInitRankConfig)>("pncclCommInitRankConfig", "ncclCommInitRankConfig");
  Config();
  return real == nullptr ? ncclInternalError : real(comm, nranks, id, rank, config);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  static auto* real = Real<decltype(pncclCommInitAll)>("pncclCommInitAll", "ncclCommInitAll");
  Config();
  return real == nullptr ? ncclInternalError : real(comms, ndev, devlist);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  static auto* real = Real<decltype(pncclCommSplit)>("pncclCommSplit", "ncclCommSplit");
  Config();
  return real == nullptr ? ncclInternalError : real(comm, color, key, newcomm, config);
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude_ranks, int exclude_count,
                            ncclComm_t* newcomm, ncclConfig_t* config, int flags) {
  static auto* real = Real<decltype(pncclCommShrink)>("pncclCommShrink", "ncclCommShrink");
  Config();
  return real == nullptr ? ncclInternalError
                         : real(comm, exclude_ranks, exclude_count, newcomm, config, flags);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  static auto* real = Real<decltype(pncclCommFinalize)>("pncclCommFinalize", "ncclCommFinalize");
  return real == nullptr ? ncclInternalError : real(comm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  static auto* real = Real<decltype(pncclCommDestroy)>("pncclCommDestroy", "ncclCommDestroy");
  return real == nullptr ? ncclInternalError : real(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  static auto* real = Real<decltype(pncclCommAbort)>("pncclCommAbort", "ncclCommAbort");
  return real == nullptr ? ncclInternalError : real(comm);
}

ncclResult_t ncclGroupStart() {
  static auto* real = Real<decltype(pncclGroupStart)>("pncclGroupStart", "ncclGroupStart");
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real();
  if (result == ncclSuccess) ++stragglar::group_depth;
  return result;
}

ncclResult_t ncclGroupEnd() {
  static auto* real = Real<decltype(pncclGroupEnd)>("pncclGroupEnd", "ncclGroupEnd");
  if (real == nullptr) return ncclInternalError;
  if (stragglar::group_depth > 0) --stragglar::group_depth;
  return real();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  static auto* real = Real<decltype(pncclAllReduce)>("pncclAllReduce", "ncclAllReduce");
  if (real == nullptr) return ncclInternalError;
  // Said once, and without a lock on later calls: this is the hot path.
  static std::once_flag said;
  if (Config().mode != stragglar::RuntimeMode::kOff) {
    std::call_once(said, [] {
      stragglar::Log(stragglar::LogLevel::kInfo,
                     "the GPU executor and the arrival profiler are not built yet: "
                     "ncclAllReduce passes through to NCCL");
    });
  }
  return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

}  // extern "C"
