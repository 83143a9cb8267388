// Prometheus metrics of pipeline parallelism's point-to-point links (docs/monitoring.md):
//   stragglar_link_transfer_seconds{comm, rank, src, dst}    each transfer's time (histogram)
//   stragglar_link_delay_seconds{comm, rank, src, dst}       its mean estimated delay, last epoch
//   stragglar_slow_link{comm, rank, src, dst}                1 for the named slow link, else 0
//   stragglar_pipeline_warmup_forwards{comm, rank, stage}    the advisor's warm-up count per stage
// rank is the link's sender (each series has one exporter: the sending rank under a preload).
// The warm-up gauges exist once there is advice.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/link_monitor.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace stragglar {

class PipelineMetrics {
 public:
  // `exporting_rank`: only the links it sends on get series (under a preload every rank has the
  // same links, and each series has one exporter); nullopt: every link.
  PipelineMetrics(prometheus::Registry& registry, std::string comm, const std::vector<Link>& links,
                  std::optional<int> exporting_rank = std::nullopt);

  // One transfer over `links[link]`.
  void OnTransfer(int link, double seconds);
  // An epoch's summary from the link monitor.
  void OnEpoch(const LinkEpochReport& report);
  // The advisor's counts, one per stage (stage = rank).
  void OnAdvice(const std::vector<int>& warmup);

 private:
  std::string comm_;
  std::vector<Link> links_;
  std::optional<int> exporting_rank_;
  // Per link; null for the links another rank exports.
  std::vector<prometheus::Histogram*> transfer_;
  std::vector<prometheus::Gauge*> delay_;
  std::vector<prometheus::Gauge*> slow_;
  prometheus::Family<prometheus::Gauge>& warmup_family_;
};

}  // namespace stragglar
