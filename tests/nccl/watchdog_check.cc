// A rank that never arrives, for the NCCL call watchdog's check on a GPU
// (tests/nccl/watchdog_check.sh): N processes run AllReduce calls of ones, each followed by the
// job's own wait for its stream (bounded here: polled for at most --stuck-after seconds); the
// last rank sleeps --late-seconds before call --late-call. Each rank prints one line per finding:
//   rank R: calls 0-K exact
//   rank R: call C returned <NCCL error> after S s          (ncclAllReduce failed)
//   rank R: call C's work stuck on the GPU for S s           (the stream never finished)
// and stops issuing calls at the first, then aborts its communicator (bounded by the script).
//
// usage: watchdog_check --rank R --ranks N --id_file FILE [--calls 40] [--late_call 20]
//                       [--late_seconds 3600] [--stuck_after 30] [--count 262144] [--device 0]
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "tests/nccl/nccl_job.h"

ABSL_FLAG(int, calls, 40, "AllReduce calls");
ABSL_FLAG(int, late_call, 20, "the call the last rank comes late to");
ABSL_FLAG(double, late_seconds, 3600, "how late it comes");
ABSL_FLAG(double, stuck_after, 30, "seconds a call's work may take on the GPU");
ABSL_FLAG(size_t, count, 262144, "floats per call");

namespace {

// The flags of one run.
struct Options {
  NcclJob job;
  int calls, late_call;
  double late_seconds, stuck_after;
  size_t count;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const Options options{.job = NcclJobFromFlags("watchdog_check"),
                        .calls = absl::GetFlag(FLAGS_calls),
                        .late_call = absl::GetFlag(FLAGS_late_call),
                        .late_seconds = absl::GetFlag(FLAGS_late_seconds),
                        .stuck_after = absl::GetFlag(FLAGS_stuck_after),
                        .count = absl::GetFlag(FLAGS_count)};
  if (options.calls < 1 || options.count == 0) {
    std::fprintf(stderr, "watchdog_check: --calls and --count must be positive\n");
    return 2;
  }
  ncclComm_t comm = JoinNcclJob(options.job);
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *send = nullptr, *recv = nullptr;
  CHECK_CUDA(cudaMalloc(&send, options.count * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&recv, options.count * sizeof(float)));
  const std::vector<float> ones(options.count, 1.0f);
  CHECK_CUDA(cudaMemcpy(send, ones.data(), options.count * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<float> result(options.count);
  const int rank = options.job.rank;
  int exact = 0;
  bool failed = false;
  for (int call = 0; call < options.calls && !failed; ++call) {
    if (rank == options.job.ranks - 1 && call == options.late_call) {
      std::this_thread::sleep_for(std::chrono::duration<double>(options.late_seconds));
    }
    const auto start = std::chrono::steady_clock::now();
    const ncclResult_t code =
        ncclAllReduce(send, recv, options.count, ncclFloat, ncclSum, comm, stream);
    if (code != ncclSuccess) {
      std::printf("rank %d: call %d returned %s after %.1f s\n", rank, call,
                  ncclGetErrorString(code), SecondsSince(start));
      // A failed communicator stays failed: the next call must not be handed to NCCL as if new.
      const ncclResult_t again =
          ncclAllReduce(send, recv, options.count, ncclFloat, ncclSum, comm, stream);
      std::printf("rank %d: call %d returned %s\n", rank, call + 1, ncclGetErrorString(again));
      failed = true;
      break;
    }
    // The job's own wait for the call's work, polled so that a stuck one is said, not waited for.
    cudaError_t state = cudaErrorNotReady;
    while ((state = cudaStreamQuery(stream)) == cudaErrorNotReady &&
           SecondsSince(start) < options.stuck_after) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (state == cudaErrorNotReady) {
      std::printf("rank %d: call %d's work stuck on the GPU for %.1f s\n", rank, call,
                  SecondsSince(start));
      std::fflush(stdout);
      _exit(3);  // NCCL's teardown would wait for the stuck work
    }
    if (state != cudaSuccess) {
      std::printf("rank %d: call %d's stream failed: %s\n", rank, call, cudaGetErrorString(state));
      failed = true;
      break;
    }
    CHECK_CUDA(
        cudaMemcpy(result.data(), recv, options.count * sizeof(float), cudaMemcpyDeviceToHost));
    bool all = true;
    for (float value : result) all = all && value == static_cast<float>(options.job.ranks);
    if (all && exact == call) ++exact;
  }
  std::printf("rank %d: calls 0-%d exact\n", rank, exact - 1);
  std::fflush(stdout);
  if (failed) {
    ncclCommAbort(comm);
  } else {
    ncclCommDestroy(comm);
  }
  return 0;
}
