// An AllReduce's bandwidths as nccl-tests reports them, for both benches (stragglar-bench over
// NCCL, stragglar-mpi-bench over MPI): algbw = size / time, and busbw = algbw * 2(n - 1)/n, what
// each rank's link carries in Ring, so that it compares with the hardware's bandwidth.
#pragma once

#include <cstdint>

namespace stragglar::bench {

struct AllReduceBandwidth {
  double algbw_gbps = 0;  // GB/s (10^9 bytes)
  double busbw_gbps = 0;
};

// A call of `bytes` that took `seconds` on `ranks` ranks; zeros for a time that is not positive
// (nothing measured) or fewer than 1 rank.
inline AllReduceBandwidth AllReduceBandwidthOf(int64_t bytes, double seconds, int ranks) {
  if (!(seconds > 0) || ranks < 1) return {};
  const double algbw = static_cast<double>(bytes) / seconds / 1e9;
  return {.algbw_gbps = algbw, .busbw_gbps = algbw * 2.0 * (ranks - 1) / ranks};
}

}  // namespace stragglar::bench
