// One rank's process: joins the NCCL communicator with the others, runs every row's AllReduce
// calls on its GPU, times them and (-c 1) checks their results, and reports each row to the
// parent over its result pipe (pipes.h).
#pragma once

#include "bench/nccl_bench/config.h"

namespace stragglar::nccl_bench {

// Returns the process's exit status: 0 done, 77 no device; after an error (reported on the pipe)
// it exits 1 at once, without cleaning up (with a peer gone, NCCL's teardown could wait forever).
int RankMain(const Config& config, int rank, int device, int ctrl_fd, int result_fd);

}  // namespace stragglar::nccl_bench
