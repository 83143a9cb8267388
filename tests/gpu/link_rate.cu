// stragglar-gpu-link-rate: the copy rate of one rank's share of a GPU, with the device executor's
// own copy loop (kernels/reduce/cuda_elementwise.h) on --ctas CTAs of its thread count, each CTA
// copying its own part as the executor's CTAs do. Several of these processes at once under MPS,
// each with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE set, show whether each rank's rate is set by its
// own SMs (a link of its own, as a GPU on NVLink has) or by the memory they all share:
// scripts/gpu-own-links.py compares each rank's rate alone with its rate while all run.
//
// Every process copies for the same wall-clock window, so that the rates compare: it sets up and
// warms up, prints "link-rate: ready", and waits for --start_file (bounded by --wait_s), which
// holds the window's start in seconds since the epoch (CLOCK_REALTIME, shared by the processes
// of one machine); without it the window starts at once. It then copies, one call after another,
// until --seconds have passed, and prints
//   link-rate: ctas K, M MiB, C copies in S s: R GB/s
// with GB/s = 1e9 bytes moved per second, a copy moving 2 x M MiB (read and write).
//
// Exit status: 0, 1 on a CUDA error or a start file that never came, 2 for bad flags, and 77
// with one line "SKIP: no CUDA device (...)" without a GPU.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "kernels/exec/device/device_kernel.h"
#include "kernels/reduce/cuda_elementwise.h"

ABSL_FLAG(int, ctas, 8, "CTAs of the copy kernel (the device executor's STRAGGLAR_IPC_BLOCKS)");
ABSL_FLAG(int64_t, mib, 256, "MiB copied per call");
ABSL_FLAG(double, seconds, 2, "how long to copy");
ABSL_FLAG(std::string, start_file, "", "wait for this file; it holds the start, epoch seconds");
ABSL_FLAG(double, wait_s, 120, "how long to wait for --start_file");

namespace stragglar {
namespace {

using cuda_elementwise::CopyFunction;
using cuda_elementwise::ElementwiseAnyAlignment;
using cuda_elementwise::Operands;

// CTA b copies elements [count * b / ctas, count * (b + 1) / ctas), cut at 16-byte multiples.
__global__ void __launch_bounds__(kDeviceThreadsPerCta)
    CopyKernel(uint32_t* out, const uint32_t* in, int64_t count) {
  auto cut = [&](int64_t b) { return b == gridDim.x ? count : count * b / gridDim.x / 4 * 4; };
  const int64_t first = cut(blockIdx.x);
  ElementwiseAnyAlignment<Operands::kCopy, uint32_t>(
      out + first, in + first, nullptr, cut(blockIdx.x + 1) - first, CopyFunction<uint32_t>{},
      threadIdx.x, blockDim.x);
}

void Check(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return;
  std::printf("FAIL: %s: %s\n", call, cudaGetErrorString(error));
  std::exit(1);
}

double EpochSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The window's start: read from `path` once it exists (within `wait_s`), else now.
double StartTime(const std::string& path, double wait_s) {
  if (path.empty()) return EpochSeconds();
  const double give_up = EpochSeconds() + wait_s;
  while (EpochSeconds() < give_up) {
    std::ifstream file(path);
    double start = 0;
    if (file >> start) return start;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("FAIL: no start time in %s within %g s\n", path.c_str(), wait_s);
  std::exit(1);
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::SetProgramUsageMessage("the copy rate of one rank's share of a GPU");
  absl::ParseCommandLine(argc, argv);
  const int ctas = absl::GetFlag(FLAGS_ctas);
  const int64_t mib = absl::GetFlag(FLAGS_mib);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  if (ctas < 1 || ctas > 1024 || mib < 1 || !(seconds > 0)) {
    std::fprintf(stderr,
                 "stragglar-gpu-link-rate: needs --ctas 1..1024, --mib >= 1, --seconds > 0\n");
    return 2;
  }
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n",
                cudaGetErrorString(error != cudaSuccess ? error : cudaErrorNoDevice));
    return 77;
  }
  const int64_t bytes = mib << 20;
  const int64_t count = bytes / static_cast<int64_t>(sizeof(uint32_t));
  uint32_t *out = nullptr, *in = nullptr;
  Check(cudaMalloc(&out, bytes), "cudaMalloc");
  Check(cudaMalloc(&in, bytes), "cudaMalloc");
  Check(cudaMemset(in, 1, bytes), "cudaMemset");
  auto copy = [&] {
    CopyKernel<<<ctas, kDeviceThreadsPerCta>>>(out, in, count);
    Check(cudaGetLastError(), "launching the copy kernel");
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  };
  for (int i = 0; i < 3; ++i) copy();
  std::printf("link-rate: ready\n");
  const double start = StartTime(absl::GetFlag(FLAGS_start_file), absl::GetFlag(FLAGS_wait_s));
  while (EpochSeconds() < start) std::this_thread::sleep_for(std::chrono::microseconds(100));
  int64_t copies = 0;
  double now = EpochSeconds();
  for (; now < start + seconds; now = EpochSeconds()) {
    copy();
    ++copies;
  }
  const double elapsed = now - start;
  std::printf("link-rate: ctas %d, %lld MiB, %lld copies in %.3f s: %.1f GB/s\n", ctas,
              static_cast<long long>(mib), static_cast<long long>(copies), elapsed,
              2.0 * static_cast<double>(bytes) * static_cast<double>(copies) / elapsed / 1e9);
  Check(cudaFree(out), "cudaFree");
  Check(cudaFree(in), "cudaFree");
  return 0;
}

}  // namespace
}  // namespace stragglar

int main(int argc, char** argv) { return stragglar::Main(argc, argv); }
