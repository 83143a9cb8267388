// Discrete-event simulation of one training iteration of a pipeline-parallel job under 1F1B with
// per-stage warm-up counts (GPipe is the case where every count is the number of micro-batches),
// with a delay on any link between adjacent stages. The model behind ADAPTRA / PipeMorph's
// schedule adaptation (docs/pipeline.md):
//   - stage i runs its ops one at a time in this order: w_i forwards, then backward and forward
//     alternately while forwards remain, then the remaining backwards;
//   - F(i, m) needs F(i-1, m)'s activation, B(i, m) needs B(i+1, m)'s gradient; a transfer over
//     link (i, i+1) takes that link's delay, in both directions. By default it does not occupy
//     either stage (communication off the compute's way); with `blocking_sends` the sender's
//     stage is held until its send has arrived, as an NCCL send on the compute stream holds the
//     kernels behind it (head-of-line blocking, docs/pipeline.md);
//   - w_i forwards before the first backward keep w_i activations alive at stage i, its peak.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace stragglar {

struct PipelineSpec {
  int microbatches = 0;
  std::vector<double> forward_s;     // per stage; its size is the number of stages (>= 2)
  std::vector<double> backward_s;    // per stage
  std::vector<double> link_delay_s;  // per link (i, i+1): stages - 1 entries
  bool blocking_sends = false;       // a send holds its stage until it has arrived

  int stages() const { return static_cast<int>(forward_s.size()); }
};

// InvalidArgument naming what is wrong: fewer than 2 stages, sizes that disagree, no
// micro-batch, a negative or non-finite time.
absl::Status ValidatePipelineSpec(const PipelineSpec& spec);

struct PipelineTiming {
  double iteration_s = 0;        // first forward's start to the last backward's end
  double bubble_fraction = 0;    // share of stages x iteration during which a stage is idle
  std::vector<double> finish_s;  // per stage, when its last backward ends
};

// One op of a stage's 1F1B order: a forward or a backward of micro-batch `microbatch`.
struct PipelineOp {
  bool forward = true;
  int microbatch = 0;
};
// Stage order with `warmup` forwards before the first backward: those forwards, then backward and
// forward alternately while forwards remain, then the remaining backwards.
std::vector<PipelineOp> StageOrder(int microbatches, int warmup);

// Simulates one iteration with warm-up counts `warmup` (one per stage, each in [1, microbatches]).
// InvalidArgument for a bad spec or count; FailedPrecondition when the counts deadlock (a stage
// needs more forwards from the stage before it than that stage runs before its own first
// backward: w_{i+1} > w_i), naming the stages.
absl::StatusOr<PipelineTiming> SimulatePipeline(const PipelineSpec& spec,
                                                absl::Span<const int> warmup);

// The warm-up counts of plain 1F1B: S - i at stage i, capped by the micro-batches and by
// `memory_microbatches` (activations a stage can hold; 0: unlimited).
std::vector<int> DefaultWarmup(const PipelineSpec& spec, int memory_microbatches);
// PipeMorph's closed form (its artifact's get_adapted_warmup_fwds): the last stage gets 1, stage i
// gets w_{i+1} + ceil(d_{i,i+1} / t_f,i) + 2; capped by the micro-batches, and by the memory as
// K - i at stage i (1F1B's spacing of one; at least 1).
std::vector<int> AdaptedWarmup(const PipelineSpec& spec, int memory_microbatches);

// A lower bound on the iteration time of any warm-up counts: for each stage, micro-batch 0's
// forward must reach it, it must run all its forwards and backwards, and its last gradient must
// travel back to stage 0. Exact for uniform 1F1B without delays.
double PipelineLowerBound(const PipelineSpec& spec);

}  // namespace stragglar
