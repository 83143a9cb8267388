// The NCCL library's edge of the one error convention (runtime/nccl/nccl_codes.h): the code each
// kind of failure reaches NCCL's caller with, as before the convention.
#include "runtime/nccl/nccl_codes.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/exec/library_code.h"

namespace stragglar {
namespace {

TEST(NcclCodesTest, EachFailureReachesTheCallerWithItsCode) {
  EXPECT_EQ(NcclCodeOf(absl::OkStatus()), ncclSuccess);
  // NCCL's or CUDA's own code, carried from where it arose, unchanged.
  EXPECT_EQ(NcclCodeOf(WithLibraryCode(absl::InternalError("ncclSend failed"), ncclSystemError)),
            ncclSystemError);
  EXPECT_EQ(NcclCodeOf(WithLibraryCode(absl::InvalidArgumentError("x"), ncclInvalidUsage)),
            ncclInvalidUsage);
  // A failed NCCL call of the preload's own (its exchange, its ready ranks' split): named, with
  // NCCL's code.
  const absl::Status split = NcclCallFailed("ncclCommSplit (ready ranks)", ncclSystemError);
  EXPECT_EQ(split.message(), "ncclCommSplit (ready ranks) failed: 2");
  EXPECT_EQ(NcclCodeOf(split), ncclSystemError);
  // A communicator the watchdog revoked.
  EXPECT_EQ(NcclCodeOf(absl::AbortedError("revoked")), ncclRemoteError);
  // The protocol's own failures, whatever their status code: an internal error, as before.
  for (const absl::Status& own : {absl::InvalidArgumentError("ranks disagree on the call count"),
                                  absl::InternalError("gather failed"), absl::UnavailableError("x"),
                                  absl::FailedPreconditionError("x")}) {
    EXPECT_EQ(NcclCodeOf(own), ncclInternalError) << own;
  }
}

TEST(NcclCodesTest, TheDeviceExecutorsFailuresKeepTheirOldCodes) {
  const absl::Status bad = WithDeviceExecutorCode(absl::InvalidArgumentError("count -1"));
  EXPECT_EQ(NcclCodeOf(bad), ncclInvalidArgument);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "device executor: count -1");
  EXPECT_EQ(NcclCodeOf(WithDeviceExecutorCode(absl::UnavailableError("timed out waiting"))),
            ncclRemoteError);
  EXPECT_EQ(NcclCodeOf(WithDeviceExecutorCode(absl::InternalError("cudaLaunchKernel"))),
            ncclUnhandledCudaError);
  // A code it already carries, and any other payload, are kept.
  absl::Status carried = WithLibraryCode(absl::InternalError("ncclSend"), ncclSystemError);
  carried.SetPayload("test/other", absl::Cord("kept"));
  const absl::Status tagged = WithDeviceExecutorCode(carried);
  EXPECT_EQ(NcclCodeOf(tagged), ncclSystemError);
  EXPECT_EQ(tagged.GetPayload("test/other").value_or(absl::Cord()), absl::Cord("kept"));
}

}  // namespace
}  // namespace stragglar
