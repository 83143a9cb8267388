// Every rank ends an AllReduce with the same bytes, whatever the plan, the type and the operator,
// on inputs full of +0, -0, infinities and NaNs of every sign and payload (issue 51, item 3).
// Plans finish chunks on two ranks at once (StragglAR's exchanges with the straggler,
// Halving-Doubling's pairs), each with its own operand first, so every operator must give the
// same bits for (a, b) and (b, a): kernels/reduce/reduce_element.h. Beyond identity, what the
// operators promise: max and min (both NaN rules) are associative, so every rank holds exactly
// the sequential fold of the inputs; a NaN survives MPI's max and min and every sum and product,
// and loses to any number in NCCL's max and min.
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/exec/host/host_executor.h"
#include "kernels/reduce/reduce.h"
#include "kernels/reduce/reduce_element.h"
#include "kernels/synth/synthesizers.h"
#include "tests/host_plan_run.h"

namespace stragglar {
namespace {

using Bytes = std::vector<std::byte>;

constexpr int64_t kCount = 29;  // fewer elements than some plans' chunks, and odd

struct NamedPlan {
  std::string name;
  Plan plan;
};

// Every family at `n` ranks: Ring, Halving-Doubling, StragglAR (flat around the last rank, and
// around rank 0 in two pieces; log-depth), and on every split into nodes hierarchical StragglAR
// and the hierarchical ring.
std::vector<NamedPlan> PlansFor(int n) {
  std::vector<NamedPlan> plans = {
      {"ring", *SynthesizeRing(n)},
      {"halving-doubling", *SynthesizeHalvingDoubling(n)},
      {"stragglar", *SynthesizeStragglar(n, n - 1)},
      {"stragglar around 0, 2 pieces", *SynthesizeStragglar(n, 0, 2)},
      {"stragglar-log-depth", *SynthesizeLogDepthStragglar(n, n - 1, 2)}};
  for (int nodes = 2; nodes < n; ++nodes) {
    if (n % nodes != 0) continue;
    const std::string shape = absl::StrCat(nodes, "x", n / nodes);
    plans.push_back({"stragglar-hierarchical " + shape,
                     *SynthesizeHierarchicalStragglar(nodes, n / nodes, n - 1)});
    plans.push_back({"ring-hierarchical " + shape, *SynthesizeHierarchicalRing(nodes, n / nodes)});
  }
  return plans;
}

bool IsFloat(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kBfloat16;
}

int MantissaBits(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return 10;
    case DataType::kBfloat16:
      return 7;
    case DataType::kFloat32:
      return 23;
    default:
      return 52;
  }
}

// An element's bits: for floats mostly the awkward values (zeros of both signs, infinities, NaNs
// of random sign and payload, quiet and signalling), else numbers from 1 to 2 in sixteenths, of
// either sign; for integers any bits.
uint64_t RandomElement(DataType type, std::mt19937_64& random) {
  const uint64_t noise = random();
  if (!IsFloat(type)) return noise;
  const int bits = 8 * DataTypeSize(type);
  const int mantissa = MantissaBits(type);
  const uint64_t sign = (noise & 1) << (bits - 1);
  const uint64_t exponent = ((uint64_t{1} << (bits - 1 - mantissa)) - 1) << mantissa;
  const uint64_t payload = (noise >> 8) & ((uint64_t{1} << mantissa) - 1);
  const uint64_t one = (exponent >> 1) & exponent;  // the exponent of 1: the bias, all but its top
  const uint64_t sixteenths = ((noise >> 8) % 16) << (mantissa - 4);
  switch ((noise >> 1) % 6) {
    case 0:
      return sign;  // +0 or -0
    case 1:
      return sign | exponent;  // an infinity
    case 2:
    case 3:
      return sign | exponent | (payload == 0 ? 1 : payload);  // a NaN
    default:
      return sign | one | sixteenths;
  }
}

void Put(Bytes& bytes, DataType type, int64_t index, uint64_t bits) {
  const int size = DataTypeSize(type);
  std::memcpy(bytes.data() + index * size, &bits, size);  // little-endian: the low bytes
}

uint64_t Get(const Bytes& bytes, DataType type, int64_t index) {
  uint64_t bits = 0;
  std::memcpy(&bits, bytes.data() + index * DataTypeSize(type), DataTypeSize(type));
  return bits;
}

bool IsNan(DataType type, uint64_t bits) {
  if (!IsFloat(type)) return false;
  const int total = 8 * DataTypeSize(type);
  const int mantissa = MantissaBits(type);
  const uint64_t exponent = ((uint64_t{1} << (total - 1 - mantissa)) - 1) << mantissa;
  return (bits & exponent) == exponent && (bits & ((uint64_t{1} << mantissa) - 1)) != 0;
}

// The inputs folded in rank order with the operator's own element rule.
Bytes SequentialFold(const std::vector<Bytes>& inputs, DataType type, ReduceOp op) {
  Bytes folded = inputs[0];
  for (size_t r = 1; r < inputs.size(); ++r) {
    ReduceInto(type, op, folded.data(), inputs[r].data(), kCount);
  }
  return folded;
}

std::vector<Bytes> RunOnHost(const Plan& plan, const std::vector<Bytes>& inputs, DataType type,
                             ReduceOp op) {
  const int n = plan.num_ranks;
  std::vector<Bytes> results(n, Bytes(inputs[0].size()));
  HostTransport transport(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const AllReduceArgs args{.send = inputs[r].data(),
                               .recv = results[r].data(),
                               .count = kCount,
                               .type = type,
                               .op = op};
      EXPECT_TRUE(ExecutePlanOnHost(plan, r, args, transport).ok());
    });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

// What each operator promises of element `i` beyond identity across ranks.
void ExpectPromises(const std::vector<Bytes>& inputs, const Bytes& result, DataType type,
                    ReduceOp op, const std::string& where) {
  const bool selects = op == ReduceOp::kMax || op == ReduceOp::kMin || op == ReduceOp::kMaxNan ||
                       op == ReduceOp::kMinNan;
  if (selects) {
    EXPECT_EQ(result, SequentialFold(inputs, type, op)) << where << ": not the fold";
  }
  if (!IsFloat(type)) return;
  for (int64_t i = 0; i < kCount; ++i) {
    int nans = 0;
    for (const Bytes& input : inputs) nans += IsNan(type, Get(input, type, i)) ? 1 : 0;
    const bool nan = IsNan(type, Get(result, type, i));
    const bool numbers_win = op == ReduceOp::kMax || op == ReduceOp::kMin;
    if (numbers_win) {
      EXPECT_EQ(nan, nans == static_cast<int>(inputs.size())) << where << ", element " << i;
    } else if (nans > 0) {
      EXPECT_TRUE(nan) << where << ", element " << i << ": a NaN input was lost";
    }
  }
}

TEST(IdenticalBitsTest, EveryRankHoldsTheSameBytesForEveryPlanTypeAndOperator) {
  std::mt19937_64 random(2026);
  int runs = 0;
  for (int n = 2; n <= 9; ++n) {
    for (const NamedPlan& named : PlansFor(n)) {
      for (DataType type : kAllDataTypes) {
        for (ReduceOp op : kEveryReduceOp) {
          const std::string where = absl::StrCat(named.name, ", ", n, " ranks, ",
                                                 DataTypeName(type), " ", ReduceOpName(op));
          std::vector<Bytes> inputs(n, Bytes(kCount * DataTypeSize(type)));
          for (Bytes& input : inputs) {
            for (int64_t i = 0; i < kCount; ++i) Put(input, type, i, RandomElement(type, random));
          }
          const std::vector<Bytes> results = RunOnHost(named.plan, inputs, type, op);
          for (int r = 1; r < n; ++r) {
            ASSERT_EQ(results[r], results[0]) << where << ": rank " << r << " differs from 0";
          }
          ExpectPromises(inputs, results[0], type, op, where);
          ++runs;
        }
      }
    }
  }
  EXPECT_GT(runs, 3000);
}

// The operators' own symmetry, exhaustively on the values that once broke it: +0 and -0 under max
// and min, and two NaNs of different payloads under every operator (x86 returns the first).
TEST(IdenticalBitsTest, EveryOperatorIsSymmetricBitForBit) {
  const float nan_a = std::bit_cast<float>(0x7fc00001u), nan_b = std::bit_cast<float>(0xffc00abcu);
  const std::vector<float> values = {
      0.0f, -0.0f, nan_a, nan_b, 1.0f, -1.0f, std::numeric_limits<float>::infinity()};
  for (ReduceOp op : kEveryReduceOp) {
    for (float a : values) {
      for (float b : values) {
        float ab = a, ba = b;
        ReduceInto(DataType::kFloat32, op, &ab, &b, 1);
        ReduceInto(DataType::kFloat32, op, &ba, &a, 1);
        EXPECT_EQ(std::bit_cast<uint32_t>(ab), std::bit_cast<uint32_t>(ba))
            << ReduceOpName(op) << " of " << std::bit_cast<uint32_t>(a) << " and "
            << std::bit_cast<uint32_t>(b);
      }
    }
  }
  float zero = 0.0f, negative_zero = -0.0f;
  ReduceInto(DataType::kFloat32, ReduceOp::kMax, &zero, &negative_zero, 1);
  EXPECT_EQ(std::bit_cast<uint32_t>(zero), 0u) << "max(+0, -0) is +0";
  zero = 0.0f;
  ReduceInto(DataType::kFloat32, ReduceOp::kMin, &zero, &negative_zero, 1);
  EXPECT_EQ(std::bit_cast<uint32_t>(zero), 0x80000000u) << "min(+0, -0) is -0";
}

}  // namespace
}  // namespace stragglar
