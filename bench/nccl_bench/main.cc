// stragglar-bench: an nccl-tests-style AllReduce benchmark for NCCL, one process per rank, on one
// or more GPUs, with an optional injected straggler. Linked against libnccl like any NCCL program,
// so `LD_PRELOAD=libstragglar.so stragglar-bench ...` runs the preload's ncclAllReduce.
//
// Processes. The parent (supervisor.h) never touches CUDA or NCCL (a CUDA context does not survive
// fork, and NCCL's bootstrap starts threads). It forks and execs itself: first a probe that counts
// the devices and reads the versions (device_probe.h), then one process per rank (rank.h). Rank 0
// calls ncclGetUniqueId and sends the id to the parent, which hands it to the other ranks; each
// rank then joins with ncclCommInitRank on device rank % devices. With fewer devices than ranks
// (or --one_gpu) every rank gets its own NCCL_HOSTID and NCCL talks over loopback sockets, as if
// each rank were its own node (see ../shared/docs/nccl.md, "Several ranks on one GPU"). The ranks
// report over pipes (pipes.h); the parent prints the table, writes --json (report.h), and kills
// every rank as soon as one fails, or when --timeout_s runs out, so it never hangs.
//
// Timing, as nccl-tests: per size, out-of-place then in-place; --warmup_iters untimed calls, then
// --iters calls between two CUDA events on the rank's stream; time is the per-call average,
// averaged over the ranks. algbw = bytes / time, busbw = algbw * 2(n-1)/n. With --delay_us, the
// --straggler rank enqueues a spin kernel of that length before every AllReduce (warm-up and
// check calls included), and every rank also records events around each timed call: the shortest
// rank's call (the last to arrive) is the time after the straggler's arrival ("after").
//
// -c 1: inputs are the project's exact test data (kernels/reduce/exact_data.h), exact in any
// reduction order for every type and operator; every rank computes the expected result from them
// alone and compares it byte for byte. The one exception: float averages over a rank count that is
// not a power of two, where NCCL multiplies each input by 1/n before summing; those may differ by
// up to n + 2 units in the last place.

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/nccl_bench/config.h"
#include "bench/nccl_bench/device_probe.h"
#include "bench/nccl_bench/flags.h"
#include "bench/nccl_bench/rank.h"
#include "bench/nccl_bench/supervisor.h"

namespace stragglar::nccl_bench {
namespace {

// One program, three roles: the parent, and the probe and the ranks it starts (internal flags).
int Main(int argc, char** argv) {
  bool help = false;
  if (absl::Status status = ParseArguments(argc, argv, &help); !status.ok()) {
    std::cerr << kProgram << ": " << status.message() << "\n";
    return 2;
  }
  if (help) {
    std::cout << kUsage;
    return 0;
  }
  absl::StatusOr<Config> config = ConfigFromFlags();
  if (!config.ok()) {
    std::cerr << kProgram << ": " << config.status().message() << "\n";
    return 2;
  }
  if (const int fd = absl::GetFlag(FLAGS_internal_probe_fd); fd >= 0) return ProbeMain(fd);
  if (const int rank = absl::GetFlag(FLAGS_internal_rank); rank >= 0) {
    return RankMain(*config, rank, absl::GetFlag(FLAGS_internal_device),
                    absl::GetFlag(FLAGS_internal_ctrl_fd), absl::GetFlag(FLAGS_internal_result_fd));
  }
  return SupervisorMain(*config, std::vector<std::string>(argv, argv + argc));
}

}  // namespace
}  // namespace stragglar::nccl_bench

int main(int argc, char** argv) { return stragglar::nccl_bench::Main(argc, argv); }
