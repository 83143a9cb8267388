// Per-link delays of point-to-point traffic (pipeline parallelism's sends and receives) and the
// persistently slow link among them. Each directed link (src -> dst) learns what a transfer of a
// given size takes from its own history: its typical time per byte for that size (a power-of-two
// bucket), the median of its first kLearnTransfers transfers, then following the median slowly
// (`baseline_drift` per transfer), so that a lasting change of path is learned in a few thousand
// transfers. A transfer's delay is its time minus that expectation.
//
// The typical time, not the fastest: a transfer's time includes the wait for its peer, and in a
// pipeline that wait is part of the schedule, larger on some links than on others. Measured
// against its fastest transfer, such a link read as late in most transfers of a healthy run (an
// H200, four ranks over NCCL sockets: links 0->1 and 3->2 named at 0.45-1 ms,
// docs/results/gpu-2026-11-30.md). For the same reason the detector sees only what exceeds the
// link's own noise: a delay beyond `tolerance` of the expectation. A link twice as slow as it was
// exceeds it by far.
//
// Naming the slow link reuses the rank detector (policy/detector.h) unchanged, with links in
// place of ranks: at each epoch the k-th transfers of every link form one observation, so the
// link whose excess stands out from the others' noise in most observations of the window is named,
// with the same hysteresis; a link that recovers is cleared the same way.
//
// Limitation: a link that is slow from its first transfers has that slowness as its baseline;
// its delay is then measured against itself and reads 0.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "policy/detector.h"

namespace stragglar {

struct Link {
  int src = 0;
  int dst = 0;
  bool operator==(const Link&) const = default;
};

// The directed links of an S-stage pipeline, in this order: 0->1, 1->0, 1->2, 2->1, ...
// (activations go down, gradients come back).
std::vector<Link> PipelineLinks(int stages);

struct LinkMonitorConfig {
  // min_lag_s: below this a delay is timer noise, whatever the spread.
  DetectorConfig detector{.window_calls = 64, .min_calls = 32, .min_lag_s = 100e-6};
  double baseline_drift = 1e-4;  // per transfer, relative
  // A transfer up to this share over its link's typical time is that link's own noise.
  double tolerance = 0.25;
};

struct LinkSummary {
  Link link;
  int transfers = 0;        // in the epoch
  double mean_seconds = 0;  // mean transfer time in the epoch
  double mean_delay_s = 0;  // mean estimated delay in the epoch (time - typical time, >= 0)
  double persistence = 0;   // share of the detector's window in which this link stood out
};

struct LinkEpochReport {
  std::vector<LinkSummary> links;  // in the monitor's link order
  std::optional<Link> slow_link;   // the named persistently slow link
};

class LinkMonitor {
 public:
  // Transfers of one size whose median is a link's first expectation of that size.
  static constexpr int kLearnTransfers = 16;

  // `links`: every directed link the traffic uses, none twice. With fewer than 2 there is nothing
  // to compare, and no link is named.
  explicit LinkMonitor(std::vector<Link> links, LinkMonitorConfig config = {});

  // One transfer of `bytes` over `links()[link]` that took `seconds`.
  void Record(int link, int64_t bytes, double seconds);
  // Closes the epoch: feeds its observations to the detector and summarizes it.
  LinkEpochReport EndEpoch();

  const std::vector<Link>& links() const { return links_; }
  // The index of `link`, or -1.
  int IndexOf(Link link) const;
  // What the link's history says `bytes` should take (0 before its first transfer of that size).
  double ExpectedSeconds(int link, int64_t bytes) const;

 private:
  struct Transfer {
    double seconds;
    double delay_s;   // over the expectation
    double excess_s;  // over the expectation and its tolerance: what the detector sees
  };
  // One link's expectation for one size bucket.
  struct Baseline {
    double seconds_per_byte = 0;
    int transfers = 0;          // counted up to kLearnTransfers
    std::vector<double> first;  // the first kLearnTransfers samples, until they are all in
  };
  std::vector<Link> links_;
  LinkMonitorConfig config_;
  StragglerDetector detector_;
  // Per link, per size bucket.
  std::vector<std::map<int, Baseline>> baselines_;
  std::vector<std::vector<Transfer>> epoch_;  // per link, this epoch's transfers
};

}  // namespace stragglar
