#include "bench/nccl_bench/config.h"

#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/units.h"
#include "bench/nccl_bench/flags.h"

namespace stragglar::nccl_bench {
namespace {

absl::StatusOr<std::vector<DataType>> ParseTypes(const std::string& text) {
  if (text == "all") return std::vector<DataType>(kAllDataTypes.begin(), kAllDataTypes.end());
  std::vector<DataType> types;
  for (absl::string_view name : absl::StrSplit(text, ',')) {
    absl::StatusOr<DataType> type = ParseDataType(absl::StripAsciiWhitespace(name));
    if (!type.ok()) {
      std::vector<std::string> names;
      for (DataType t : kAllDataTypes) names.emplace_back(TypeName(t));
      return absl::InvalidArgumentError(absl::StrCat("--datatype: unknown data type \"", name,
                                                     "\"; expected one of ",
                                                     absl::StrJoin(names, ", "), " or all"));
    }
    types.push_back(*type);
  }
  return types;
}

absl::StatusOr<std::vector<ReduceOp>> ParseOps(const std::string& text) {
  if (text == "all") return std::vector<ReduceOp>(kAllReduceOps.begin(), kAllReduceOps.end());
  std::vector<ReduceOp> ops;
  for (absl::string_view name : absl::StrSplit(text, ',')) {
    absl::StatusOr<ReduceOp> op = ParseReduceOp(absl::StripAsciiWhitespace(name));
    if (!op.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--op: unknown reduction \"", name,
                       "\"; expected one of sum, prod, max, min, avg or all"));
    }
    ops.push_back(*op);
  }
  return ops;
}

std::vector<int64_t> Sizes(const Config& config) {
  if (!config.sizes.empty()) return config.sizes;
  return GeometricSizes(config.min_bytes, config.max_bytes, config.step_factor);
}

}  // namespace

absl::string_view TypeName(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return "half";
    case DataType::kFloat32:
      return "float";
    case DataType::kFloat64:
      return "double";
    default:
      return DataTypeName(type);
  }
}

absl::StatusOr<Config> ConfigFromFlags() {
  Config config;
  absl::StatusOr<std::vector<DataType>> types = ParseTypes(absl::GetFlag(FLAGS_datatype));
  if (!types.ok()) return types.status();
  config.types = *types;
  absl::StatusOr<std::vector<ReduceOp>> ops = ParseOps(absl::GetFlag(FLAGS_op));
  if (!ops.ok()) return ops.status();
  config.ops = *ops;
  config.min_bytes = absl::GetFlag(FLAGS_minbytes).bytes;
  config.max_bytes = absl::GetFlag(FLAGS_maxbytes).bytes;
  for (const std::string& text : absl::GetFlag(FLAGS_sizes)) {
    BenchSize size;
    std::string error;
    if (!AbslParseFlag(text, &size, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("--sizes: ", error));
    }
    config.sizes.push_back(size.bytes);
  }
  if (!config.sizes.empty()) {
    config.min_bytes = *std::min_element(config.sizes.begin(), config.sizes.end());
    config.max_bytes = *std::max_element(config.sizes.begin(), config.sizes.end());
  }
  for (DataType type : config.types) {
    if (config.min_bytes < DataTypeSize(type)) {
      return absl::InvalidArgumentError(absl::StrCat("--minbytes ", config.min_bytes,
                                                     " does not hold one ", TypeName(type), " (",
                                                     DataTypeSize(type), " bytes)"));
    }
  }
  if (config.max_bytes < config.min_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--maxbytes ", config.max_bytes, " is smaller than --minbytes ", config.min_bytes));
  }
  config.step_factor = absl::GetFlag(FLAGS_stepfactor);
  if (config.step_factor < 2) return absl::InvalidArgumentError("--stepfactor must be >= 2");
  config.iters = absl::GetFlag(FLAGS_iters);
  if (config.iters < 1) return absl::InvalidArgumentError("--iters must be >= 1");
  config.warmup = absl::GetFlag(FLAGS_warmup_iters);
  if (config.warmup < 0) return absl::InvalidArgumentError("--warmup_iters must be >= 0");
  const int check = absl::GetFlag(FLAGS_check);
  if (check != 0 && check != 1) return absl::InvalidArgumentError("--check must be 0 or 1");
  config.check = check == 1;
  config.ranks = absl::GetFlag(FLAGS_ranks);
  if (config.ranks != -1 && config.ranks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ranks ", config.ranks, " must be >= 1 (or -1: one per GPU, 2 with a single GPU)"));
  }
  config.straggler = absl::GetFlag(FLAGS_straggler);
  if (config.straggler < -1 || (config.ranks >= 1 && config.straggler >= config.ranks)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--straggler ", config.straggler, " is not a rank of 0..",
                     config.ranks >= 1 ? config.ranks - 1 : 0, " (or -1 for the last)"));
  }
  config.delay_us = absl::GetFlag(FLAGS_delay_us);
  if (!(config.delay_us >= 0 && config.delay_us <= 1e7)) {
    return absl::InvalidArgumentError("--delay_us must be between 0 and 1e7 (10 s)");
  }
  config.delay_us_per_mib = absl::GetFlag(FLAGS_delay_us_per_mib);
  if (!(config.delay_us_per_mib >= 0 && config.DelayUs(config.max_bytes) <= 1e7)) {
    return absl::InvalidArgumentError(
        "--delay_us_per_mib must be >= 0, and the delay at the largest size at most 1e7 us");
  }
  config.json = absl::GetFlag(FLAGS_json);
  config.one_gpu = absl::GetFlag(FLAGS_one_gpu);
  config.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (!(config.timeout_s > 0)) return absl::InvalidArgumentError("--timeout_s must be > 0");
  config.executor = absl::AsciiStrToLower(absl::GetFlag(FLAGS_executor));
  if (!config.executor.empty() && config.executor != "nccl" && config.executor != "device") {
    return absl::InvalidArgumentError(
        absl::StrCat("--executor ", config.executor, " is not nccl or device"));
  }
  return config;
}

std::vector<RowSpec> RowSpecs(const Config& config) {
  std::vector<RowSpec> rows;
  for (DataType type : config.types) {
    for (ReduceOp op : config.ops) {
      for (int64_t size : Sizes(config)) {
        const int64_t count = size / DataTypeSize(type);
        rows.push_back({type, op, count, count * DataTypeSize(type)});
      }
    }
  }
  return rows;
}

}  // namespace stragglar::nccl_bench
