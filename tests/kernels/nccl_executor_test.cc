// The GPU executor's logic without a GPU: NCCL's point-to-point calls are replaced by an
// in-process fake with NCCL's group semantics (a round's messages carry the data as of the
// group's start, receives land at its end), and the device operations by the CPU kernels. Every
// plan, rank count, type and operator must give every rank the exact reference result; on a GPU
// the same code runs with NCCL and our CUDA kernels (scripts/gpu-check.sh).
#include "kernels/exec/nccl/nccl_executor.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/exec/library_code.h"
#include "kernels/exec/nccl/nccl_types.h"
#include "kernels/reduce/exact_data.h"
#include "kernels/synth/synthesizers.h"
#include "tests/nccl_plan_executor.h"

namespace stragglar {
namespace {

using exact_data::Bytes;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// A fake NCCL: ranks are threads; a send is copied when posted (NCCL reads the data during the
// group, after everything enqueued before it), a receive is filled at ncclGroupEnd.

// Every ready rank's send buffer at one collective, by its index in the ready communicator.
struct Deposit {
  std::vector<Bytes> inputs;
  int arrived = 0;
  int left = 0;
};

struct FakeWorld {
  std::mutex mutex;
  std::condition_variable arrived;
  std::map<std::pair<int, int>, std::deque<Bytes>> channels;  // (src, dst) -> messages
  ncclResult_t fail_sends_with = ncclSuccess;                 // injected failure
  int sends = 0;
  // The communicator of the ready ranks (NativePreArrival).
  int ready_ranks = 0;
  std::map<int64_t, Deposit> deposits;  // by collective sequence number
  int reduce_scatters = 0;
  int reduces = 0;
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

// NCCL's ReduceScatter and Reduce on the ready ranks' communicator: each ready rank deposits its
// whole send buffer, waits for the others' and computes its own part, in index order. They run
// when called (inside a group too): every ready rank calls the same collectives in the same order.
const ncclComm_t kReadyComm = reinterpret_cast<ncclComm_t>(uintptr_t{0x5eed});
thread_local int my_ready_index = -1;
thread_local int64_t my_collectives = 0;

std::vector<Bytes> Rendezvous(const void* data, size_t bytes) {
  std::unique_lock<std::mutex> lock(world->mutex);
  const int64_t sequence = my_collectives++;
  Deposit& deposit = world->deposits[sequence];
  deposit.inputs.resize(world->ready_ranks);
  const std::byte* begin = static_cast<const std::byte*>(data);
  deposit.inputs[my_ready_index].assign(begin, begin + bytes);
  ++deposit.arrived;
  world->arrived.notify_all();
  if (!world->arrived.wait_for(lock, std::chrono::seconds(20),
                               [&] { return deposit.arrived == world->ready_ranks; })) {
    ADD_FAILURE() << "rank " << my_rank << " waited 20 s in collective " << sequence;
    return {};
  }
  std::vector<Bytes> inputs = deposit.inputs;
  if (++deposit.left == world->ready_ranks) world->deposits.erase(sequence);
  return inputs;
}

DataType OurType(ncclDataType_t type) {
  for (DataType ours : kAllDataTypes) {
    if (NcclDataType(ours) == type) return ours;
  }
  ADD_FAILURE() << "NCCL type " << type;
  return DataType::kUint8;
}

// ncclAvg would divide by the ready ranks, not all of them: the executor must never pass it.
ReduceOp OurOp(ncclRedOp_t op) {
  for (ReduceOp ours : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin}) {
    if (NcclRedOp(ours) == op) return ours;
  }
  ADD_FAILURE() << "NCCL op " << op;
  return ReduceOp::kSum;
}

// `count` elements at element `first` of the inputs, reduced in index order into `out`.
void ReduceInputs(const std::vector<Bytes>& inputs, int64_t first, int64_t count,
                  ncclDataType_t nccl_type, ncclRedOp_t nccl_op, void* out) {
  const DataType type = OurType(nccl_type);
  const int64_t size = DataTypeSize(type);
  Bytes sum(inputs[0].begin() + first * size, inputs[0].begin() + (first + count) * size);
  for (size_t i = 1; i < inputs.size(); ++i) {
    ReduceInto(type, OurOp(nccl_op), sum.data(), inputs[i].data() + first * size, count);
  }
  if (!sum.empty()) std::memcpy(out, sum.data(), sum.size());
}

ncclResult_t FakeReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  if (comm != kReadyComm || my_ready_index < 0) return ncclInvalidUsage;
  {
    std::lock_guard<std::mutex> lock(world->mutex);
    ++world->reduce_scatters;
  }
  const int64_t size = DataTypeSize(OurType(type));
  const std::vector<Bytes> inputs = Rendezvous(send, count * world->ready_ranks * size);
  if (inputs.empty()) return ncclSystemError;
  ReduceInputs(inputs, my_ready_index * static_cast<int64_t>(count), count, type, op, recv);
  return ncclSuccess;
}

ncclResult_t FakeReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t) {
  if (comm != kReadyComm || my_ready_index < 0 || root < 0 || root >= world->ready_ranks) {
    return ncclInvalidUsage;
  }
  {
    std::lock_guard<std::mutex> lock(world->mutex);
    ++world->reduces;
  }
  const std::vector<Bytes> inputs = Rendezvous(send, count * DataTypeSize(OurType(type)));
  if (inputs.empty()) return ncclSystemError;
  if (my_ready_index == root) ReduceInputs(inputs, 0, count, type, op, recv);
  return ncclSuccess;
}

