#include "runtime/nccl/nccl_api.h"

#include "kernels/nccl_types.h"

namespace stragglar {

void* PrivatelyLoadedNccl() {
  for (const char* soname : {"libnccl.so.2", "libnccl.so"}) {
    if (void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD); handle != nullptr) return handle;
  }
  return nullptr;
}

const NcclApi& Api() {
  static const NcclApi* api = new NcclApi;
  return *api;
}

std::optional<DataType> MapType(ncclDataType_t type) {
  for (DataType ours : kAllDataTypes) {
    if (NcclDataType(ours) == type) return ours;
  }
  return std::nullopt;
}

std::optional<ReduceOp> MapOp(ncclRedOp_t op) {
  for (ReduceOp ours : kAllReduceOps) {
    if (NcclRedOp(ours) == op) return ours;
  }
  return std::nullopt;
}

}  // namespace stragglar
