// The GPU executor's logic without a GPU: NCCL's point-to-point calls are replaced by an
// in-process fake with NCCL's group semantics (a round's messages carry the data as of the
// group's start, receives land at its end), and the device operations by the CPU kernels. Every
// plan, rank count, type and operator must give every rank the exact reference result; on a GPU
// the same code runs with NCCL and our CUDA kernels (scripts/gpu-check.sh).
#include "kernels/nccl_executor.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/synthesizers.h"
#include "tests/exact_data.h"

namespace stragglar {
namespace {

using ::testing::HasSubstr;
using namespace exact_data;  // NOLINT: the test data helpers

// ---------------------------------------------------------------------------------------------
// A fake NCCL: ranks are threads; a send is copied when posted (NCCL reads the data during the
// group, after everything enqueued before it), a receive is filled at ncclGroupEnd.

struct FakeWorld {
  std::mutex mutex;
  std::condition_variable arrived;
  std::map<std::pair<int, int>, std::deque<Bytes>> channels;  // (src, dst) -> messages
  ncclResult_t fail_sends_with = ncclSuccess;                 // injected failure
  int sends = 0;
};

FakeWorld* world = nullptr;
thread_local int my_rank = -1;
thread_local int group_depth = 0;
struct PendingReceive {
  std::byte* data;
  size_t bytes;
  int peer;
};
thread_local std::vector<PendingReceive> pending_receives;
thread_local std::vector<std::pair<const std::byte*, size_t>> posted_sends;
thread_local bool group_failed = false;  // a post failed: the group is abandoned

ncclResult_t FakeSend(const void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t,
                      cudaStream_t) {
  if (group_depth != 1 || type != ncclUint8) return ncclInvalidUsage;
  std::lock_guard<std::mutex> lock(world->mutex);
  ++world->sends;
  if (world->fail_sends_with != ncclSuccess) {
    group_failed = true;
    return world->fail_sends_with;
  }
  const std::byte* bytes = static_cast<const std::byte*>(data);
  world->channels[{my_rank, peer}].emplace_back(bytes, bytes + count);
  posted_sends.emplace_back(bytes, count);
  world->arrived.notify_all();
  return ncclSuccess;
}

ncclResult_t FakeRecv(void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t,
                      cudaStream_t) {
  if (group_depth != 1 || type != ncclUint8) return ncclInvalidUsage;
  pending_receives.push_back({static_cast<std::byte*>(data), count, peer});
  return ncclSuccess;
}

ncclResult_t FakeGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t FakeGroupEnd() {
  if (group_depth-- != 1) return ncclInvalidUsage;
  ncclResult_t result = ncclSuccess;
  if (group_failed) pending_receives.clear();
  group_failed = false;
  for (const PendingReceive& receive : pending_receives) {
    // On a GPU a receive that overlaps a send of the same group races with it.
    for (const auto& [data, bytes] : posted_sends) {
      if (receive.data < data + bytes && data < receive.data + receive.bytes) {
        ADD_FAILURE() << "rank " << my_rank << " receives into memory it sends in the same round";
      }
    }
    std::unique_lock<std::mutex> lock(world->mutex);
    std::deque<Bytes>& channel = world->channels[{receive.peer, my_rank}];
    if (!world->arrived.wait_for(lock, std::chrono::seconds(20),
                                 [&] { return !channel.empty(); })) {
      ADD_FAILURE() << "rank " << my_rank << " waited 20 s for rank " << receive.peer;
      result = ncclSystemError;
      break;
    }
    Bytes message = std::move(channel.front());
    channel.pop_front();
    if (message.size() != receive.bytes) {
      ADD_FAILURE() << "rank " << receive.peer << " sent " << message.size() << " bytes, rank "
                    << my_rank << " expected " << receive.bytes;
      result = ncclInvalidUsage;
      break;
    }
    if (!message.empty()) std::memcpy(receive.data, message.data(), message.size());
  }
  pending_receives.clear();
  posted_sends.clear();
  return result;
}

constexpr NcclPointToPoint kFakeNccl{
    .send = FakeSend, .recv = FakeRecv, .group_start = FakeGroupStart, .group_end = FakeGroupEnd};

// The device operations, on the host: the CPU kernels the GPU ones are bit-identical to.
cudaError_t HostCopy(void* dst, const void* src, size_t bytes, cudaStream_t) {
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t HostReduce(DataType type, ReduceOp op, void* out, const void* first, const void* second,
                       int64_t count, cudaStream_t) {
  Reduce(type, op, out, first, second, count);
  return cudaSuccess;
}
cudaError_t HostFinalize(DataType type, ReduceOp op, void* data, int64_t count, int num_ranks,
                         cudaStream_t) {
  FinalizeReduction(type, op, data, count, num_ranks);
  return cudaSuccess;
}
constexpr DeviceOps kHostOps{.copy = HostCopy, .reduce = HostReduce, .finalize = HostFinalize};

class HostScratch final : public ScratchSpace {
 public:
  std::byte* Get(size_t bytes, cudaError_t* error) override {
    *error = cudaSuccess;
    if (memory_.size() < bytes) memory_.resize(bytes);
    return memory_.data();
  }

 private:
  Bytes memory_;
};

struct Outcome {
  std::vector<ncclResult_t> results;
  std::vector<std::string> errors;
  std::vector<Bytes> received;
  std::vector<Bytes> sent;  // the send buffers after the call (out of place)
};

Outcome RunOnFakeNccl(const Plan& plan, DataType type, ReduceOp op, int64_t count, bool in_place,
                      const std::vector<Bytes>& inputs, const DeviceOps& device = kHostOps) {
  const int n = plan.num_ranks;
  FakeWorld fake;
  world = &fake;
  Outcome outcome{.results = std::vector<ncclResult_t>(n, ncclSuccess),
                  .errors = std::vector<std::string>(n)};
  if (in_place) {
    outcome.received = inputs;
  } else {
    outcome.sent = inputs;
    for (const Bytes& input : inputs) outcome.received.emplace_back(input.size(), std::byte{0xa5});
  }
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      my_rank = rank;
      absl::StatusOr<NcclPlanExecutor> executor = NcclPlanExecutor::Create(plan, rank);
      if (!executor.ok()) {
        outcome.results[rank] = ncclInvalidArgument;
        outcome.errors[rank] = std::string(executor.status().message());
        return;
      }
      HostScratch scratch;
      const GpuAllReduceArgs args{
          .send = in_place ? outcome.received[rank].data() : outcome.sent[rank].data(),
          .recv = outcome.received[rank].data(),
          .count = count,
          .type = type,
          .op = op};
      outcome.results[rank] =
          executor->Run(args, kFakeNccl, device, nullptr, nullptr, scratch, &outcome.errors[rank]);
      EXPECT_EQ(group_depth, 0) << "rank " << rank << " left a group open";
    });
  }
  for (std::thread& thread : threads) thread.join();
  world = nullptr;
  return outcome;
}

