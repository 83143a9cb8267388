#include "bench/nccl_bench/device_probe.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <poll.h>

#include <algorithm>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/nccl_bench/child_process.h"
#include "bench/nccl_bench/pipes.h"

namespace stragglar::nccl_bench {

int ProbeMain(int fd) {
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  SendLine(fd, absl::StrCat("VERSIONS ", nccl_version, " ", runtime, " ", driver));
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    SendLine(fd, absl::StrCat("SKIP cudaGetDeviceCount: ", cudaGetErrorString(error), " (",
                              cudaGetErrorName(error), ", error ", static_cast<int>(error), ")"));
    return 0;
  }
  if (count == 0) {
    SendLine(fd, "SKIP cudaGetDeviceCount found 0 devices");
    return 0;
  }
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp prop{};
    char bus[64] = "?";
    cudaGetDeviceProperties(&prop, device);
    cudaDeviceGetPCIBusId(bus, sizeof(bus), device);
    SendLine(fd, absl::StrCat("DEVICE ", device, " ", bus, " ", prop.name));
  }
  SendLine(fd, "DONE");
  return 0;
}

absl::StatusOr<Probe> RunProbe(const std::vector<std::string>& args,
                               const std::vector<std::string>& env, double timeout_s) {
  absl::StatusOr<Child> spawned = Spawn(args, env, -1);
  if (!spawned.ok()) return spawned.status();
  Child& child = *spawned;
  Probe probe;
  bool done = false;
  const double deadline = Now() + timeout_s;
  while (!child.eof) {
    pollfd fd{child.result_fd, POLLIN, 0};
    const int wait_ms = static_cast<int>(std::max(0.0, deadline - Now()) * 1e3);
    const int ready = poll(&fd, 1, std::min(wait_ms, 1000));
    if (ready <= 0) {
      if (Now() < deadline) continue;
      std::vector<Child> children = {child};
      KillAll(children);
      return absl::DeadlineExceededError("the device probe did not finish (--timeout_s)");
    }
    for (const std::string& line : ReadLines(child)) {
      if (absl::StartsWith(line, "VERSIONS ")) {
        std::sscanf(line.c_str(), "VERSIONS %d %d %d", &probe.nccl_version, &probe.cuda_runtime,
                    &probe.cuda_driver);
      } else if (absl::StartsWith(line, "SKIP ")) {
        probe.skip = line.substr(5);
      } else if (absl::StartsWith(line, "DEVICE ")) {
        const std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 2));
        probe.devices.push_back(parts.size() > 2 ? parts[2] : "?");
      } else if (line == "DONE") {
        done = true;
      }
    }
  }
  Reap(child, true);
  if (probe.skip.has_value()) return probe;
  if (!done) {
    return absl::InternalError(
        absl::StrCat("the device probe ", DescribeExit(child.status), " without an answer"));
  }
  return probe;
}

}  // namespace stragglar::nccl_bench
