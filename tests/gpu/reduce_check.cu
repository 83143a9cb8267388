// stragglar-gpu-reduce-check: the CUDA reduction kernels (kernels/reduce/cuda_reduce.h) against the
// CPU kernels (kernels/reduce/reduce.h), byte for byte, and their bandwidth against a
// device-to-device copy.
//
// Correctness: every data type x operator, out of place, in place (first == nullptr) and in place
// spelled first == out; counts 0, 1, 7, 1001, 65539, 2^17 + 3 and 2^20 + 3; buffers at a 16-byte
// boundary, all one element past it (the head/vector/tail path), at different offsets (the
// per-element path) and at odd byte offsets (the unaligned path); inputs with NaNs (quiet,
// signalling, negative, with payloads), infinities, -0, subnormals, the largest finite values,
// rounding ties and wrapping integers. LaunchFinalizeReduction(num_ranks = 3) runs after every
// reduction, so avg divides and the other operators must leave the result alone. Every case also
// checks that nothing outside the result was written and that the inputs are unchanged. Every byte
// must match, with one exception: where sum, prod or avg give NaN on both sides, the NaN's sign and
// payload may differ (see kernels/reduce/cuda_reduce.h); max and min, which select an operand,
// match exactly.
//
// Bandwidth: LaunchReduce out of place (float32 sum, bfloat16 sum; float16 sum and an in-place
// float32 sum for information) against cudaMemcpyAsync device to device, on 256 MiB buffers,
// timed with CUDA events. Bytes moved: 2 x size for the copy (read, write), 3 x size for a
// reduction (read two, write one); "reduce/copy" is the ratio of those rates.
//
// Exit status: 0 when everything matched, 1 on any mismatch or CUDA error (or a ratio under
// --min-ratio), 2 for bad usage, and 77 with one line "SKIP: no CUDA device (...)" when there is no
// GPU. Built with tests/gpu/cuda_emulation.h instead of nvcc, the same checks run the kernels on
// the CPU (stragglar-gpu-reduce-check-emulated).
#include <cuda_runtime_api.h>

#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/reduce/cuda_reduce.h"
#include "kernels/reduce/reduce.h"

namespace stragglar {
namespace {

constexpr int kNumRanks = 3;  // FinalizeReduction's divisor for avg
constexpr unsigned char kGuardByte = 0xa5;
constexpr int64_t kGuardBytes = 64;  // untouched bytes checked on both sides of every result

constexpr const char* kUsage =
    R"usage(usage: stragglar-gpu-reduce-check [--correctness] [--bandwidth]
                                  [--bytes MiB] [--iterations N] [--min-ratio R]
                                  [--max-count N]

Checks the CUDA reduction kernels against the CPU kernels byte for byte (every type x operator,
in place and out of place, several counts and alignments, crafted NaN/Inf/-0/subnormal and
wrapping-integer inputs), then times them against a device-to-device copy.

