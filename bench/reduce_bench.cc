// CPU reduction kernels against memcpy on the same buffer sizes.
//
// Bytes are counted the same way for every benchmark: the size of the destination buffer (N),
// once per iteration. memcpy then moves 2N bytes of memory traffic (read the source, write the
// destination) and ReduceInto 3N (read the accumulator and the incoming buffer, write the
// accumulator back), so where both are limited by memory bandwidth the reduction cannot exceed
// about 2/3 of memcpy's bytes/s; inside the caches it can get closer.
//
//   reduce_bench --benchmark_filter='Memcpy|float32_sum'

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

// Sizes in bytes of the destination buffer.
void BufferSizes(benchmark::internal::Benchmark* benchmark) {
  for (int64_t bytes : {64 * kKiB, 1 * kMiB, 64 * kMiB}) benchmark->Arg(bytes);
}

// Writes the element 1 of `type` into every element, so that repeated sums stay ordinary
// numbers (no subnormals, which would slow the float paths down).
void FillWithOnes(DataType type, std::vector<std::byte>& buffer) {
  const int size = DataTypeSize(type);
  std::vector<std::byte> one(size);
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kInt64:
    case DataType::kUint64:
      one[0] = std::byte{1};  // little-endian
      break;
    case DataType::kFloat16: {
      const uint16_t bits = FloatToHalf(1.0f);
      std::memcpy(one.data(), &bits, sizeof(bits));
      break;
    }
    case DataType::kBfloat16: {
      const uint16_t bits = FloatToBfloat16(1.0f);
      std::memcpy(one.data(), &bits, sizeof(bits));
      break;
    }
    case DataType::kFloat32: {
      const float value = 1.0f;
      std::memcpy(one.data(), &value, sizeof(value));
      break;
    }
    case DataType::kFloat64: {
      const double value = 1.0;
      std::memcpy(one.data(), &value, sizeof(value));
      break;
    }
  }
  for (size_t offset = 0; offset + size <= buffer.size(); offset += size) {
    std::memcpy(buffer.data() + offset, one.data(), size);
  }
}

void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<std::byte> destination(bytes, std::byte{0});  // touched: no page faults when timed
  std::vector<std::byte> source(bytes, std::byte{1});
  for (auto _ : state) {
    std::memcpy(destination.data(), source.data(), bytes);
    benchmark::DoNotOptimize(destination.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_Memcpy)->Apply(BufferSizes);

void BM_ReduceInto(benchmark::State& state, DataType type, ReduceOp op) {
  const int64_t bytes = state.range(0);
  const int64_t count = bytes / DataTypeSize(type);
  std::vector<std::byte> accumulator(bytes, std::byte{0});  // zero in every type
  std::vector<std::byte> incoming(bytes);
  FillWithOnes(type, incoming);
  for (auto _ : state) {
    ReduceInto(type, op, accumulator.data(), incoming.data(), count);
    benchmark::DoNotOptimize(accumulator.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK_CAPTURE(BM_ReduceInto, float32_sum, DataType::kFloat32, ReduceOp::kSum)
    ->Apply(BufferSizes);
BENCHMARK_CAPTURE(BM_ReduceInto, bfloat16_sum, DataType::kBfloat16, ReduceOp::kSum)
    ->Apply(BufferSizes);
BENCHMARK_CAPTURE(BM_ReduceInto, float16_sum, DataType::kFloat16, ReduceOp::kSum)
    ->Apply(BufferSizes);
BENCHMARK_CAPTURE(BM_ReduceInto, int32_max, DataType::kInt32, ReduceOp::kMax)->Apply(BufferSizes);
BENCHMARK_CAPTURE(BM_ReduceInto, float64_sum, DataType::kFloat64, ReduceOp::kSum)
    ->Apply(BufferSizes);
BENCHMARK_CAPTURE(BM_ReduceInto, int64_max, DataType::kInt64, ReduceOp::kMax)->Apply(BufferSizes);

}  // namespace
}  // namespace stragglar
