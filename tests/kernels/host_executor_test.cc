#include "kernels/exec/host/host_executor.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reduce/exact_data.h"
#include "kernels/synth/synthesizers.h"
#include "tests/host_collective.h"
#include "tests/host_plan_run.h"
#include "tests/sanitizer_sweep.h"

namespace stragglar {
namespace {

using exact_data::Bytes;
using exact_data::SplitMix64;
using ::testing::HasSubstr;

std::string CamelName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kRing:
      return "Ring";
    case Algorithm::kHalvingDoubling:
      return "HalvingDoubling";
    case Algorithm::kStragglar:
      return "Stragglar";
    case Algorithm::kNative:  // the library's own collective: no plan, never a parameter here
      return "Native";
  }
  return "Unknown";
}

Plan MakePlan(Algorithm algorithm, int num_ranks, int straggler) {
  absl::StatusOr<Plan> plan = SynthesizePlan(
      algorithm, num_ranks,
      algorithm == Algorithm::kStragglar ? std::optional<int>(straggler) : std::nullopt);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : Plan{};
}

// Sizes that exercise empty chunks (0, 1, n-2 < chunks) and uneven chunk boundaries (a prime).
std::vector<int64_t> SmallCounts(int num_ranks) {
  std::vector<int64_t> counts = {0, 1};
  if (num_ranks - 2 > 1) counts.push_back(num_ranks - 2);
  counts.push_back(293);
  return counts;
}

// ---------------------------------------------------------------------------------------------
// The grid on small sizes: every algorithm and n in [2, 16], with every type and op.

using GridParam = std::tuple<Algorithm, DataType, ReduceOp, int>;

class HostExecutorGridTest : public ::testing::TestWithParam<GridParam> {};

TEST_P(HostExecutorGridTest, MatchesReferenceOnEveryRank) {
  const auto [algorithm, type, op, num_ranks] = GetParam();
  // Spread straggler positions over the grid; HostExecutorStragglerTest covers all of them.
  const int straggler = (static_cast<int>(type) * 5 + static_cast<int>(op) * 3) % num_ranks;
  const Plan plan = MakePlan(algorithm, num_ranks, straggler);
  const uint64_t seed =
      SplitMix64(static_cast<uint64_t>(type) * 1000 + static_cast<int>(op) * 100 + num_ranks);
  for (int64_t count : SmallCounts(num_ranks)) {
    CheckExact(plan, {.type = type, .op = op, .count = count}, seed);
    // In place too, where it can differ from out of place (the rest would only repeat the run).
    if (count == 1 || count > num_ranks) {
      CheckExact(plan, {.type = type, .op = op, .count = count, .in_place = true}, seed);
    }
  }
}

std::string GridName(const ::testing::TestParamInfo<GridParam>& info) {
  const auto [algorithm, type, op, num_ranks] = info.param;
  return absl::StrCat(CamelName(algorithm), "_", DataTypeName(type), "_", ReduceOpName(op), "_n",
                      num_ranks);
}

// Every algorithm and rank count from 2 to 16. Every type and operator at the rank counts whose
// plans differ in kind (two ranks, odd and even, powers of two and the largest); at the others,
// whose plans repeat those shapes, one type and one operator in turn, as under a sanitizer at
// every rank count (every type and operator still runs there).
bool EveryTypeAndOperatorAt(int num_ranks) {
  return !kUnderSanitizer &&
         (num_ranks <= 5 || num_ranks == 7 || num_ranks == 8 || num_ranks == 16);
}