constexpr NcclCollectives kFakeCollectives{.reduce_scatter = FakeReduceScatter,
                                           .reduce = FakeReduce};

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
  std::vector<absl::Status> statuses;
  std::vector<Bytes> received;
  std::vector<Bytes> sent;  // the send buffers after the call (out of place)
};

struct Counts {
  int sends = 0;
  int reduce_scatters = 0;
  int reduces = 0;
};

// With `native_pre_arrival`, the ready ranks get the fake ready communicator at their block's
// index (as the preload's ncclCommSplit gives it).
Outcome RunOnFakeNccl(const Plan& plan, DataType type, ReduceOp op, int64_t count, bool in_place,
                      const std::vector<Bytes>& inputs, const DeviceOps& device = kHostOps,
                      bool native_pre_arrival = false, Counts* counts = nullptr) {
  const int n = plan.num_ranks;
  FakeWorld fake;
  fake.ready_ranks = n - 1;
  world = &fake;
  Outcome outcome{.statuses = std::vector<absl::Status>(n)};
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
        outcome.statuses[rank] = executor.status();
        return;
      }
      HostScratch scratch;
      const AllReduceArgs args{
          .send = in_place ? outcome.received[rank].data() : outcome.sent[rank].data(),
          .recv = outcome.received[rank].data(),
          .count = count,
          .type = type,
          .op = op};
      my_ready_index = executor->PreArrivalBlock();
      my_collectives = 0;
      const NativePreArrival native{.nccl = kFakeCollectives,
                                    .ready_comm = my_ready_index >= 0 ? kReadyComm : nullptr};
      outcome.statuses[rank] = executor->Run(args, kFakeNccl, device, nullptr, nullptr, scratch,
                                             native_pre_arrival ? &native : nullptr);
      EXPECT_EQ(group_depth, 0) << "rank " << rank << " left a group open";
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (counts != nullptr) {
    *counts = {
        .sends = fake.sends, .reduce_scatters = fake.reduce_scatters, .reduces = fake.reduces};
  }
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

