// Element types and reduction operators (NCCL's set), and the CPU reduction kernels that the host
// executor applies when a plan's `reduce` transfer lands.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stragglar {

// The same order as ncclDataType_t minus the fp8 types, which our kernels do not reduce: calls
// with fp8 data pass through to the native library (NCCL) instead.
enum class DataType : uint8_t {
  kInt8,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kFloat32,
  kFloat64,
  kBfloat16,
};

inline constexpr std::array<DataType, 10> kAllDataTypes = {
    DataType::kInt8,    DataType::kUint8,   DataType::kInt32,   DataType::kUint32,
    DataType::kInt64,   DataType::kUint64,  DataType::kFloat16, DataType::kFloat32,
    DataType::kFloat64, DataType::kBfloat16};

// NCCL's operators, then MPI's max and min of floating-point types: NCCL's max and min let a
// number beat a NaN (fmax, fmin), MPI programs expect a NaN to survive (kMaxNan, kMinNan; the same
// as kMax and kMin on integers). Every operator gives the same bits whatever the order of its two
// operands (kernels/reduce/reduce_element.h), so that every rank of a plan ends with the same
// bytes.
enum class ReduceOp : uint8_t { kSum, kProd, kMax, kMin, kAvg, kMaxNan, kMinNan };

// NCCL's operators: what the NCCL library and its CUDA kernels reduce.
inline constexpr std::array<ReduceOp, 5> kAllReduceOps = {
    ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg};
// Every operator the CPU kernels reduce.
inline constexpr std::array<ReduceOp, 7> kEveryReduceOp = {
    ReduceOp::kSum, ReduceOp::kProd,   ReduceOp::kMax,   ReduceOp::kMin,
    ReduceOp::kAvg, ReduceOp::kMaxNan, ReduceOp::kMinNan};

// Bytes per element: 1, 1, 4, 4, 8, 8, 2, 4, 8, 2.
int DataTypeSize(DataType type);
// "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
// "bfloat16"; parsing also accepts NCCL's aliases "half", "float", "double", "fp16", "bf16",
// "fp32", "fp64".
absl::string_view DataTypeName(DataType type);
absl::StatusOr<DataType> ParseDataType(absl::string_view name);
// "sum", "prod", "max", "min", "avg", "max-nan", "min-nan".
absl::string_view ReduceOpName(ReduceOp op);
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

// accumulator[i] = accumulator[i] (op) incoming[i] for i in [0, count). kAvg accumulates a sum;
// FinalizeReduction divides at the end, as NCCL's average does (sum, then divide by the rank
// count). fp16 and bf16 compute in float and round to nearest even once per element. Integer sums
// and products wrap around (two's complement) like NCCL's. The buffers may not overlap.
// Vectorized by the compiler for the baseline ISA (no CPU-specific instructions required).
void ReduceInto(DataType type, ReduceOp op, void* accumulator, const void* incoming, int64_t count);
// out[i] = first[i] (op) second[i], with the same rules: one pass instead of a copy and a
// ReduceInto (the host executor's first reduction into an out-of-place result). `out` must not
// overlap either input; `first` == nullptr means in place (out = out (op) second, as ReduceInto).
void Reduce(DataType type, ReduceOp op, void* out, const void* first, const void* second,
            int64_t count);

// After the last reduction: for kAvg divides every element by num_ranks (integer division for
// integer types, as NCCL); no-op for the other operators.
void FinalizeReduction(DataType type, ReduceOp op, void* data, int64_t count, int num_ranks);

// Conversions used by the kernels and by tests that craft exact inputs.
float HalfToFloat(uint16_t half);
uint16_t FloatToHalf(float value);  // round to nearest even; overflow to infinity
float Bfloat16ToFloat(uint16_t value);
uint16_t FloatToBfloat16(float value);  // round to nearest even; NaN stays NaN

}  // namespace stragglar
