// `stragglar pipeline`: what adapting a pipeline's 1F1B warm-up counts to slow links would buy,
// by simulation (pipeline/pipeline_schedule.h, pipeline/pipeline_search.h): the default counts,
// PipeMorph's closed-form adapted counts, and the best counts the search finds under the memory
// limit, each with its iteration time, bubble fraction and speedup over the default.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace stragglar {

struct PipelineArgs {
  std::optional<int> stages;
  std::optional<int> microbatches;
  std::string forward;                   // "10ms", or one value per stage: "10ms,12ms,..."
  std::string backward;                  // likewise
  std::vector<std::string> link_delays;  // "I-J:DELAY", J = I + 1 (either order)
  int memory_microbatches = 0;           // activations a stage can hold; 0: unlimited
  bool blocking_sends = false;           // a send holds its stage until it arrives
  bool json = false;
};

// Prints the comparison to `out`; InvalidArgument naming the bad flag or value.
absl::Status RunPipeline(const PipelineArgs& args, std::ostream& out);

// `stragglar pipeline-run`: the emulated job (tools/pipeline_job.h) on the pipeline the
// `stragglar pipeline` flags describe.
struct PipelineRunArgs {
  std::optional<int> iterations;  // default 16
  int delay_from = 3;             // the iteration the link delays start with
  int64_t activation_bytes = 16 << 20;
  std::string advice_file;
  bool apply_advice = false;
  std::optional<int> metrics_port;  // serve metrics (0: any free port)
  std::string metrics_address = "127.0.0.1";
  double metrics_hold_s = 0;  // keep serving after the last iteration
};
absl::Status RunPipelineJobCommand(const PipelineArgs& args, const PipelineRunArgs& run,
                                   std::ostream& out);

}  // namespace stragglar