// Every rank succeeded with `expected`, and (out of place) left its send buffer alone.
::testing::AssertionResult ExactOnEveryRank(const Outcome& outcome, const Bytes& expected,
                                            const std::vector<Bytes>& inputs, DataType type,
                                            bool in_place) {
  for (size_t rank = 0; rank < inputs.size(); ++rank) {
    if (!outcome.statuses[rank].ok()) {
      return ::testing::AssertionFailure() << "rank " << rank << ": " << outcome.statuses[rank];
    }
    const Bytes& received = outcome.received[rank];
    const exact_data::Mismatches mismatches = exact_data::Compare(
        type, received.data(), expected.data(), expected.size() / DataTypeSize(type));
    if (received.size() != expected.size() || mismatches.count > 0) {
      const int64_t first = std::max<int64_t>(mismatches.first, 0);
      return ::testing::AssertionFailure()
             << "rank " << rank << ": element " << first << " is "
             << exact_data::ElementString(type, received.data(), first) << ", expected "
             << exact_data::ElementString(type, expected.data(), first);
    }
    if (!in_place && outcome.sent[rank] != inputs[rank]) {
      return ::testing::AssertionFailure() << "rank " << rank << ": the send buffer changed";
    }
  }
  return ::testing::AssertionSuccess();
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
        const exact_data::Spec spec{
            .type = type, .op = op, .ranks = n, .seed = static_cast<uint64_t>(count * 31 + n)};
        std::vector<Bytes> inputs;
        for (int rank = 0; rank < n; ++rank)
          inputs.push_back(exact_data::MakeInput(spec, rank, count));
        const Bytes expected = exact_data::Reference(spec, count);
        const Outcome outcome = RunOnFakeNccl(plan, type, op, count, in_place, inputs);
        ASSERT_TRUE(ExactOnEveryRank(outcome, expected, inputs, type, in_place))
            << DataTypeName(type) << " " << ReduceOpName(op) << " count " << count
            << (in_place ? " in place" : " out of place");
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

// StragglAR's plans for scale (docs/scale-model.md), as the policy hands them to this executor:
// log-depth StragglAR in 1, 2 and 4 blocks, and hierarchical StragglAR with flat and log-depth
// rails, around the first, a middle and the last rank; with the plan's pre-arrival rounds and
// with NCCL's collectives where the pre-arrival phase is a ReduceScatter.
TEST(NcclExecutorFamiliesTest, LogDepthAndHierarchicalPlansGetTheExactResult) {
  std::vector<std::pair<std::string, Plan>> plans;
  for (int n : {3, 4, 5, 8}) {
    for (int straggler : {0, n / 2, n - 1}) {
      for (int blocks : {1, 2, 4}) {
        absl::StatusOr<Plan> plan = SynthesizeLogDepthStragglar(n, straggler, blocks);
        ASSERT_TRUE(plan.ok()) << plan.status();
        plans.emplace_back(
            absl::StrCat("log-depth n", n, " straggler ", straggler, " blocks ", blocks),
            *std::move(plan));
      }
    }
  }
  for (const auto& [nodes, per_node] : {std::pair{2, 2}, std::pair{2, 4}, std::pair{3, 2}}) {
    const int n = nodes * per_node;
    for (int straggler : {0, n / 2 - 1, n - 1}) {
      for (int rail_blocks : {0, 2}) {
        absl::StatusOr<Plan> plan =
            SynthesizeHierarchicalStragglar(nodes, per_node, straggler, rail_blocks);
        ASSERT_TRUE(plan.ok()) << plan.status();
        ASSERT_EQ(plan->variant, PlanVariant::kHierarchical);
        plans.emplace_back(absl::StrCat("hierarchical ", nodes, "x", per_node, " straggler ",
                                        straggler, " rail blocks ", rail_blocks),
                           *std::move(plan));
      }
    }
  }
  const std::vector<std::pair<DataType, ReduceOp>> cases = {{DataType::kFloat32, ReduceOp::kSum},
                                                            {DataType::kInt32, ReduceOp::kAvg},
                                                            {DataType::kBfloat16, ReduceOp::kMax},
                                                            {DataType::kFloat16, ReduceOp::kProd}};
  for (const auto& [name, plan] : plans) {
    const int n = plan.num_ranks;
    for (const auto& [type, op] : cases) {
      for (int64_t count : {int64_t{1}, int64_t{n - 1}, int64_t{293}, int64_t{4099}}) {
        const exact_data::Spec spec{
            .type = type, .op = op, .ranks = n, .seed = static_cast<uint64_t>(count * 13 + n)};
        std::vector<Bytes> inputs;
        for (int rank = 0; rank < n; ++rank)
          inputs.push_back(exact_data::MakeInput(spec, rank, count));
        const Bytes expected = exact_data::Reference(spec, count);
        for (bool in_place : {false, true}) {
          for (bool native_pre_arrival : {false, true}) {
            const Outcome outcome = RunOnFakeNccl(plan, type, op, count, in_place, inputs, kHostOps,
                                                  native_pre_arrival);
            ASSERT_TRUE(ExactOnEveryRank(outcome, expected, inputs, type, in_place))
                << name << ": " << DataTypeName(type) << " " << ReduceOpName(op) << " count "
                << count << (in_place ? " in place" : " out of place")
                << (native_pre_arrival ? ", NCCL's pre-arrival collectives" : "");
          }
        }
      }
    }
  }
}

// StragglAR's pre-arrival phase as NCCL collectives on the ready ranks' communicator: the same
// exact result as the plan's rounds, for every straggler, pipelined plans too; ReduceScatter when
// the blocks are equal, one Reduce per block otherwise, and no pre-arrival messages.
// (ranks, straggler, pieces)
using NativeParam = std::tuple<int, int, int>;

class NativePreArrivalTest : public ::testing::TestWithParam<NativeParam> {};

TEST_P(NativePreArrivalTest, SameExactResultAsTheRounds) {
  const auto [n, straggler, pieces] = GetParam();
  absl::StatusOr<Plan> plan = SynthesizeStragglar(n, straggler, pieces);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int blocks = n - 1;
  const std::vector<std::pair<DataType, ReduceOp>> cases = {
      {DataType::kFloat32, ReduceOp::kSum},  {DataType::kInt32, ReduceOp::kAvg},
      {DataType::kBfloat16, ReduceOp::kMax}, {DataType::kInt8, ReduceOp::kProd},
      {DataType::kFloat16, ReduceOp::kMin},  {DataType::kUint64, ReduceOp::kSum}};
  for (const auto& [type, op] : cases) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{blocks}, int64_t{293},
                          int64_t{blocks * pieces * 37}, int64_t{blocks * 1000 + 1}}) {
      for (bool in_place : {false, true}) {
        const exact_data::Spec spec{
            .type = type, .op = op, .ranks = n, .seed = static_cast<uint64_t>(count * 7 + n)};
        std::vector<Bytes> inputs;
        for (int rank = 0; rank < n; ++rank)
          inputs.push_back(exact_data::MakeInput(spec, rank, count));
        const Bytes expected = exact_data::Reference(spec, count);
        const std::string context =
            absl::StrCat(DataTypeName(type), " ", ReduceOpName(op), " count ", count,
                         in_place ? " in place" : " out of place");
        Counts rounds, native;
        RunOnFakeNccl(*plan, type, op, count, in_place, inputs, kHostOps, false, &rounds);
        const Outcome outcome =
            RunOnFakeNccl(*plan, type, op, count, in_place, inputs, kHostOps, true, &native);
        ASSERT_TRUE(ExactOnEveryRank(outcome, expected, inputs, type, in_place)) << context;
        const bool equal_blocks = count % blocks == 0;
        EXPECT_EQ(native.reduce_scatters, equal_blocks && count > 0 ? blocks : 0) << context;
        // Every ready rank calls one Reduce per non-empty block.
        int non_empty = 0;
        for (int block = 0; block < blocks; ++block) {
          non_empty += ChunkElements(count, blocks, block).size() > 0;
        }
        EXPECT_EQ(native.reduces, equal_blocks ? 0 : blocks * non_empty) << context;
        if (count >= plan->num_chunks) {
          EXPECT_LT(native.sends, rounds.sends) << context;
        }
      }
    }
  }
}

