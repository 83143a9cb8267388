// STRAGGLAR_* environment configuration, shared by the preload libraries (NCCL and MPI): the
// settings as read (PreloadConfig) and the readers. Each variable, what it accepts and its default
// is one row of runtime/settings.cc, which the readers run through; docs/architecture.md's
// "Environment (preload library)" holds the rows' table.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/log.h"
#include "kernels/plan/plan.h"
#include "pipeline/pipeline_schedule.h"
#include "policy/model/topology.h"
#include "policy/policy_config.h"
#include "policy/reports.h"
#include "policy/stragglar_shape.h"

namespace stragglar {

// A pipeline's stage times as configured, for the link advisor (docs/pipeline.md). Each time
// list holds one time for every stage or one per stage; the number of stages (the
// communicator's size) is known only later (PipelineSpecFor).
struct PipelineStageTimes {
  int microbatches = 0;            // STRAGGLAR_PIPELINE_MICROBATCHES: >= 1; 0: unset
  std::vector<double> forward_s;   // STRAGGLAR_PIPELINE_FORWARD: "10ms" or "10ms,12ms,..."
  std::vector<double> backward_s;  // STRAGGLAR_PIPELINE_BACKWARD: the same
  int memory_microbatches = 0;     // STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES: 0 (no limit) or more

  // Micro-batches, forward and backward all given: the advisor can run.
  bool complete() const { return microbatches > 0 && !forward_s.empty() && !backward_s.empty(); }