  --correctness   run only the correctness checks
  --bandwidth     run only the bandwidth measurement
                  (default: both; under the CPU emulation, correctness only)
  --bytes MiB     buffer size for the bandwidth measurement (default 256)
  --iterations N  timed iterations per measurement (default 20)
  --min-ratio R   fail when a float32 or bfloat16 reduce/copy ratio is below R (default 0: report)
  --max-count N   skip correctness counts above N (default: all, up to 2^20 + 3)

Exit status: 0 all matched, 1 a mismatch or CUDA error, 2 bad usage, 77 no CUDA device (one line
"SKIP: no CUDA device (...)").
)usage";

struct Options {
  bool correctness = true;
  bool bandwidth = true;
  int64_t bandwidth_mib = 256;
  int iterations = 20;
  double min_ratio = 0;
  int64_t max_count = std::numeric_limits<int64_t>::max();
};

// A CUDA call that must succeed: prints the failing call and exits 1.
void Check(cudaError_t error, const char* call, int line) {
  if (error == cudaSuccess) return;
  std::printf("FAIL: %s (line %d): %s\n", call, line, cudaGetErrorString(error));
  std::exit(1);
}
#define CHECK_CUDA(call) Check((call), #call, __LINE__)

// ---------------------------------------------------------------------------------------------
// Crafted inputs.

template <typename T>
void Put(std::vector<std::byte>& bytes, int64_t index, T value) {
  std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
}

template <typename T>
T Get(const std::vector<std::byte>& bytes, int64_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

// Bit patterns every 16-bit float input draws from often: zeros, infinities, NaNs (quiet,
// signalling, negative, with payloads), subnormals, the smallest normal, the largest finite, one.
constexpr uint16_t kSpecialHalves[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01,
                                       0x7d55, 0xffff, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400,
                                       0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3c01, 0x7bfe};
constexpr uint16_t kSpecialBfloat16s[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81,
                                          0x7faa, 0xffff, 0x0001, 0x8001, 0x007f, 0x807f, 0x0080,
                                          0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3f81, 0x7f7e};

template <typename Float, typename Bits>
Float FromBits(Bits bits) {
  Float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

template <typename Float>
Float SpecialFloat(std::mt19937_64& random) {
  using Limits = std::numeric_limits<Float>;
  using Bits = std::conditional_t<sizeof(Float) == 4, uint32_t, uint64_t>;
  constexpr int kMantissaBits = Limits::digits - 1;
  const Bits quiet = Bits{1} << (kMantissaBits - 1);
  const Bits exponent = static_cast<Bits>(~Bits{0} >> 1) & ~((Bits{1} << kMantissaBits) - 1);
  const Float specials[] = {
      Float{0},
      -Float{0},
      Limits::infinity(),
      -Limits::infinity(),
      Limits::quiet_NaN(),
      -Limits::quiet_NaN(),
      FromBits<Float>(static_cast<Bits>(exponent | 1)),              // signalling NaN
      FromBits<Float>(static_cast<Bits>(exponent | quiet | 12345)),  // NaN with a payload
      Limits::denorm_min(),
      -Limits::denorm_min(),
      Limits::min() - Limits::denorm_min(),  // the largest subnormal
      Limits::min(),
      Limits::max(),
      -Limits::max(),
      Float{1},
      -Float{1},
      Float{1} + Limits::epsilon(),
      Float{65504},  // the largest half, and the values around fp16 overflow
      Float{65520},
  };
  return specials[random() % std::size(specials)];
}

// `count` elements of operand `operand` (0 first, 1 second) of `type`: one element in four is a
// special value, one in four a random bit pattern, the rest ordinary numbers (for float32 and
// float64 some of them subnormal).
void FillCrafted(DataType type, int operand, int64_t count, std::vector<std::byte>& bytes) {
  bytes.assign(count * DataTypeSize(type), std::byte{0});
  std::mt19937_64 random(1000 * static_cast<int>(type) + operand);
  std::uniform_real_distribution<double> ordinary(-1000.0, 1000.0);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t choice = random();
    const uint64_t bits = random();
    const double number = ordinary(random) * std::ldexp(1.0, static_cast<int>(choice % 21) - 10);
    switch (type) {
      case DataType::kInt8:
      case DataType::kUint8:
        Put<uint8_t>(bytes, i,
                     static_cast<uint8_t>(choice % 4 == 0 ? (bits % 2 ? 0x80 : 0x7f) : bits));
        break;
      case DataType::kInt32:
      case DataType::kUint32: {
        const uint32_t specials[] = {0, 1, 0xffffffffu, 0x80000000u, 0x7fffffffu, 0x80000001u};
        Put<uint32_t>(bytes, i,
                      choice % 4 == 0   ? specials[bits % 6]
                      : choice % 4 == 1 ? static_cast<uint32_t>(static_cast<int32_t>(number))
                                        : static_cast<uint32_t>(bits));
        break;
      }
      case DataType::kInt64:
      case DataType::kUint64: {
        const uint64_t specials[] = {
            0, 1, ~uint64_t{0}, uint64_t{1} << 63, ~(uint64_t{1} << 63), (uint64_t{1} << 63) + 1};
        Put<uint64_t>(bytes, i,
                      choice % 4 == 0   ? specials[bits % 6]
                      : choice % 4 == 1 ? static_cast<uint64_t>(static_cast<int64_t>(number))
                                        : bits);
        break;
      }
      case DataType::kFloat16:
        Put<uint16_t>(bytes, i,
                      choice % 4 == 0   ? kSpecialHalves[bits % std::size(kSpecialHalves)]
                      : choice % 4 == 1 ? static_cast<uint16_t>(bits)
                                        : FloatToHalf(static_cast<float>(number / 16)));
        break;
      case DataType::kBfloat16:
        Put<uint16_t>(bytes, i,
                      choice % 4 == 0   ? kSpecialBfloat16s[bits % std::size(kSpecialBfloat16s)]
                      : choice % 4 == 1 ? static_cast<uint16_t>(bits)
                                        : FloatToBfloat16(static_cast<float>(number)));
        break;
      case DataType::kFloat32: {
        std::mt19937_64 special_random(bits);
        Put<float>(bytes, i,
                   choice % 4 == 0   ? SpecialFloat<float>(special_random)
                   : choice % 4 == 1 ? FromBits<float>(static_cast<uint32_t>(bits))
                   : choice % 8 == 2 ? static_cast<float>(number * 1e-40)  // subnormal sums
                                     : static_cast<float>(number));
        break;
      }
      case DataType::kFloat64: {
        std::mt19937_64 special_random(bits);
        Put<double>(bytes, i,
                    choice % 4 == 0   ? SpecialFloat<double>(special_random)
                    : choice % 4 == 1 ? FromBits<double>(bits)
                    : choice % 8 == 2 ? number * 1e-310
                                      : number);
        break;
      }
    }
  }
}

// Makes one element in sixteen of `second` equal to `first`'s, and one in sixteen its negation
// (the sign bit flipped for floats, two's complement for integers): ties for max and min, +0 and
// -0 pairs, x + -x.
void MirrorSome(DataType type, const std::vector<std::byte>& first, std::vector<std::byte>& second,
                int64_t count) {
  const int size = DataTypeSize(type);
  const bool is_float = type == DataType::kFloat16 || type == DataType::kBfloat16 ||
                        type == DataType::kFloat32 || type == DataType::kFloat64;
  std::mt19937_64 random(77 + static_cast<int>(type));
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t choice = random() % 16;
    if (choice > 1) continue;
    std::memcpy(second.data() + i * size, first.data() + i * size, size);
    if (choice == 1) {
      if (is_float) {
        second[(i + 1) * size - 1] ^=
            std::byte{0x80};  // little-endian: the sign is in the last byte
      } else {
        uint64_t value = 0;
        std::memcpy(&value, second.data() + i * size, size);
        value = ~value + 1;
        std::memcpy(second.data() + i * size, &value, size);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Correctness.

// Whether the element at `element` is a NaN of `type` (false for integer types).
bool IsNan(DataType type, const std::byte* element) {
  uint64_t bits = 0;
  std::memcpy(&bits, element, DataTypeSize(type));
  switch (type) {
    case DataType::kFloat16:
      return (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0;
    case DataType::kBfloat16:
      return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0;
    case DataType::kFloat32:
      return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu) != 0;
    case DataType::kFloat64:
      return (bits & 0x7ff0000000000000u) == 0x7ff0000000000000u && (bits & 0xfffffffffffffu) != 0;
    default:
      return false;
  }
}

enum class Mode { kOutOfPlace, kInPlaceNull, kInPlaceSame };

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kOutOfPlace:
      return "out-of-place";
    case Mode::kInPlaceNull:
      return "in-place";
    case Mode::kInPlaceSame:
      return "in-place(first==out)";
  }
  return "?";
}

// Byte offsets of out, first and second from a 256-byte boundary.
struct Placement {
  const char* name;
  int64_t out_elements, first_elements, second_elements;  // offsets in elements, plus
  int64_t extra_bytes;  // bytes added to out and second, and 2x to first (odd: unaligned elements)
};

constexpr Placement kPlacements[] = {
    {"aligned", 0, 0, 0, 0},
    {"all+1 element", 1, 1, 1, 0},
    {"out+1,first+0,second+2 elements", 1, 0, 2, 0},
    {"odd bytes", 0, 0, 0, 1},
};

std::string ElementHex(const std::byte* element, int size) {
  uint64_t value = 0;
  std::memcpy(&value, element, size);
  char text[32];
  std::snprintf(text, sizeof(text), "0x%0*" PRIx64, 2 * size, value);
  return text;
}

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : bytes(bytes) { CHECK_CUDA(cudaMalloc(&data, bytes)); }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* at(int64_t offset) const { return static_cast<std::byte*>(data) + offset; }
  void* data = nullptr;
  size_t bytes;
};

class CorrectnessCheck {
 public:
  CorrectnessCheck(int64_t max_count, cudaStream_t stream) : stream_(stream) {
    for (int64_t count : {0, 1, 7, 1001, 65539, (1 << 17) + 3, (1 << 20) + 3}) {
      if (count <= max_count) counts_.push_back(count);
    }
  }

  int cases() const { return cases_; }
  int failures() const { return failures_; }
  int64_t nan_payload_differences() const { return nan_payload_differences_; }

  void Run() {
    CheckEdgeCases();
    const int64_t largest = counts_.empty() ? 0 : counts_.back();
    // Room for the largest result, the guards on both sides, and the largest offsets.
    const size_t buffer_bytes = static_cast<size_t>(largest * 8 + 2 * kGuardBytes + 256);
    DeviceBuffer out(buffer_bytes), first(buffer_bytes), second(buffer_bytes);
    for (DataType type : kAllDataTypes) {
      FillCrafted(type, 0, largest, first_values_);
      FillCrafted(type, 1, largest, second_values_);
      MirrorSome(type, first_values_, second_values_, largest);
      for (ReduceOp op : kAllReduceOps) {
        for (Mode mode : {Mode::kOutOfPlace, Mode::kInPlaceNull, Mode::kInPlaceSame}) {
          for (int64_t count : counts_) {
            for (const Placement& placement : kPlacements) {
              if (placement.extra_bytes != 0 && DataTypeSize(type) == 1) continue;  // = aligned
              RunCase(type, op, mode, count, placement, out, first, second);
            }
          }
        }
      }
    }
    CHECK_CUDA(cudaDeviceSynchronize());
  }

 private:
  void Fail(const std::string& line) {
    ++failures_;
    std::printf("FAIL %s\n", line.c_str());
  }

  // The calls that launch nothing, and the arguments they refuse.
  void CheckEdgeCases() {
    struct Expectation {
      const char* what;
      cudaError_t got, expected;
    };
    float dummy = 0;
    const Expectation expectations[] = {
        {"LaunchReduce count 0 with null pointers",
         LaunchReduce(DataType::kFloat32, ReduceOp::kSum, nullptr, nullptr, nullptr, 0, stream_),
         cudaSuccess},
        {"LaunchReduce count -5",
         LaunchReduce(DataType::kInt8, ReduceOp::kMax, nullptr, nullptr, nullptr, -5, stream_),
         cudaSuccess},
        {"LaunchReduce null out",
         LaunchReduce(DataType::kFloat32, ReduceOp::kSum, nullptr, nullptr, &dummy, 1, stream_),
         cudaErrorInvalidValue},
        {"LaunchReduce unknown type",
         LaunchReduce(static_cast<DataType>(99), ReduceOp::kSum, &dummy, nullptr, &dummy, 1,
                      stream_),
         cudaErrorInvalidValue},
        {"LaunchReduce unknown op",
         LaunchReduce(DataType::kFloat32, static_cast<ReduceOp>(99), &dummy, nullptr, &dummy, 1,
                      stream_),
         cudaErrorInvalidValue},
        {"LaunchFinalizeReduction count 0",
         LaunchFinalizeReduction(DataType::kFloat32, ReduceOp::kAvg, nullptr, 0, 3, stream_),
         cudaSuccess},
        {"LaunchFinalizeReduction non-avg",
         LaunchFinalizeReduction(DataType::kFloat32, ReduceOp::kSum, nullptr, 10, 3, stream_),
         cudaSuccess},
        {"LaunchFinalizeReduction one rank",
         LaunchFinalizeReduction(DataType::kFloat32, ReduceOp::kAvg, nullptr, 10, 1, stream_),
         cudaSuccess},
        {"LaunchFinalizeReduction zero ranks",
         LaunchFinalizeReduction(DataType::kFloat32, ReduceOp::kAvg, &dummy, 1, 0, stream_),
         cudaErrorInvalidValue},
    };
    for (const Expectation& expectation : expectations) {
      ++cases_;
      if (expectation.got != expectation.expected) {
        Fail(std::string(expectation.what) + ": returned " + cudaGetErrorName(expectation.got) +
             ", expected " + cudaGetErrorName(expectation.expected));
      }
    }
  }

  void RunCase(DataType type, ReduceOp op, Mode mode, int64_t count, const Placement& placement,
               const DeviceBuffer& out, const DeviceBuffer& first, const DeviceBuffer& second) {
    ++cases_;
    const int size = DataTypeSize(type);
    const int64_t bytes = count * size;
    const int64_t out_offset = kGuardBytes + placement.out_elements * size + placement.extra_bytes;
    const int64_t first_offset =
        kGuardBytes + placement.first_elements * size + 2 * placement.extra_bytes;
    const int64_t second_offset =
        kGuardBytes + placement.second_elements * size + placement.extra_bytes;
    char name[160];
    std::snprintf(name, sizeof(name), "%s %s %s count=%" PRId64 " %s",
                  std::string(DataTypeName(type)).c_str(), std::string(ReduceOpName(op)).c_str(),
                  ModeName(mode), count, placement.name);

    // The CPU's answer.
    std::vector<std::byte> expected(first_values_.begin(), first_values_.begin() + bytes);
    if (mode == Mode::kOutOfPlace) {
      Reduce(type, op, expected.data(), first_values_.data(), second_values_.data(), count);
    } else {
      ReduceInto(type, op, expected.data(), second_values_.data(), count);
    }
    FinalizeReduction(type, op, expected.data(), count, kNumRanks);

    // The GPU's: guard bytes everywhere, the operands in place, reduce, finalize.
    const int64_t span = bytes + 2 * kGuardBytes + 3 * size;  // covers every placement's result
    CHECK_CUDA(cudaMemsetAsync(out.data, kGuardByte, span, stream_));
    CHECK_CUDA(cudaMemsetAsync(first.data, kGuardByte, span, stream_));
    CHECK_CUDA(cudaMemsetAsync(second.data, kGuardByte, span, stream_));
    std::byte* const out_pointer = out.at(out_offset);
    const std::byte* const first_pointer = first.at(first_offset);
    const std::byte* const second_pointer = second.at(second_offset);
    CHECK_CUDA(cudaMemcpyAsync(mode == Mode::kOutOfPlace ? first.at(first_offset) : out_pointer,
                               first_values_.data(), bytes, cudaMemcpyHostToDevice, stream_));
    CHECK_CUDA(cudaMemcpyAsync(second.at(second_offset), second_values_.data(), bytes,
                               cudaMemcpyHostToDevice, stream_));
    const void* first_argument = mode == Mode::kOutOfPlace    ? first_pointer
                                 : mode == Mode::kInPlaceSame ? out_pointer
                                                              : nullptr;
    cudaError_t error =
        LaunchReduce(type, op, out_pointer, first_argument, second_pointer, count, stream_);
    if (error == cudaSuccess) {
      error = LaunchFinalizeReduction(type, op, out_pointer, count, kNumRanks, stream_);
    }
    if (error == cudaSuccess) error = cudaStreamSynchronize(stream_);
    if (error != cudaSuccess) {
      Fail(std::string(name) + ": " + cudaGetErrorString(error));
      if (error != cudaErrorInvalidValue) std::exit(1);  // the context is likely unusable
      return;
    }

    std::vector<std::byte> got(span);
    CHECK_CUDA(cudaMemcpy(got.data(), out.data, span, cudaMemcpyDeviceToHost));
    int64_t mismatches = 0;
    int64_t first_mismatch = -1;
    const bool arithmetic = op == ReduceOp::kSum || op == ReduceOp::kProd || op == ReduceOp::kAvg;
    for (int64_t i = 0; i < count; ++i) {
      const std::byte* const got_element = got.data() + out_offset + i * size;
      const std::byte* const expected_element = expected.data() + i * size;
      if (std::memcmp(got_element, expected_element, size) == 0) continue;
      if (arithmetic && IsNan(type, got_element) && IsNan(type, expected_element)) {
        ++nan_payload_differences_;
        continue;
      }
      if (mismatches++ == 0) first_mismatch = i;
    }
    if (mismatches > 0) {
      Fail(std::string(name) + ": " + std::to_string(mismatches) + " of " + std::to_string(count) +
           " elements differ, first at " + std::to_string(first_mismatch) + ": got " +
           ElementHex(got.data() + out_offset + first_mismatch * size, size) + ", expected " +
           ElementHex(expected.data() + first_mismatch * size, size) + " (inputs " +
           ElementHex(first_values_.data() + first_mismatch * size, size) + ", " +
           ElementHex(second_values_.data() + first_mismatch * size, size) + ")");
    }
    if (!GuardsIntact(got, out_offset, bytes)) {
      Fail(std::string(name) + ": wrote outside the result");
    }
    // The inputs are unchanged.
    if (mode == Mode::kOutOfPlace && !Unchanged(first, first_offset, first_values_, bytes, span)) {
      Fail(std::string(name) + ": changed `first`");
    }
    if (!Unchanged(second, second_offset, second_values_, bytes, span)) {
      Fail(std::string(name) + ": changed `second`");
    }
  }

  static bool GuardsIntact(const std::vector<std::byte>& got, int64_t offset, int64_t bytes) {
    for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
      if (i >= offset && i < offset + bytes) continue;
      if (got[i] != std::byte{kGuardByte}) return false;
    }
    return true;
  }

  bool Unchanged(const DeviceBuffer& buffer, int64_t offset, const std::vector<std::byte>& values,
                 int64_t bytes, int64_t span) {
    std::vector<std::byte> got(span);
    CHECK_CUDA(cudaMemcpy(got.data(), buffer.data, span, cudaMemcpyDeviceToHost));
    return std::memcmp(got.data() + offset, values.data(), bytes) == 0 &&
           GuardsIntact(got, offset, bytes);
  }

  cudaStream_t stream_;
  std::vector<int64_t> counts_;
  std::vector<std::byte> first_values_, second_values_;
  int cases_ = 0;
  int failures_ = 0;
  int64_t nan_payload_differences_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Bandwidth.

// Seconds per call of `launch`, over `iterations` calls after a few untimed ones.
template <typename Launch>
double SecondsPerCall(int iterations, cudaStream_t stream, Launch launch) {
  for (int i = 0; i < 3; ++i) CHECK_CUDA(launch());
  cudaEvent_t start, end;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&end));
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < iterations; ++i) CHECK_CUDA(launch());
  CHECK_CUDA(cudaEventRecord(end, stream));
  CHECK_CUDA(cudaEventSynchronize(end));
  float milliseconds = 0;
  CHECK_CUDA(cudaEventElapsedTime(&milliseconds, start, end));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(end));
  return milliseconds / 1e3 / iterations;
}