std::vector<NativeParam> NativePlans() {
  std::vector<NativeParam> params;
  for (int n : {3, 4, 5, 8}) {
    for (int straggler : {0, n / 2, n - 1}) {
      if (straggler == n / 2 && n / 2 == n - 1) continue;
      for (int pieces : {1, 3}) params.emplace_back(n, straggler, pieces);
    }
  }
  return params;
}

std::string NativeName(const ::testing::TestParamInfo<NativeParam>& info) {
  const auto& [n, straggler, pieces] = info.param;
  return absl::StrCat("n", n, "_straggler", straggler, "_pieces", pieces);
}

INSTANTIATE_TEST_SUITE_P(StragglersAndPieces, NativePreArrivalTest,
                         ::testing::ValuesIn(NativePlans()), NativeName);

// Each ready rank owns a different block (its index in the ready communicator); the straggler
// none. Two ranks (no pre-arrival phase), Ring and Halving-Doubling have nothing to replace: a
// NativePreArrival passed to them changes nothing.
TEST(NativePreArrivalBlocksTest, OneBlockPerReadyRank) {
  for (int n : {3, 4, 8}) {
    for (int straggler = 0; straggler < n; ++straggler) {
      const Plan plan = *SynthesizeStragglar(n, straggler, 2);
      std::vector<int> blocks;
      for (int rank = 0; rank < n; ++rank) {
        const NcclPlanExecutor executor = *NcclPlanExecutor::Create(plan, rank);
        EXPECT_TRUE(executor.SupportsNativePreArrival());
        if (rank == straggler) {
          EXPECT_EQ(executor.PreArrivalBlock(), -1);
        } else {
          blocks.push_back(executor.PreArrivalBlock());
        }
      }
      std::sort(blocks.begin(), blocks.end());
      std::vector<int> every(n - 1);
      std::iota(every.begin(), every.end(), 0);
      EXPECT_EQ(blocks, every) << n << " ranks, straggler " << straggler;
      // The straggler's block goes to the rank that takes its place (n - 1).
      if (straggler != n - 1) {
        EXPECT_EQ(NcclPlanExecutor::Create(plan, n - 1)->PreArrivalBlock(), straggler);
      }
    }
  }
  const exact_data::Spec spec{
      .type = DataType::kInt32, .op = ReduceOp::kSum, .ranks = 4, .seed = 5};
  std::vector<Bytes> inputs;
  for (int rank = 0; rank < 4; ++rank) inputs.push_back(exact_data::MakeInput(spec, rank, 101));
  const Bytes expected = exact_data::Reference(spec, 101);
  for (const Plan& plan :
       {MakePlan(Algorithm::kRing, 4, 0), MakePlan(Algorithm::kHalvingDoubling, 4, 0)}) {
    EXPECT_FALSE(NcclPlanExecutor::Create(plan, 0)->SupportsNativePreArrival());
    Counts counts;
    const Outcome outcome = RunOnFakeNccl(plan, DataType::kInt32, ReduceOp::kSum, 101, false,
                                          inputs, kHostOps, true, &counts);
    EXPECT_TRUE(ExactOnEveryRank(outcome, expected, inputs, DataType::kInt32, false));
    EXPECT_EQ(counts.reduce_scatters + counts.reduces, 0);
  }
  const Plan two = MakePlan(Algorithm::kStragglar, 2, 1);
  EXPECT_FALSE(NcclPlanExecutor::Create(two, 0)->SupportsNativePreArrival());
}

