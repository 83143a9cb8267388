#include "runtime/nccl/nccl_codes.h"

#include <optional>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "kernels/exec/library_code.h"

namespace stragglar {

ncclResult_t NcclCodeOf(const absl::Status& status) {
  if (status.ok()) return ncclSuccess;
  if (std::optional<int> code = LibraryCode(status)) return static_cast<ncclResult_t>(*code);
  if (status.code() == absl::StatusCode::kAborted) return ncclRemoteError;
  return ncclInternalError;
}

absl::Status WithDeviceExecutorCode(const absl::Status& status) {
  absl::Status said(status.code(), absl::StrCat("device executor: ", status.message()));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { said.SetPayload(url, payload); });
  if (LibraryCode(said).has_value()) return said;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return WithLibraryCode(std::move(said), ncclInvalidArgument);
    case absl::StatusCode::kUnavailable:
      return WithLibraryCode(std::move(said), ncclRemoteError);
    default:
      return WithLibraryCode(std::move(said), ncclUnhandledCudaError);
  }
}

absl::Status NcclCallFailed(absl::string_view call, ncclResult_t code) {
  return WithLibraryCode(absl::InternalError(absl::StrCat(call, " failed: ", code)), code);
}

}  // namespace stragglar