std::vector<GridParam> EveryGridCase() {
  std::vector<GridParam> params;
  for (Algorithm algorithm : kPlanAlgorithms) {
    for (int num_ranks = 2; num_ranks <= 16; ++num_ranks) {
      if (EveryTypeAndOperatorAt(num_ranks)) {
        for (DataType type : kAllDataTypes) {
          for (ReduceOp op : kAllReduceOps) params.emplace_back(algorithm, type, op, num_ranks);
        }
        continue;
      }
      const size_t rotation = static_cast<size_t>(algorithm) * 5 + num_ranks;
      const DataType type = kAllDataTypes[rotation % std::size(kAllDataTypes)];
      const ReduceOp op = kAllReduceOps[(rotation / std::size(kAllDataTypes) + num_ranks) %
                                        std::size(kAllReduceOps)];
      params.emplace_back(algorithm, type, op, num_ranks);
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithmsTypesOpsRanks, HostExecutorGridTest,
                         ::testing::ValuesIn(EveryGridCase()), GridName);

// ---------------------------------------------------------------------------------------------
// StragglAR with every straggler position (under a sanitizer the first, middle and last), for a
// subset of rank counts.

using StragglerParam = std::tuple<int, int>;  // num_ranks, straggler

class HostExecutorStragglerTest : public ::testing::TestWithParam<StragglerParam> {};

TEST_P(HostExecutorStragglerTest, MatchesReferenceOnEveryRank) {
  const auto [num_ranks, straggler] = GetParam();
  const Plan plan = MakePlan(Algorithm::kStragglar, num_ranks, straggler);
  for (DataType type : {DataType::kInt32, DataType::kBfloat16, DataType::kFloat64}) {
    for (ReduceOp op : SweepOf({ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg},
                               static_cast<size_t>(type) + straggler)) {
      for (int64_t count : {int64_t{1}, int64_t{num_ranks - 2}, int64_t{61}}) {
        CheckExact(plan, {.type = type, .op = op, .count = count, .in_place = count == 1},
                   SplitMix64(num_ranks * 100 + straggler));
      }
    }
  }
}

std::vector<StragglerParam> EveryStragglerPosition() {
  std::vector<StragglerParam> params;
  for (int num_ranks : {2, 3, 4, 5, 7, 8, 11, 16}) {
    for (int straggler : PositionsOf(num_ranks)) {
      params.emplace_back(num_ranks, straggler);
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(SubsetOfRanks, HostExecutorStragglerTest,
                         ::testing::ValuesIn(EveryStragglerPosition()),
                         [](const ::testing::TestParamInfo<StragglerParam>& info) {
                           return absl::StrCat("n", std::get<0>(info.param), "_straggler",
                                               std::get<1>(info.param));
                         });

// ---------------------------------------------------------------------------------------------
// Pipelined StragglAR plans: (n-1)*pieces chunks, many of them empty at small counts.

TEST(HostExecutorPipelinedTest, MatchesReferenceOnEveryRank) {
  for (int num_ranks : {2, 3, 4, 5, 8, 13}) {
    for (int pieces : {2, 3, 8}) {
      absl::StatusOr<Plan> plan = SynthesizeStragglar(num_ranks, num_ranks / 2, pieces);
      ASSERT_TRUE(plan.ok()) << plan.status();
      for (DataType type : {DataType::kFloat32, DataType::kBfloat16, DataType::kInt64}) {
        for (ReduceOp op : SweepOf({ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg},
                                   static_cast<size_t>(type) + num_ranks + pieces)) {
          for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}}) {
            CheckExact(*plan, {.type = type, .op = op, .count = count, .in_place = count == 7},
                       SplitMix64(num_ranks * 100 + pieces));
          }
        }
      }
    }
  }
  absl::StatusOr<Plan> plan = SynthesizeStragglar(5, 4, 16);
  ASSERT_TRUE(plan.ok());
  CheckExact(
      *plan,
      {.type = DataType::kFloat32, .op = ReduceOp::kSum, .count = (1 << 18) + 3, .in_place = true},
      7);
}

// ---------------------------------------------------------------------------------------------
// Hierarchical StragglAR: rails of nodes, shards of (nodes - 1) chunks, packed phases. The
// hierarchical ring: rings inside nodes around a ring AllReduce along every rail. Log-depth
// StragglAR: Halving-Doubling among the ready ranks, then a pipelined broadcast whose straggler
// re-sends raw blocks as reduces and final ones as copies.

// Three types, three operations (under a sanitizer one for each type, in turn), an empty buffer,
// one smaller than the chunk count (in place) and one that no chunk count divides evenly.
void CheckEveryTypeAndOp(const Plan& plan, uint64_t seed) {
  for (DataType type : {DataType::kFloat32, DataType::kBfloat16, DataType::kInt32}) {
    for (ReduceOp op : SweepOf({ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg},
                               static_cast<size_t>(type) + seed)) {
      for (int64_t count : {int64_t{0}, int64_t{5}, int64_t{1001}}) {
        CheckExact(plan, {.type = type, .op = op, .count = count, .in_place = count == 5}, seed);
      }
    }
  }
}

TEST(HostExecutorHierarchicalTest, MatchesReferenceOnEveryRank) {
  for (const auto& [nodes, per_node] :
       {std::pair{2, 2}, std::pair{3, 2}, std::pair{2, 4}, std::pair{3, 4}, std::pair{4, 3}}) {
    const int n = nodes * per_node;
    for (int straggler : {0, per_node + 1, n - 1}) {
      // Flat rails, log-depth rails of 2 blocks, and those in 2 pieces (the plan written for
      // per-class queues).
      for (const auto& [rail_blocks, pieces] :
           {std::pair{0, 1}, std::pair{2, 1}, std::pair{2, 2}}) {
        absl::StatusOr<Plan> plan =
            SynthesizeHierarchicalStragglar(nodes, per_node, straggler, rail_blocks, pieces);
        ASSERT_TRUE(plan.ok()) << plan.status();
        CheckEveryTypeAndOp(*plan, SplitMix64(n * 31 + straggler + rail_blocks + 7 * pieces));
      }
      // Timed for per-class queues, flat rails: shards chunk by chunk, the straggler's relayed.
      absl::StatusOr<Plan> timed =
          SynthesizeTimedHierarchicalStragglar(nodes, per_node, straggler, 0, 1,
                                               {.bytes = 1 << 26,
                                                .ranks_per_node = per_node,
                                                .intra_node = {3e-6, 2e-12},
                                                .inter_node = {10e-6, 2e-11}});
      ASSERT_TRUE(timed.ok()) << timed.status();
      CheckEveryTypeAndOp(*timed, SplitMix64(n * 37 + straggler));
    }
  }
}

TEST(HostExecutorHierarchicalRingTest, MatchesReferenceOnEveryRank) {
  for (const auto& [nodes, per_node] :
       {std::pair{2, 2}, std::pair{3, 2}, std::pair{2, 4}, std::pair{3, 4}, std::pair{4, 3}}) {
    absl::StatusOr<Plan> plan = SynthesizeHierarchicalRing(nodes, per_node);
    ASSERT_TRUE(plan.ok()) << plan.status();
    CheckEveryTypeAndOp(*plan, SplitMix64(nodes * 41 + per_node));
  }
}

TEST(HostExecutorLogDepthTest, MatchesReferenceOnEveryRank) {
  for (const auto& [n, blocks] :
       {std::pair{2, 1}, std::pair{3, 4}, std::pair{5, 2}, std::pair{8, 8}, std::pair{11, 16}}) {
    for (int straggler : {0, n - 1}) {
      absl::StatusOr<Plan> plan = SynthesizeLogDepthStragglar(n, straggler, blocks);
      ASSERT_TRUE(plan.ok()) << plan.status();
      CheckEveryTypeAndOp(*plan, SplitMix64(n * 37 + straggler));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 1 MiB + 3 elements (a 1 MiB buffer plus a remainder that no chunk count divides evenly) on a
// representative subset.

class HostExecutorLargeTest : public ::testing::TestWithParam<GridParam> {};

TEST_P(HostExecutorLargeTest, MatchesReferenceOnEveryRank) {
  const auto [algorithm, type, op, num_ranks] = GetParam();
  const Plan plan = MakePlan(algorithm, num_ranks, num_ranks / 2);
  const int64_t count = (int64_t{1} << 20) / DataTypeSize(type) + 3;
  CheckExact(plan, {.type = type, .op = op, .count = count, .in_place = num_ranks % 2 == 1},
             SplitMix64(num_ranks));
}

// Under a sanitizer, one of the two operators and one rank count for each algorithm and type, in
// turn.
std::vector<GridParam> LargeCases() {
  std::vector<GridParam> params;
  for (Algorithm algorithm : kPlanAlgorithms) {
    for (DataType type : {DataType::kFloat32, DataType::kBfloat16, DataType::kInt64}) {
      const size_t rotation = static_cast<size_t>(algorithm) * 3 + static_cast<size_t>(type);
      for (ReduceOp op : SweepOf({ReduceOp::kSum, ReduceOp::kAvg}, rotation)) {
        for (int num_ranks : SweepOf({2, 5, 8, 13}, rotation)) {
          params.emplace_back(algorithm, type, op, num_ranks);
        }
      }
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(OneMebibytePlusThree, HostExecutorLargeTest,
                         ::testing::ValuesIn(LargeCases()), GridName);

// ---------------------------------------------------------------------------------------------
// Random float inputs: rounding depends on the reduction order, so compare against a double
// reference within the worst-case bound for summing n terms, and require identical bits on every
// rank (every algorithm finishes each chunk on one rank and copies it, or reduces a commutative
// pair).

using RandomFloatParam = std::tuple<Algorithm, DataType, ReduceOp, int>;

class HostExecutorRandomFloatTest : public ::testing::TestWithParam<RandomFloatParam> {};

double UnitRoundoff(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return 0x1p-11;
    case DataType::kBfloat16:
      return 0x1p-8;
    case DataType::kFloat32:
      return 0x1p-24;
    default:
      return 0x1p-53;
  }
}

TEST_P(HostExecutorRandomFloatTest, WithinRoundingBoundAndIdenticalAcrossRanks) {
  const auto [algorithm, type, op, num_ranks] = GetParam();
  const Plan plan = MakePlan(algorithm, num_ranks, num_ranks - 1);
  const Collective collective{.type = type, .op = op, .count = 1001};
  std::vector<Bytes> inputs;
  for (int rank = 0; rank < num_ranks; ++rank) {
    inputs.push_back(
        exact_data::MakeRandomFloatInput(type, rank, collective.count, SplitMix64(42)));
  }
  const Outcome outcome = RunAllReduce(plan, collective, inputs);
  for (int rank = 0; rank < num_ranks; ++rank) {
    ASSERT_TRUE(outcome.statuses[rank].ok()) << outcome.statuses[rank];
    EXPECT_TRUE(outcome.results[rank] == outcome.results[0]) << "rank " << rank << " differs";
  }
  // |error| <= (n - 1) u sum|x| for any summation order, plus one rounding of the result (and of
  // the division for avg).
  const double divisor = op == ReduceOp::kAvg ? num_ranks : 1;
  const double u = UnitRoundoff(type);
  int failures = 0;
  for (int64_t i = 0; i < collective.count && failures < 5; ++i) {
    double exact = 0;
    double magnitude = 0;
    for (const Bytes& input : inputs) {
      exact += exact_data::ElementValue(type, input.data(), i);
      magnitude += std::abs(exact_data::ElementValue(type, input.data(), i));
    }
    exact /= divisor;
    const double bound =
        ((num_ranks - 1) * u * magnitude) / divisor + 2 * u * std::abs(exact) + 1e-300;
    const double actual = exact_data::ElementValue(type, outcome.results[0].data(), i);
    if (!(std::abs(actual - exact) <= bound)) {
      ++failures;
      ADD_FAILURE() << "element " << i << ": " << actual << " vs exact " << exact << ", bound "
                    << bound;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    FloatTypes, HostExecutorRandomFloatTest,
    ::testing::Combine(::testing::ValuesIn(kPlanAlgorithms),
                       ::testing::Values(DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                                         DataType::kBfloat16),
                       ::testing::Values(ReduceOp::kSum, ReduceOp::kAvg),
                       ::testing::Values(3, 8, 16)),
    GridName);

// ---------------------------------------------------------------------------------------------
// Rank-local validation: InvalidArgument before anything is written.

class HostExecutorValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plan_ = MakePlan(Algorithm::kRing, 3, 0);
    send_ = Bytes(4 * kCount, std::byte{1});
    recv_ = Bytes(4 * kCount, std::byte{7});
    args_ = {.send = send_.data(), .recv = recv_.data(), .count = kCount};
  }

  // Runs rank `rank` alone: validation must fail before it waits for anyone.
  absl::Status RunAlone(const AllReduceArgs& args, int rank = 0, int transport_ranks = 3) {
    HostTransport transport(transport_ranks);
    return ExecutePlanOnHost(plan_, rank, args, transport);
  }

  void ExpectUnwritten() {
    EXPECT_TRUE(recv_ == Bytes(4 * kCount, std::byte{7})) << "recv was written";
    EXPECT_TRUE(send_ == Bytes(4 * kCount, std::byte{1})) << "send was written";
  }

  static constexpr int64_t kCount = 10;
  Plan plan_;
  Bytes send_;
  Bytes recv_;
  AllReduceArgs args_;
};

TEST_F(HostExecutorValidationTest, RejectsNullBuffers) {
  AllReduceArgs null_send = args_;
  null_send.send = nullptr;
  absl::Status status = RunAlone(null_send);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("send buffer is null"));
  AllReduceArgs null_recv = args_;
  null_recv.recv = nullptr;
  status = RunAlone(null_recv);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("recv buffer is null"));
  ExpectUnwritten();
}

TEST_F(HostExecutorValidationTest, RejectsNegativeCount) {
  AllReduceArgs args = args_;
  args.count = -1;
  const absl::Status status = RunAlone(args);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("count must be >= 0, got -1"));
  ExpectUnwritten();
}

TEST_F(HostExecutorValidationTest, RejectsRankOutOfRange) {
  for (int rank : {-1, 3}) {
    const absl::Status status = RunAlone(args_, rank);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    // LowerPlan's refusal: the runtime never lowers for a rank outside the plan.
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("3 chunks; rank ", rank)));
  }
  ExpectUnwritten();
}

TEST_F(HostExecutorValidationTest, RejectsTransportSizeMismatch) {
  const absl::Status status = RunAlone(args_, 0, 4);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("plan has 3 ranks but the transport connects 4"));
  ExpectUnwritten();
}

TEST_F(HostExecutorValidationTest, RejectsUnknownTypeAndOp) {
  AllReduceArgs args = args_;
  args.type = static_cast<DataType>(99);
  EXPECT_THAT(RunAlone(args).message(), HasSubstr("unknown data type 99"));
  args = args_;
  args.op = static_cast<ReduceOp>(42);
  EXPECT_THAT(RunAlone(args).message(), HasSubstr("unknown reduce op 42"));
  ExpectUnwritten();
}

TEST_F(HostExecutorValidationTest, RejectsPlanThatIsUnsafeForThisRank) {
  plan_.rounds[0].transfers[0].chunks = ChunkRange(7, 8);  // chunk 7 of 3
  const absl::Status status = RunAlone(args_, plan_.rounds[0].transfers[0].src);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("chunk 7 outside [0, 3)"));
  ExpectUnwritten();
}