// NCCL's error from a send comes back unchanged, with the group closed.
TEST(NcclExecutorErrorsTest, NcclErrorsReturnUnchanged) {
  const Plan plan = MakePlan(Algorithm::kRing, 2, 0);
  FakeWorld fake;
  fake.fail_sends_with = ncclRemoteError;
  world = &fake;
  my_rank = 0;
  Bytes data(64 * 4);
  HostScratch scratch;
  const NcclPlanExecutor executor = *NcclPlanExecutor::Create(plan, 0);
  const absl::Status status = executor.Run({.send = data.data(), .recv = data.data(), .count = 64},
                                           kFakeNccl, kHostOps, nullptr, nullptr, scratch);
  EXPECT_EQ(LibraryCode(status), ncclRemoteError) << "NCCL's own code, for the preload to return";
  EXPECT_THAT(status.message(), HasSubstr("ncclSend to rank 1"));
  EXPECT_EQ(group_depth, 0);
  world = nullptr;
}

cudaError_t FailingReduce(DataType, ReduceOp, void*, const void*, const void*, int64_t,
                          cudaStream_t) {
  return cudaErrorLaunchFailure;
}

// A failed kernel launch carries NCCL's "unhandled CUDA error" with CUDA's message; bad arguments
// are InvalidArgument (ncclInvalidArgument at the preload's edge); a plan for other ranks is
// refused at Create.
TEST(NcclExecutorErrorsTest, CudaFailuresAndBadArgumentsAreReported) {
  const Plan plan = MakePlan(Algorithm::kRing, 2, 0);
  std::vector<Bytes> inputs(2, Bytes(64 * 4));
  DeviceOps failing = kHostOps;
  failing.reduce = FailingReduce;
  const Outcome outcome =
      RunOnFakeNccl(plan, DataType::kFloat32, ReduceOp::kSum, 64, false, inputs, failing);
  EXPECT_EQ(LibraryCode(outcome.statuses[0]), ncclUnhandledCudaError);
  EXPECT_THAT(outcome.statuses[0].message(), HasSubstr("reduction kernel launch"));

  const NcclPlanExecutor executor = *NcclPlanExecutor::Create(plan, 1);
  HostScratch scratch;
  const absl::Status status = executor.Run({.send = nullptr, .recv = nullptr, .count = 8},
                                           kFakeNccl, kHostOps, nullptr, nullptr, scratch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LibraryCode(status), std::nullopt) << "our check, not NCCL's: the edge maps it";
  EXPECT_THAT(status.message(), HasSubstr("send buffer is null"));
  EXPECT_THAT(NcclPlanExecutor::Create(plan, 2).status().message(), HasSubstr("rank"));
}

}  // namespace
}  // namespace stragglar