  friend bool operator==(const PipelineStageTimes&, const PipelineStageTimes&) = default;
};

// The spec of a pipeline of `stages` with these times (one time repeated over every stage) and no
// link delays; InvalidArgument naming the variable when a list's length is neither 1 nor
// `stages`, or when the times are incomplete.
absl::StatusOr<PipelineSpec> PipelineSpecFor(const PipelineStageTimes& times, int stages);

// Every rank of a communicator runs with rank 0's values of all but a few of these
// (runtime/agreed_settings.h).
struct PreloadConfig {
  RuntimeMode mode = RuntimeMode::kAdapt;  // STRAGGLAR_MODE=adapt|observe|off (case-insensitive)
  LogLevel debug = LogLevel::kWarn;  // STRAGGLAR_DEBUG=NONE|WARN|INFO|TRACE (case-insensitive)
  int epoch_calls = 64;              // STRAGGLAR_EPOCH_CALLS: integer in [1, 1000000]
  int64_t min_bytes = 256 << 10;     // STRAGGLAR_MIN_BYTES: ParseByteSize ("256KiB", "1MB", "0")
  std::string state_file;            // STRAGGLAR_STATE_FILE (any non-empty path)
  std::string trace_file;    // STRAGGLAR_TRACE_FILE (".json" suffix: Perfetto JSON, else CSV)
  std::string summary_file;  // STRAGGLAR_SUMMARY_FILE: end-of-run lag summary JSON
  // STRAGGLAR_PIPELINE_ADVICE_FILE: where the pipeline advisor writes its warm-up counts
  // (docs/pipeline.md), rewritten atomically; `stragglar pipeline-run` honours it.
  std::string pipeline_advice_file;
  // STRAGGLAR_LINK_PROFILING=on|off (case-insensitive), NCCL library only: time ncclSend and
  // ncclRecv per link, name a persistently slow link and advise warm-up counts (docs/pipeline.md).
  // Each communicator then shares rank 0's address for the link reports (TCP) at its creation.
  // Off by default until it has been checked on a GPU.
  bool link_profiling = false;
  // STRAGGLAR_LINK_ADDR: the IPv4 address rank 0 of a communicator gives the other ranks for the
  // link reports (TCP); default: the address its host name resolves to, else 127.0.0.1.
  std::string link_host;
  PipelineStageTimes pipeline;
  // STRAGGLAR_ALGORITHM=auto|native|ring|halving-doubling|stragglar|stragglar-log-depth|
  // stragglar-hierarchical (case-insensitive): a testing and benchmark knob. auto (default): the
  // policy decides; native: always the library's own collective; the others: always that plan.
  // stragglar runs the flat schedule, the other two StragglAR's log-depth and hierarchical plans
  // (ForcedPlanVariant), each in the shape the chooser would price for the size.
  enum class Forced {
    kAuto,
    kNative,
    kRing,
    kHalvingDoubling,
    kStragglar,
    kStragglarLogDepth,
    kStragglarHierarchical
  };
  Forced algorithm = Forced::kAuto;
  // STRAGGLAR_PROFILER=cupti|events (case-insensitive), NCCL library only: how GPU calls are
  // timed. cupti (default) falls back to CUDA events when CUPTI is unavailable; events never
  // takes the process's one CUPTI subscription, so that a profiler (Nsight, torch.profiler) can.
  bool prefer_cupti = true;
  // STRAGGLAR_STRAGGLER: the straggler of a forced stragglar plan (>= 0; unset: the last rank).
  // Only the backend knows the world size, so it checks the upper bound.
  std::optional<int> straggler;
  // STRAGGLAR_PIECES=auto|1..16: pieces per chunk of StragglAR's plans (a benchmark knob, like
  // STRAGGLAR_ALGORITHM). auto (0, default): the model's choice per message size
  // (Chooser::StragglarPieces); a number is capped so that (n-1)*pieces <= kMaxPipelinedPieces.
  int pieces = 0;
  // STRAGGLAR_TOPOLOGY=NxG: the machine, N nodes of G ranks numbered node by node (ParseTopology),
  // instead of what the library learns when a communicator is set up (ranks sharing memory for
  // MPI, host names for NCCL). For tests and for launchers that number ranks otherwise. Applies to
  // communicators of N*G ranks; others are set up as if it were unset (said once).
  std::optional<Topology> topology;
  // STRAGGLAR_MPI_SEGMENT, MPI library only: reduce transfers travel in messages of at most this
  // many bytes (ParseByteSize; a multiple of 16 up to 1 GiB, or 0 for one message), each added
  // while still in cache.
  int64_t mpi_segment_bytes = 256 << 10;
  // STRAGGLAR_MPI_NETWORK_MESSAGE=auto|SIZE, MPI library only: on a machine of nodes, transfers
  // with a peer on another node travel as messages of at most this many bytes (ParseByteSize; a
  // multiple of 16 up to 1 GiB, or 0 for none), all posted at once, so that none waits for a
  // rendezvous handshake (MpiExecutorOptions::network_message_bytes). auto (nullopt, default):
  // just below the TCP transport's eager limit where the MPI library has one (OpenMPI's
  // btl_tcp_eager_limit, read through MPI_T), else 0.
  std::optional<int64_t> mpi_network_message_bytes;
  // STRAGGLAR_QUEUES=rounds|per-class (case-insensitive), MPI library only: on a machine of
  // several nodes, plans run round by round (rounds, default) or on one queue per link class
  // (per-class: kernels/exec/mpi/mpi_link_class_queues.h), and the policy prices them as they run.
  bool per_class_queues = false;
  // STRAGGLAR_PRE_ARRIVAL=rounds|nccl (case-insensitive), NCCL library only: StragglAR's
  // pre-arrival ReduceScatter as the plan's send/recv rounds (rounds), or as NCCL's ReduceScatter
  // on a communicator of the ready ranks split off once per straggler (nccl): the library's own
  // collective, hence the name, which Placement::native_pre_arrival carries to the program.
  bool native_pre_arrival = false;
  // The device executor (docs/nccl.md "The device executor"), NCCL library only.
  //  - STRAGGLAR_EXECUTOR=nccl|device (case-insensitive): how plans run. nccl (default): each
  //    round is an NCCL group of send/recv plus our reduction kernels. device: one kernel per
  //    call over peer GPU memory, where every rank is on one host and every GPU can access every
  //    other's; elsewhere, or if setting it up fails, nccl (said once).
  //  - STRAGGLAR_IPC_BYTES: each rank's window (ParseByteSize, 1 MiB to 4 GiB; default 32 MiB).
  //    Larger calls run in slices. Each rank allocates it twice (its window and its scratch).
  //  - STRAGGLAR_IPC_TIMEOUT: how long the kernel waits for a peer before the call fails
  //    (ParseSeconds; 0 waits until the communicator is aborted; default 300 s).
  //  - STRAGGLAR_IPC_BLOCKS: CTAs per call (1 to 64; default 8).
  //  - STRAGGLAR_DEVICE_SCOPE=auto|system (case-insensitive): how far the kernel's signals
  //    reach. auto (default): the GPU's scope where every rank shares one GPU, the system's
  //    where a peer is another GPU (PeerWindows::signal_scope). system: always the system's,
  //    for measuring what the narrower scope saves.
  //  - STRAGGLAR_DEVICE_STAMPS=PREFIX (each rank its own): the kernel's own timeline of the last
  //    1024 calls, written when the communicator is destroyed to PREFIX-rank<R>.csv
  //    (kernels/exec/device/device_timeline.h); unset: none.
  bool device_executor = false;
  int64_t ipc_bytes = 32 << 20;
  double ipc_timeout_s = 300;
  int ipc_ctas = 8;
  bool device_system_scope = false;
  std::string device_stamps;
  // The call watchdog (runtime/call_watchdog.h; on NCCL, of the calls' GPU work:
  // runtime/nccl/nccl_call_watch.h):
  //  - STRAGGLAR_WARN_AFTER: a call that has waited this long gets one warning naming the rank
  //    and round it waits for where they are known (ParseSeconds up to a day; 0: never; default
  //    30 s).
  //  - STRAGGLAR_TIMEOUT: a call that has waited this long gets one line naming them, then rank 0
  //    writes the trace and summary and the job ends (MPI_Abort), or on NCCL the communicator is
  //    revoked and its calls fail from then on (0, the default: never).
  double warn_after_s = 30;
  double timeout_s = 0;

