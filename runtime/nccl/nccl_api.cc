#include "runtime/nccl/nccl_api.h"

#include "kernels/exec/nccl/nccl_types.h"

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

std::string NcclVersionNumber(const NcclApi& api) {
  int code = 0;
  if (api.get_version == nullptr || api.get_version(&code) != ncclSuccess || code <= 0) {
    return "unknown";
  }
  // Before 2.9 the code was major * 1000 + minor * 100 + patch; every NCCL we run on is newer.
  return absl::StrCat(code / 10000, ".", code / 100 % 100, ".", code % 100);
}

std::string NcclVersionText(const NcclApi& api) {
  const std::string number = NcclVersionNumber(api);
  return number == "unknown" ? "NCCL (version unknown)" : absl::StrCat("NCCL ", number);
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