Plan MakePlan(Algorithm algorithm, int n, int straggler) {
  absl::StatusOr<Plan> plan = SynthesizePlan(
      algorithm, n,
      algorithm == Algorithm::kStragglar ? std::optional<int>(straggler) : std::nullopt);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : Plan{};
}

// (algorithm, ranks, straggler)
using PlanParam = std::tuple<Algorithm, int, int>;

class NcclExecutorTest : public ::testing::TestWithParam<PlanParam> {};

TEST_P(NcclExecutorTest, EveryRankGetsTheExactResult) {
  const auto [algorithm, n, straggler] = GetParam();
  const Plan plan = MakePlan(algorithm, n, straggler);
  std::vector<std::pair<DataType, ReduceOp>> cases;
  for (DataType type : kAllDataTypes) cases.emplace_back(type, ReduceOp::kSum);
  for (DataType type : {DataType::kFloat32, DataType::kInt32, DataType::kBfloat16}) {
    for (ReduceOp op : {ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
      cases.emplace_back(type, op);
    }
  }
  for (const auto& [type, op] : cases) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{293}, int64_t{4099}}) {
      for (bool in_place : {false, true}) {
        std::vector<Bytes> inputs;
        for (int rank = 0; rank < n; ++rank) {
          inputs.push_back(MakeInput(type, op, rank, count, /*seed=*/count * 31 + n));
        }
        const Bytes expected = Reference(type, op, inputs, count);
        const Outcome outcome = RunOnFakeNccl(plan, type, op, count, in_place, inputs);
        const std::string context =
            absl::StrCat(DataTypeName(type), " ", ReduceOpName(op), " count ", count,
                         in_place ? " in place" : " out of place");
        for (int rank = 0; rank < n; ++rank) {
          ASSERT_EQ(outcome.results[rank], ncclSuccess)
              << context << " rank " << rank << ": " << outcome.errors[rank];
          if (outcome.received[rank] != expected) {
            int64_t first = 0;
            const int size = DataTypeSize(type);
            while (std::memcmp(outcome.received[rank].data() + first * size,
                               expected.data() + first * size, size) == 0) {
              ++first;
            }
            FAIL() << context << " rank " << rank << ": element " << first << " is "
                   << ElementString(type, outcome.received[rank], first) << ", expected "
                   << ElementString(type, expected, first);
          }
          if (!in_place) {
            ASSERT_TRUE(outcome.sent[rank] == inputs[rank])
                << context << " rank " << rank << ": the send buffer changed";
          }
        }
      }
    }
  }
}