  friend bool operator==(const PreloadConfig&, const PreloadConfig&) = default;
};

// Every STRAGGLAR_* variable the preload libraries read (PreloadConfigFromEnv, StateFileFromEnv,
// MetricsEndpointFromEnv), so that `stragglar doctor` can name any other as unknown (a typo).
absl::Span<const absl::string_view> PreloadVariableNames();

// The plan family a forced algorithm runs (kernels/plan/plan.h); nullopt for auto and native.
std::optional<PlanFamily> ForcedPlanFamily(PreloadConfig::Forced algorithm);
// "auto", "native", or the family's name: "ring", "halving-doubling", "stragglar",
// "stragglar-log-depth", "stragglar-hierarchical".
absl::string_view ForcedAlgorithmName(PreloadConfig::Forced algorithm);
// The StragglAR family a forced algorithm runs; nullopt for auto, native, ring and
// halving-doubling.
std::optional<PlanVariant> ForcedPlanVariant(PreloadConfig::Forced algorithm);

// Reads every variable through `getenv` (nullptr: std::getenv). An unset or empty variable keeps
// the default. An invalid value keeps the default for that variable only (the others still
// apply) and writes one line naming the variable, the value and the accepted values, e.g.
//   STRAGGLAR_MODE="fast" is invalid (accepted: adapt, observe, off); using adapt
// to `log` when given (just that line), otherwise through LogAlways(kWarn, ...): configuration
// errors are printed whatever the log level, since the user must learn that a setting was
// ignored. Values are C-escaped in the line, so it stays one line.
PreloadConfig PreloadConfigFromEnv(const char* (*getenv)(const char*) = nullptr,
                                   std::ostream* log = nullptr);
// The same with the variables' values given (name -> value), e.g. rank 0's agreed settings
// (runtime/agreed_settings.h).
PreloadConfig PreloadConfigFromValues(const std::map<std::string, std::string>& values,
                                      std::ostream* log = nullptr);

// "adapt", "observe", "off": STRAGGLAR_MODE's values.
absl::string_view RuntimeModeName(RuntimeMode mode);

// STRAGGLAR_STATE_FILE as PreloadConfigFromEnv reads it (verbatim; empty when unset), for
// `stragglar run`, which honours it too.
std::string StateFileFromEnv(const char* (*getenv)(const char*) = nullptr);

// The RuntimeConfig for the core: mode, epoch_calls, min_bytes, state_file and pieces; the rest
// keeps RuntimeConfig's defaults. A forced algorithm is the backend's business (it bypasses the
// core's decisions, including for calls under min_bytes).
RuntimeConfig ToRuntimeConfig(const PreloadConfig& config);

// Applies STRAGGLAR_ALGORITHM (and STRAGGLAR_STRAGGLER, capped to the last rank) to the core's
// `decision` for a communicator of `num_ranks`. Returns whether the call runs the backend's own
// collective (NCCL's or MPI's AllReduce, Algorithm::kNative): for auto when the core chose it, and
// for native. A forced "ring" runs our Ring plan. A forced StragglAR
// family leaves `decision.shape` empty (the plan cache's default, the flat schedule): the caller
// sets the family's shape for the size (PlanCache::ShapeOfFamily).
bool ApplyForcedAlgorithm(const PreloadConfig& config, int num_ranks, CallDecision& decision);
// The same with STRAGGLAR_ALGORITHM's and STRAGGLAR_STRAGGLER's values given.
bool ApplyForcedAlgorithm(PreloadConfig::Forced forced, std::optional<int> straggler, int num_ranks,
                          CallDecision& decision);
// Whether STRAGGLAR_TRACE_FILE names a Perfetto JSON trace (".json" suffix, any case) rather
// than CSV.
bool TraceFileIsJson(absl::string_view path);

// One line for an INFO message at startup, e.g. "mode adapt, epoch 64 calls, min 256 KiB, debug
// WARN, algorithm auto, trace /tmp/t.json (Perfetto JSON)". Unset files are left out.
std::string DescribeConfig(const PreloadConfig& config);

// Where a process serves its metrics.
struct MetricsEndpoint {
  std::string address = "127.0.0.1";  // loopback unless configured otherwise
  int port = 0;
};

// The endpoint configured by STRAGGLAR_METRICS_PORT (the base port: a process serves on base +
// `local_rank`, so the ranks of a node do not collide) and STRAGGLAR_METRICS_ADDR. nullopt when
// the port is unset (no endpoint). An invalid value gives one line on `log` naming the variable
// and what it accepts, then the default: no endpoint for a bad port, loopback for a bad address.
// `getenv` is injectable for tests.
std::optional<MetricsEndpoint> MetricsEndpointFromEnv(int local_rank, std::ostream& log,
                                                      const char* (*getenv)(const char*) = nullptr);

}  // namespace stragglar
