// Point-to-point transfers as both ends timed them, and the link time they agree on. A send's or
// a receive's GPU time includes waiting for the peer to post its side, which in a pipeline is
// mostly the peer's compute, not the link. Both kernels end once the data has arrived, so the one
// that started later measures the transfer alone: the k-th transfer over src -> dst took
//   min(src's k-th send to dst, dst's k-th receive from src),
// matched by index, which NCCL's point-to-point order guarantees (the k-th send to a peer meets
// its k-th receive from us, per communicator). No clock is shared between the two ends.
//
// Each rank reports the sides it timed in a fixed-size block of doubles (for an all-gather of
// equal-sized blocks); every rank feeds all ranks' blocks, in rank order, to its own LinkMatcher,
// so every rank derives the same link times in the same order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pipeline/link_monitor.h"

namespace stragglar {

// One side of a transfer as the rank that made it timed it.
struct TransferSide {
  int peer = 0;        // the other end
  bool send = false;   // this rank sent to `peer` (else received from it)
  uint64_t index = 0;  // per (peer, direction): the index-th send to / receive from `peer`
  int64_t bytes = 0;
  double seconds = 0;  // the side's GPU time (inside a user group: the whole group's)
  bool operator==(const TransferSide&) const = default;
};

// The block one rank contributes to an exchange: `slots` sides at most.
int ReportDoubles(int slots);
// Encodes the first min(sides.size(), slots) sides; returns how many it took.
int EncodeReport(absl::Span<const TransferSide> sides, int slots, std::vector<double>& block);
// InvalidArgument for a block of the wrong size or with a malformed entry (a negative peer or
// time, a count over `slots`): an exchange that went wrong, never data to trust.
absl::StatusOr<std::vector<TransferSide>> DecodeReport(absl::Span<const double> block, int slots);

struct LinkTransfer {
  Link link;
  int64_t bytes = 0;
  double seconds = 0;  // the earlier-ending estimate: the smaller of the two sides
};

class LinkMatcher {
 public:
  // A side waits for its other end until its link has seen `window` later transfers; then it is
  // dropped (its other end was never timed: captured into a graph, or a timer failure).
  explicit LinkMatcher(uint64_t window = 4096) : window_(window) {}

  // The sides `rank` reported; returns the transfers they complete, in the order completed.
  std::vector<LinkTransfer> Add(int rank, absl::Span<const TransferSide> sides);

  int64_t waiting() const;  // sides whose other end has not been reported
  int64_t dropped() const { return dropped_; }

 private:
  struct Waiting {
    int64_t bytes;
    double seconds;
  };
  struct Ends {
    absl::btree_map<uint64_t, Waiting> sends, receives;  // by index
    uint64_t newest = 0;
  };
  void Prune(Ends& ends);

  uint64_t window_;
  absl::flat_hash_map<std::pair<int, int>, Ends> links_;  // by (src, dst)
  int64_t dropped_ = 0;
};

}  // namespace stragglar