// Returns false when a required ratio is below `options.min_ratio`.
bool MeasureBandwidth(const Options& options, cudaStream_t stream) {
  const int64_t bytes = options.bandwidth_mib << 20;
  DeviceBuffer out(bytes), first(bytes), second(bytes);
  // Zeros: ordinary numbers for every type (the GPU has no slow path for subnormals anyway).
  CHECK_CUDA(cudaMemset(out.data, 0, bytes));
  CHECK_CUDA(cudaMemset(first.data, 0, bytes));
  CHECK_CUDA(cudaMemset(second.data, 0, bytes));
  int device = 0;
  cudaDeviceProp properties;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaGetDeviceProperties(&properties, device));
  std::printf("bandwidth: %s, %" PRId64
              " MiB buffers, %d iterations; GB/s = 1e9 bytes/s moved "
              "(copy 2 x size, reduce 3 x size)\n",
              properties.name, options.bandwidth_mib, options.iterations);

  const double copy_seconds = SecondsPerCall(options.iterations, stream, [&] {
    return cudaMemcpyAsync(out.data, first.data, bytes, cudaMemcpyDeviceToDevice, stream);
  });
  const double copy_rate = 2.0 * bytes / copy_seconds / 1e9;
  std::printf("  %-34s %8.1f GB/s\n", "copy (cudaMemcpyAsync D2D)", copy_rate);

  struct Measurement {
    DataType type;
    bool in_place;
    bool required;  // counts for --min-ratio
  };
  bool ok = true;
  for (const Measurement& m :
       {Measurement{DataType::kFloat32, false, true}, Measurement{DataType::kBfloat16, false, true},
        Measurement{DataType::kFloat16, false, false},
        Measurement{DataType::kFloat32, true, false}}) {
    const int64_t count = bytes / DataTypeSize(m.type);
    const double seconds = SecondsPerCall(options.iterations, stream, [&] {
      return LaunchReduce(m.type, ReduceOp::kSum, out.data, m.in_place ? nullptr : first.data,
                          second.data, count, stream);
    });
    const double rate = 3.0 * bytes / seconds / 1e9;
    const double ratio = rate / copy_rate;
    const std::string label =
        std::string(DataTypeName(m.type)) + " sum " + (m.in_place ? "in place" : "out of place");
    const bool below = m.required && ratio < options.min_ratio;
    std::printf("  %-34s %8.1f GB/s   reduce/copy %.3f%s\n", label.c_str(), rate, ratio,
                below ? "   BELOW --min-ratio" : "");
    ok = ok && !below;
  }
  return ok;
}

