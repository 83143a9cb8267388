// The device count and the NCCL and CUDA versions, found in a process of its own: the parent
// never touches CUDA or NCCL itself (a CUDA context does not survive fork).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stragglar::nccl_bench {

struct Probe {
  int nccl_version = 0;
  int cuda_runtime = 0;
  int cuda_driver = 0;
  std::optional<std::string> skip;
  std::vector<std::string> devices;  // "<bus id> <name>"
};

// The probe process's side: reports on pipe `fd` (pipes.h) and returns its exit status.
int ProbeMain(int fd);

// The parent's side: starts this program with `args` (plus the probe flag) and `env`, and reads
// its answer within `timeout_s`.
absl::StatusOr<Probe> RunProbe(const std::vector<std::string>& args,
                               const std::vector<std::string>& env, double timeout_s);

}  // namespace stragglar::nccl_bench
