// The parent process: probes the devices, starts one process per rank, relays rank 0's NCCL id,
// collects every rank's rows and prints them, and ends every rank as soon as one fails or
// --timeout_s runs out, so that a run never hangs. It never touches CUDA or NCCL itself.
#pragma once

#include <string>
#include <vector>

#include "bench/nccl_bench/config.h"

namespace stragglar::nccl_bench {

// `argv`: this program's command line, which every process it starts gets too. Returns the exit
// status: 0 ok, 1 wrong results or an error, 2 bad flags (found only now: --straggler against
// the device count, an unwritable --json), 77 no CUDA device.
int SupervisorMain(const Config& config, std::vector<std::string> argv);

}  // namespace stragglar::nccl_bench