bool ParseOptions(int argc, char** argv, Options& options) {
  bool correctness_only = false, bandwidth_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "stragglar-gpu-reduce-check: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    char* end = nullptr;
    if (argument == "--help" || argument == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (argument == "--correctness") {
      correctness_only = true;
    } else if (argument == "--bandwidth") {
      bandwidth_only = true;
    } else if (argument == "--bytes") {
      options.bandwidth_mib = std::strtoll(value("--bytes"), &end, 10);
      if (*end != '\0' || options.bandwidth_mib <= 0) return false;
    } else if (argument == "--iterations") {
      options.iterations = static_cast<int>(std::strtol(value("--iterations"), &end, 10));
      if (*end != '\0' || options.iterations <= 0) return false;
    } else if (argument == "--min-ratio") {
      options.min_ratio = std::strtod(value("--min-ratio"), &end);
      if (*end != '\0' || options.min_ratio < 0) return false;
    } else if (argument == "--max-count") {
      options.max_count = std::strtoll(value("--max-count"), &end, 10);
      if (*end != '\0' || options.max_count < 0) return false;
    } else {
      std::fprintf(stderr, "stragglar-gpu-reduce-check: unknown argument \"%s\"\n", argv[i]);
      return false;
    }
  }
  if (correctness_only || bandwidth_only) {
    options.correctness = correctness_only;
    options.bandwidth = bandwidth_only;
  }
#if defined(STRAGGLAR_CUDA_EMULATION)
  if (!bandwidth_only) options.bandwidth = false;  // CPU timings say nothing about a GPU
#endif
  return true;
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each FAIL line out before a possible crash
  Options options;
  if (!ParseOptions(argc, argv, options)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n",
                cudaGetErrorString(error != cudaSuccess ? error : cudaErrorNoDevice));
    return 77;
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  int status = 0;
  if (options.correctness) {
    CorrectnessCheck check(options.max_count, stream);
    check.Run();
    std::printf(
        "correctness: %d cases, %d failed (%" PRId64
        " NaN results of sum/prod/avg differed only in sign or payload, which is allowed)\n",
        check.cases(), check.failures(), check.nan_payload_differences());
    if (check.failures() > 0) status = 1;
  }
  if (options.bandwidth && !MeasureBandwidth(options, stream)) status = 1;
  CHECK_CUDA(cudaStreamDestroy(stream));
  return status;
}

}  // namespace
}  // namespace stragglar

int main(int argc, char** argv) { return stragglar::Main(argc, argv); }
