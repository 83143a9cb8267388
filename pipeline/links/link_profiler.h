// What a job's point-to-point traffic says about its links, per communicator whose ranks are the
// stages of a pipeline (stage = rank): the transfers' link times go to the link monitor
// (pipeline/link_monitor.h) and the link metrics; at each epoch the persistently slow link is
// named, and, given the stages' forward and backward times, the advisor's warm-up counts
// (pipeline/pipeline_advisor.h) go to the warm-up gauges and the advice file.
//
// Used by the preload (each rank absorbs every rank's reports of an exchange, so that every rank
// names the same link and computes the same advice) and by `stragglar pipeline-run` (one process
// sees every transfer).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pipeline/link_monitor.h"
#include "pipeline/links/link_reports.h"
#include "pipeline/links/pipeline_metrics.h"
#include "pipeline/pipeline_advisor.h"
#include "pipeline/pipeline_schedule.h"
#include "prometheus/registry.h"

namespace stragglar {

struct LinkProfilerOptions {
  int stages = 0;    // the communicator's size; its links are PipelineLinks(stages)
  std::string comm;  // the metrics' comm label
  prometheus::Registry* metrics = nullptr;  // null: no metrics
  // Only the links this rank sends on get series (one exporter per series, as for every metric
  // under a preload); nullopt: every link (one process sees the whole job).
  std::optional<int> exporting_rank;
  std::string advice_file;      // rewritten atomically at each advice; empty: none
  int memory_microbatches = 0;  // the advisor's memory limit; 0: none
  // The stages' times for the advisor when the caller has no measurement of its own (Absorb);
  // nullopt: links only, no advice.
  std::optional<PipelineSpec> configured_stages;
  LinkMonitorConfig monitor;
};

struct LinkEpoch {
  LinkEpochReport report;
  std::optional<PipelineAdvice> advice;  // with a slow link named and stage times known
};

class LinkProfiler {
 public:
  // InvalidArgument for fewer than 2 stages, or configured stages that do not match.
  static absl::StatusOr<std::unique_ptr<LinkProfiler>> Create(LinkProfilerOptions options);

  // One transfer. Transfers between ranks that are not adjacent stages are counted, not monitored.
  void Record(const LinkTransfer& transfer);
  // Closes the epoch: the monitor's verdict to the metrics, and with `stages` (measured, or the
  // configured ones) the advice to the gauges and the file. An error only when the advice file
  // cannot be written (the advice itself is then still returned by advice()).
  absl::StatusOr<LinkEpoch> EndEpoch(const PipelineSpec* stages);

  // One exchange of the preload: every rank's reported sides, in rank order. The transfers they
  // complete are recorded; the epoch closes when there were any, with the configured stages.
  // Logs when a link is named or cleared.
  absl::Status Absorb(absl::Span<const std::vector<TransferSide>> by_rank);

  std::optional<Link> slow_link() const { return slow_link_; }
  const std::optional<PipelineAdvice>& advice() const { return advice_; }
  int64_t transfers() const { return transfers_; }
  int64_t off_pipeline() const { return off_pipeline_; }
  int epochs() const { return epochs_; }
  const LinkMatcher& matcher() const { return matcher_; }
  const LinkMonitor& monitor() const { return monitor_; }

 private:
  explicit LinkProfiler(LinkProfilerOptions options);

  LinkProfilerOptions options_;
  LinkMonitor monitor_;
  LinkMatcher matcher_;
  std::optional<PipelineMetrics> metrics_;
  std::optional<Link> slow_link_;
  LinkEpochReport last_report_;
  std::optional<PipelineAdvice> advice_;
  int64_t transfers_ = 0;
  int64_t off_pipeline_ = 0;
  int epochs_ = 0;
};

}  // namespace stragglar
