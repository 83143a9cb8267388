// `stragglar pipeline-run`: a pipeline-parallel job emulated on the host, the way `stragglar run`
// emulates data parallelism. Each stage is a thread that runs its 1F1B order, sleeping its
// forward and backward times; activations and gradients travel through mailboxes that deliver
// them a link's time later (bytes / bandwidth, plus the injected delay of a slow link). Every
// transfer feeds the link monitor (pipeline/link_monitor.h) and the link metrics; each iteration is
// an epoch. Once a slow link is named, the advisor (pipeline/pipeline_advisor.h) recommends warm-up
// counts from the stages' measured times: they go to the metrics and the advice file, and, with
// apply_advice, into the job's next iterations, as a training loop reading the file would.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/pipeline_advisor.h"
#include "pipeline/pipeline_schedule.h"
#include "prometheus/registry.h"

namespace stragglar {

// The communicator name the job's metrics carry.
inline constexpr char kPipelineComm[] = "pipeline";

struct PipelineJobOptions {
  PipelineSpec spec;            // stage times, micro-batches, the injected link delays
  int memory_microbatches = 0;  // 0: unlimited
  int iterations = 16;
  // The injected delays start with this iteration (1-based): the links first learn what a healthy
  // transfer takes, as they would in a job whose link degrades (docs/pipeline.md).
  int delay_from = 3;
  int64_t activation_bytes = 16 << 20;
  double bandwidth_bytes_per_s = 50.0 * (1LL << 30);
  bool apply_advice = false;
  std::string advice_file;  // empty: none
  prometheus::Registry* metrics = nullptr;
};

struct PipelineJobReport {
  std::vector<double> iteration_s;
  std::vector<std::vector<int>> warmup;  // the counts each iteration ran
  std::optional<PipelineAdvice> advice;  // the last advice
  int named_at = -1;                     // the iteration after which a slow link was first named
};

absl::StatusOr<PipelineJobReport> RunPipelineJob(const PipelineJobOptions& options,
                                                 std::ostream& progress);

}  // namespace stragglar