TEST_F(HostExecutorValidationTest, ValidationFailureAbortsTheTransport) {
  HostTransport transport(3);
  AllReduceArgs args = args_;
  args.count = -1;
  ASSERT_FALSE(ExecutePlanOnHost(plan_, 0, args, transport).ok());
  const absl::StatusOr<Bytes> message = transport.Receive(1, 2, absl::Seconds(10));
  EXPECT_EQ(message.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(message.status().message(), HasSubstr("count must be >= 0"));
}

TEST(HostExecutorTest, NullBuffersWithZeroCountSucceed) {
  for (Algorithm algorithm : kPlanAlgorithms) {
    const Plan plan = MakePlan(algorithm, 5, 2);
    HostTransport transport(5);
    std::vector<absl::Status> statuses(5);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 5; ++rank) {
      threads.emplace_back([&, rank] {
        statuses[rank] = ExecutePlanOnHost(
            plan, rank, {.send = nullptr, .recv = nullptr, .count = 0, .op = ReduceOp::kAvg},
            transport);
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const absl::Status& status : statuses) EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(HostExecutorTest, SingleRankPlanCopiesAndAverages) {
  const Plan plan{.num_ranks = 1, .num_chunks = 1};
  HostTransport transport(1);
  const std::vector<int32_t> send = {6, -9, 12};
  std::vector<int32_t> recv(3);
  ASSERT_TRUE(ExecutePlanOnHost(plan, 0,
                                {.send = send.data(),
                                 .recv = recv.data(),
                                 .count = 3,
                                 .type = DataType::kInt32,
                                 .op = ReduceOp::kAvg},
                                transport)
                  .ok());
  EXPECT_EQ(recv, send);
}

// ---------------------------------------------------------------------------------------------
// Disagreements across ranks: every rank returns an error (none hangs) naming both sides.

void ExpectEveryRankFails(const Plan& plan, const std::vector<AllReduceArgs>& args,
                          const std::vector<std::string>& expected_substrings) {
  HostTransport transport(plan.num_ranks);
  std::vector<absl::Status> statuses(plan.num_ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    threads.emplace_back([&, rank] {
      statuses[rank] =
          ExecutePlanOnHost(plan, rank, args[rank], transport, {.timeout = absl::Seconds(20)});
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    EXPECT_FALSE(statuses[rank].ok()) << AlgorithmName(plan.algorithm) << " rank " << rank;
    EXPECT_NE(statuses[rank].code(), absl::StatusCode::kDeadlineExceeded)
        << "rank " << rank << " timed out instead of being woken: " << statuses[rank];
    for (const std::string& substring : expected_substrings) {
      EXPECT_THAT(statuses[rank].message(), HasSubstr(substring))
          << AlgorithmName(plan.algorithm) << " rank " << rank;
    }
  }
}

TEST(HostExecutorMismatchTest, CountsAcrossRanks) {
  for (Algorithm algorithm : kPlanAlgorithms) {
    const Plan plan = MakePlan(algorithm, 6, 4);
    std::vector<Bytes> buffers(plan.num_ranks, Bytes(4 * 9));
    std::vector<AllReduceArgs> args;
    for (int rank = 0; rank < plan.num_ranks; ++rank) {
      args.push_back(
          {.send = buffers[rank].data(), .recv = buffers[rank].data(), .count = rank == 2 ? 7 : 9});
    }
    ExpectEveryRankFails(plan, args, {"mismatched counts across ranks", "count 7", "count 9"});
  }
}

TEST(HostExecutorMismatchTest, TypesAndOpsAcrossRanks) {
  const Plan plan = MakePlan(Algorithm::kRing, 4, 0);
  std::vector<Bytes> buffers(plan.num_ranks, Bytes(8 * 5));
  std::vector<AllReduceArgs> args;
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    args.push_back({.send = buffers[rank].data(),
                    .recv = buffers[rank].data(),
                    .count = 5,
                    .type = rank == 1 ? DataType::kInt64 : DataType::kFloat64});
  }
  ExpectEveryRankFails(plan, args, {"mismatched data types", "int64", "float64"});
  args[1].type = DataType::kFloat64;
  args[3].op = ReduceOp::kMax;
  ExpectEveryRankFails(plan, args, {"mismatched reduce ops", "max", "sum"});
}

TEST(HostExecutorMismatchTest, MissingPeerTimesOut) {
  const Plan plan = MakePlan(Algorithm::kRing, 2, 0);
  HostTransport transport(2);
  std::vector<float> buffer(4);
  const absl::Status status =
      ExecutePlanOnHost(plan, 0, {.send = buffer.data(), .recv = buffer.data(), .count = 4},
                        transport, {.timeout = absl::Milliseconds(50)});
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("rank 0 waited 50ms for a message from rank 1"));
}

TEST(HostExecutorTest, AbortWakesARankWaitingInTheExecutor) {
  const Plan plan = MakePlan(Algorithm::kRing, 3, 0);
  HostTransport transport(3);
  std::vector<float> buffer(6);
  absl::Status status;
  std::thread rank0([&] {
    status = ExecutePlanOnHost(plan, 0, {.send = buffer.data(), .recv = buffer.data(), .count = 6},
                               transport);
  });
  absl::SleepFor(absl::Milliseconds(20));
  transport.Abort(absl::CancelledError("operator gave up"));
  rank0.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(status.message(), HasSubstr("operator gave up"));
}

// ExecutePlanOnHost returns only when no peer reads its buffers any more: a rank that finishes
// early and at once scribbles over (or frees) its buffers must not change anybody's result.
// Without that wait this fails, and AddressSanitizer reports the use after free.
TEST(HostExecutorTest, BuffersAreFreeToReuseOnReturn) {
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kStragglar}) {
    for (bool in_place : {true, false}) {
      const int num_ranks = 6;
      const int64_t count = 6 * 4096 + 5;
      const Plan plan = MakePlan(algorithm, num_ranks, 4);
      const exact_data::Spec spec{
          .type = DataType::kInt32, .op = ReduceOp::kSum, .ranks = num_ranks, .seed = 7};
      std::vector<Bytes> inputs;
      for (int rank = 0; rank < num_ranks; ++rank) {
        inputs.push_back(exact_data::MakeInput(spec, rank, count));
      }
      const Bytes expected = exact_data::Reference(spec, count);
      std::vector<std::unique_ptr<Bytes>> sends, results;
      for (int rank = 0; rank < num_ranks; ++rank) {
        sends.push_back(std::make_unique<Bytes>(inputs[rank]));
        results.push_back(in_place ? nullptr : std::make_unique<Bytes>(inputs[rank].size()));
      }
      HostTransport transport(num_ranks);
      std::vector<absl::Status> statuses(num_ranks);
      std::vector<int> correct(num_ranks);  // not vector<bool>: ranks write their own element
      std::vector<std::thread> threads;
      for (int rank = 0; rank < num_ranks; ++rank) {
        threads.emplace_back([&, rank] {
          Bytes* result = in_place ? sends[rank].get() : results[rank].get();
          statuses[rank] = ExecutePlanOnHost(plan, rank,
                                             {.send = sends[rank]->data(),
                                              .recv = result->data(),
                                              .count = count,
                                              .type = DataType::kInt32},
                                             transport);
          correct[rank] = *result == expected;
          std::fill(sends[rank]->begin(), sends[rank]->end(), std::byte{0xee});
          std::fill(result->begin(), result->end(), std::byte{0xee});
          sends[rank].reset();
          if (!in_place) results[rank].reset();
        });
      }
      for (std::thread& thread : threads) thread.join();
      for (int rank = 0; rank < num_ranks; ++rank) {
        EXPECT_TRUE(statuses[rank].ok()) << statuses[rank];
        EXPECT_TRUE(correct[rank]) << AlgorithmName(algorithm) << (in_place ? " in" : " out of")
                                   << " place, rank " << rank;
      }
    }
  }
}

}  // namespace
}  // namespace stragglar
