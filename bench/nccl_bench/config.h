// A run's configuration, validated from the flags, and the table's rows: the same in the parent
// and in every rank process, which all parse the same command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/reduce/reduce.h"

namespace stragglar::nccl_bench {

inline constexpr absl::string_view kProgram = "stragglar-bench";

struct Config {
  int64_t min_bytes = 0;
  int64_t max_bytes = 0;
  int step_factor = 2;
  std::vector<int64_t> sizes;  // --sizes: these instead of min_bytes..max_bytes by step_factor
  int iters = 0;
  int warmup = 0;
  std::vector<DataType> types;
  std::vector<ReduceOp> ops;
  bool check = false;
  int ranks = -1;  // -1: from the device count
  int straggler = -1;
  double delay_us = 0;
  double delay_us_per_mib = 0;
  // The straggler's spin before a call of `bytes`; a run has a straggler when it is ever > 0.
  double DelayUs(int64_t bytes) const {
    return delay_us + delay_us_per_mib * static_cast<double>(bytes) / (1 << 20);
  }
  bool delayed() const { return delay_us > 0 || delay_us_per_mib > 0; }
  std::string json;
  bool one_gpu = false;
  std::string executor;  // --executor: "", "nccl" or "device"
  double timeout_s = 600;
};

// From the parsed flags (flags.h); InvalidArgument names the flag at fault.
absl::StatusOr<Config> ConfigFromFlags();

// nccl-tests' names for the types ("half", "float", "double"; ours for the others).
absl::string_view TypeName(DataType type);

// One row of the table: the order is the same in the parent and in every rank.
struct RowSpec {
  DataType type;
  ReduceOp op;
  int64_t count;
  int64_t bytes;
};

// Every type x op x size, in that nesting.
std::vector<RowSpec> RowSpecs(const Config& config);

}  // namespace stragglar::nccl_bench
