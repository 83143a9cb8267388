// Inputs whose AllReduce is exact in any order and grouping, and the reference result computed
// independently of the library's kernels: what the executor tests (host, MPI-free GPU executor)
// compare every rank's result with, bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/reduce.h"

namespace stragglar::exact_data {

using Bytes = std::vector<std::byte>;

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A cheap deterministic stream: inputs for 1 MiB buffers must not dominate the run time.
inline uint64_t Noise(uint64_t seed, int rank, int64_t element) {
  return SplitMix64(seed ^ (static_cast<uint64_t>(rank) << 48) ^
                    (static_cast<uint64_t>(element) * 0x2545f4914f6cdd1dull));
}

inline bool IsFloat(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kBfloat16;
}

// Rounds `value` to `type` and stores it as element `index`.
inline void StoreFloat(DataType type, std::byte* data, int64_t index, double value) {
  switch (type) {
    case DataType::kFloat16: {
      const uint16_t half = FloatToHalf(static_cast<float>(value));
      std::memcpy(data + 2 * index, &half, 2);
      return;
    }
    case DataType::kBfloat16: {
      const uint16_t bf16 = FloatToBfloat16(static_cast<float>(value));
      std::memcpy(data + 2 * index, &bf16, 2);
      return;
    }
    case DataType::kFloat32: {
      const float single = static_cast<float>(value);
      std::memcpy(data + 4 * index, &single, 4);
      return;
    }
    default: {
      std::memcpy(data + 8 * index, &value, 8);
      return;
    }
  }
}

inline double LoadFloat(DataType type, const std::byte* data, int64_t index) {
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBfloat16: {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * index, 2);
      return type == DataType::kFloat16 ? HalfToFloat(bits) : Bfloat16ToFloat(bits);
    }
    case DataType::kFloat32: {
      float single;
      std::memcpy(&single, data + 4 * index, 4);
      return single;
    }
    default: {
      double value;
      std::memcpy(&value, data + 8 * index, 8);
      return value;
    }
  }
}

// A float input whose reduction is exact in any order and grouping, so every algorithm must
// match the reference bit for bit: small integers for sum/avg (partial sums of <= 16 ranks stay
// below 2^8, exact even in bfloat16), +-2^{-1,0,1} for prod (rank 0 contributes +-1, so no partial
// product leaves fp16's range), and any non-zero value for max/min (no -0/+0 ties).
inline double ExactFloatInput(ReduceOp op, int rank, uint64_t noise) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return static_cast<double>(static_cast<int>(noise % 17) - 8);
    case ReduceOp::kProd: {
      const int exponent = rank == 0 ? 0 : static_cast<int>(noise % 3) - 1;
      return std::ldexp((noise >> 8) & 1 ? -1.0 : 1.0, exponent);
    }
    case ReduceOp::kMax:
    case ReduceOp::kMin: {
      const double value = static_cast<double>(static_cast<int>(noise % 2001) - 1000) / 8;
      return value == 0 ? 0.5 : value;
    }
  }
  return 0;
}

enum class FloatInputs { kExact, kRandom };

// Rank `rank`'s contribution. Integers are arbitrary bit patterns: wrap-around sums and products
// are exact in any order. Random floats are uniform in [-1, 1].
inline Bytes MakeInput(DataType type, ReduceOp op, int rank, int64_t count, uint64_t seed,
                       FloatInputs float_inputs = FloatInputs::kExact) {
  const int element_size = DataTypeSize(type);
  Bytes input(count * element_size);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t noise = Noise(seed, rank, i);
    if (!IsFloat(type)) {
      std::memcpy(input.data() + i * element_size, &noise, element_size);  // little-endian
    } else if (float_inputs == FloatInputs::kExact) {
      StoreFloat(type, input.data(), i, ExactFloatInput(op, rank, noise));
    } else {
      StoreFloat(type, input.data(), i, static_cast<double>(noise >> 11) * 0x1p-52 - 1.0);
    }
  }
  return input;
}

template <typename T>
inline void ReduceIntegersInOrder(ReduceOp op, const std::vector<Bytes>& inputs, int64_t count,
                                  Bytes& result) {
  using Unsigned = std::make_unsigned_t<T>;
  for (int64_t i = 0; i < count; ++i) {
    T accumulator;
    std::memcpy(&accumulator, inputs[0].data() + i * sizeof(T), sizeof(T));
    for (size_t rank = 1; rank < inputs.size(); ++rank) {
      T value;
      std::memcpy(&value, inputs[rank].data() + i * sizeof(T), sizeof(T));
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          accumulator =
              static_cast<T>(static_cast<Unsigned>(accumulator) + static_cast<Unsigned>(value));
          break;
        case ReduceOp::kProd:
          // Multiply in a type at least as wide as int so that uint8/int8 do not promote to a
          // signed int that could overflow.
          accumulator = static_cast<T>(static_cast<uint64_t>(static_cast<Unsigned>(accumulator)) *
                                       static_cast<uint64_t>(static_cast<Unsigned>(value)));
          break;
        case ReduceOp::kMax:
          accumulator = std::max(accumulator, value);
          break;
        case ReduceOp::kMin:
          accumulator = std::min(accumulator, value);
          break;
      }
    }
    std::memcpy(result.data() + i * sizeof(T), &accumulator, sizeof(T));
  }
}

// The exact AllReduce of `inputs` (valid for integers and for exact float inputs), computed
// independently of the library's kernels except for kAvg's final division, which is
// FinalizeReduction's contract rather than the executor's.
inline Bytes Reference(DataType type, ReduceOp op, const std::vector<Bytes>& inputs,
                       int64_t count) {
  Bytes result(count * DataTypeSize(type));
  switch (type) {
    case DataType::kInt8:
      ReduceIntegersInOrder<int8_t>(op, inputs, count, result);
      break;
    case DataType::kUint8:
      ReduceIntegersInOrder<uint8_t>(op, inputs, count, result);
      break;
    case DataType::kInt32:
      ReduceIntegersInOrder<int32_t>(op, inputs, count, result);
      break;
    case DataType::kUint32:
      ReduceIntegersInOrder<uint32_t>(op, inputs, count, result);
      break;
    case DataType::kInt64:
      ReduceIntegersInOrder<int64_t>(op, inputs, count, result);
      break;
    case DataType::kUint64:
      ReduceIntegersInOrder<uint64_t>(op, inputs, count, result);
      break;
    default:
      for (int64_t i = 0; i < count; ++i) {
        double accumulator = LoadFloat(type, inputs[0].data(), i);
        for (size_t rank = 1; rank < inputs.size(); ++rank) {
          const double value = LoadFloat(type, inputs[rank].data(), i);
          switch (op) {
            case ReduceOp::kSum:
            case ReduceOp::kAvg:
              accumulator += value;
              break;
            case ReduceOp::kProd:
              accumulator *= value;
              break;
            case ReduceOp::kMax:
              accumulator = std::max(accumulator, value);
              break;
            case ReduceOp::kMin:
              accumulator = std::min(accumulator, value);
              break;
          }
        }
        StoreFloat(type, result.data(), i, accumulator);
      }
  }
  FinalizeReduction(type, op, result.data(), count, static_cast<int>(inputs.size()));
  return result;
}

inline std::string ElementString(DataType type, const Bytes& data, int64_t index) {
  if (IsFloat(type)) return absl::StrCat(LoadFloat(type, data.data(), index));
  uint64_t bits = 0;
  std::memcpy(&bits, data.data() + index * DataTypeSize(type), DataTypeSize(type));
  return absl::StrCat("0x", absl::Hex(bits));
}

}  // namespace stragglar::exact_data
