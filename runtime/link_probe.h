// The link model a communicator prices plans with, measured as a plan sees the link: one ring
// round (every rank sends to the next and receives from the previous, all at once, so contention
// is included) of tiny messages gives alpha; one of large messages, beta. One formula for every
// backend; each backend only times its own ring rounds.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "policy/simulator.h"
#include "runtime/comm_backend.h"

namespace stragglar {

// How many rounds a probe times, and how the transfers share the machine.
struct LinkProbeSpec {
  int small_repeats = 16;
  int large_repeats = 2;
  // 0: every transfer has a link of its own; P > 0: the ranks share P cores (ranks of one host),
  // so a round of n transfers runs n / P times slower than one alone.
  double shared_lanes = 0;
};

inline constexpr int64_t kProbeSmallBytes = 64;
// Large enough that the ranks' buffers spill out of the caches, as a big AllReduce's do.
inline constexpr int64_t kProbeLargeBytes = 4 << 20;

// alpha = a round of kProbeSmallBytes messages; beta = the extra time per byte of a round of
// `large_bytes` ones, scaled to one transfer with a lane of its own.
LinkModel LinkFromRingRounds(double small_s, double large_s, int64_t large_bytes, int num_ranks,
                             double shared_lanes);

// Times the rounds through `backend` (a warm-up round of large messages first: connections and
// buffers are touched), takes the slowest rank's times, and returns LinkFromRingRounds of them:
// the same model on every rank. Collective.
absl::StatusOr<LinkModel> ProbeLink(CommBackend& backend, int num_ranks, const LinkProbeSpec& spec);

// The link model a communicator measured, for its log line: "link: 12.5 us + 1.52 GB/s per
// message".
std::string DescribeLink(const LinkModel& link);

}  // namespace stragglar
