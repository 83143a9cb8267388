// stragglar-bench's command line: nccl-tests' short flags (-b -e -f -n -w -d -o -c) and the long
// ones, on top of absl's flag registry; plus the internal flags with which the parent starts the
// probe and the ranks (the same program, see main.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stragglar::nccl_bench {

// Sizes as nccl-tests writes them ("8", "1K", "64M", "1G": powers of 1024) or as the rest of the
// project does ("64MiB", "1MB").
struct BenchSize {
  int64_t bytes = 0;
};

bool AbslParseFlag(absl::string_view text, BenchSize* size, std::string* error);
std::string AbslUnparseFlag(BenchSize size);

// What --help prints.
extern const char kUsage[];

// getopt-style short flags on top of absl's flag registry (absl alone has no "-b1M" and exits
// with status 1 on a bad flag, where we promise 2). Sets `help` for -h/--help.
absl::Status ParseArguments(int argc, char** argv, bool* help);

}  // namespace stragglar::nccl_bench

ABSL_DECLARE_FLAG(stragglar::nccl_bench::BenchSize, minbytes);
ABSL_DECLARE_FLAG(stragglar::nccl_bench::BenchSize, maxbytes);
ABSL_DECLARE_FLAG(int, stepfactor);
ABSL_DECLARE_FLAG(int, iters);
ABSL_DECLARE_FLAG(int, warmup_iters);
ABSL_DECLARE_FLAG(std::string, datatype);
ABSL_DECLARE_FLAG(std::string, op);
ABSL_DECLARE_FLAG(int, check);
ABSL_DECLARE_FLAG(int, ranks);
ABSL_DECLARE_FLAG(int, straggler);
ABSL_DECLARE_FLAG(double, delay_us);
ABSL_DECLARE_FLAG(double, delay_us_per_mib);
ABSL_DECLARE_FLAG(std::vector<std::string>, sizes);
ABSL_DECLARE_FLAG(std::string, json);
ABSL_DECLARE_FLAG(bool, one_gpu);
ABSL_DECLARE_FLAG(double, timeout_s);
ABSL_DECLARE_FLAG(std::string, executor);
ABSL_DECLARE_FLAG(int, internal_probe_fd);
ABSL_DECLARE_FLAG(int, internal_rank);
ABSL_DECLARE_FLAG(int, internal_device);
ABSL_DECLARE_FLAG(int, internal_ctrl_fd);
ABSL_DECLARE_FLAG(int, internal_result_fd);