std::vector<PlanParam> AllPlans() {
  std::vector<PlanParam> params;
  for (int n : {2, 3, 4, 5, 8}) {
    params.emplace_back(Algorithm::kRing, n, 0);
    params.emplace_back(Algorithm::kHalvingDoubling, n, 0);
    for (int straggler : {0, n / 2, n - 1}) {
      if (straggler == n / 2 && (n / 2 == 0 || n / 2 == n - 1)) continue;
      params.emplace_back(Algorithm::kStragglar, n, straggler);
    }
  }
  return params;
}

std::string PlanName(const ::testing::TestParamInfo<PlanParam>& info) {
  const auto& [algorithm, n, straggler] = info.param;
  std::string name = absl::StrCat(AlgorithmName(algorithm), "_n", n);
  if (algorithm == Algorithm::kStragglar) absl::StrAppend(&name, "_straggler", straggler);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithmsAndRanks, NcclExecutorTest, ::testing::ValuesIn(AllPlans()),
                         PlanName);

// NCCL's error from a send comes back unchanged, with the group closed.
TEST(NcclExecutorErrorsTest, NcclErrorsReturnUnchanged) {
  const Plan plan = MakePlan(Algorithm::kRing, 2, 0);
  FakeWorld fake;
  fake.fail_sends_with = ncclRemoteError;
  world = &fake;
  my_rank = 0;
  Bytes data(64 * 4);
  HostScratch scratch;
  std::string error;
  const NcclPlanExecutor executor = *NcclPlanExecutor::Create(plan, 0);
  EXPECT_EQ(executor.Run({.send = data.data(), .recv = data.data(), .count = 64}, kFakeNccl,
                         kHostOps, nullptr, nullptr, scratch, &error),
            ncclRemoteError);
  EXPECT_THAT(error, HasSubstr("ncclSend to rank 1"));
  EXPECT_EQ(group_depth, 0);
  world = nullptr;
}

cudaError_t FailingReduce(DataType, ReduceOp, void*, const void*, const void*, int64_t,
                          cudaStream_t) {
  return cudaErrorLaunchFailure;
}

// A failed kernel launch is NCCL's "unhandled CUDA error" with CUDA's message; bad arguments are
// ncclInvalidArgument; a plan for other ranks is refused at Create.
TEST(NcclExecutorErrorsTest, CudaFailuresAndBadArgumentsAreReported) {
  const Plan plan = MakePlan(Algorithm::kRing, 2, 0);
  std::vector<Bytes> inputs(2, Bytes(64 * 4));
  DeviceOps failing = kHostOps;
  failing.reduce = FailingReduce;
  const Outcome outcome =
      RunOnFakeNccl(plan, DataType::kFloat32, ReduceOp::kSum, 64, false, inputs, failing);
  EXPECT_EQ(outcome.results[0], ncclUnhandledCudaError);
  EXPECT_THAT(outcome.errors[0], HasSubstr("reduction kernel launch"));

  const NcclPlanExecutor executor = *NcclPlanExecutor::Create(plan, 1);
  HostScratch scratch;
  std::string error;
  EXPECT_EQ(executor.Run({.send = nullptr, .recv = nullptr, .count = 8}, kFakeNccl, kHostOps,
                         nullptr, nullptr, scratch, &error),
            ncclInvalidArgument);
  EXPECT_THAT(error, HasSubstr("null buffer"));
  EXPECT_THAT(NcclPlanExecutor::Create(plan, 2).status().message(), HasSubstr("rank"));
}

}  // namespace
}  // namespace stragglar
