// libstragglar_mpi.so: the runtime preloaded into unmodified MPI programs through the standard
// PMPI profiling interface. It defines MPI_Allreduce (and the lifecycle calls it needs); every
// other MPI function, and every call it does not handle, goes to the MPI library unchanged.
//
// Per communicator, at the first call it handles (a collective call, so every rank is there): a
// private duplicate for stragglar's own messages (runtime/mpi/mpi_backend.h) and the communicator
// protocol every backend runs (runtime/communicator.h: decisions identical on every rank, the
// MPI library's own Allreduce for the default algorithm, priced as Ring, or a plan over
// point-to-point; every STRAGGLAR_EPOCH_CALLS calls an allgather of every rank's timings at the
// same call index, so that they all switch together).
//
// The state hangs on the communicator as an MPI attribute, not in a table keyed by its handle: the
// library calls the attribute's delete function when the communicator ends, by MPI_Comm_free,
// MPI_Comm_disconnect or MPI_Finalize, and a later communicator that gets the same handle starts
// without it. Duplicates of a communicator do not inherit it (MPI_COMM_NULL_COPY_FN).
//
// Threads: the thread level is the program's. Nothing here initializes MPI or its tool interface
// at another level (TcpEagerLimit asks for the level MPI_Query_thread gives). The process-wide
// state is under Global::mutex; a communicator's state is used by one thread at a time, as MPI
// requires of collective calls on one communicator.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "base/units.h"
#include "kernels/exec/library_code.h"
#include "kernels/exec/mpi/mpi_executor.h"
#include "runtime/agreed_settings.h"
#include "runtime/call_watchdog.h"
#include "runtime/communicator.h"
#include "runtime/env_config.h"
#include "runtime/mpi/comm_layout.h"
#include "runtime/mpi/host_call_counts.h"
#include "runtime/mpi/link_cache.h"
#include "runtime/mpi/mpi_backend.h"
#include "runtime/preload_common.h"
#include "runtime/preload_process.h"
#include "runtime/version.h"

namespace stragglar {
namespace {

constexpr absl::string_view kBackend = "mpi";

// The predefined types whose elements our kernels reduce; anything else (derived types, pairs,
// complex, 16-bit integers, MPI_CHAR) passes through.
std::optional<DataType> MapType(MPI_Datatype type) {
  if (type == MPI_FLOAT) return DataType::kFloat32;
  if (type == MPI_DOUBLE) return DataType::kFloat64;
  if (type == MPI_INT || type == MPI_INT32_T) return DataType::kInt32;
  if (type == MPI_UNSIGNED || type == MPI_UINT32_T) return DataType::kUint32;
  if (type == MPI_INT64_T || type == MPI_LONG_LONG || type == MPI_LONG_LONG_INT ||
      (type == MPI_LONG && sizeof(long) == 8)) {
    return DataType::kInt64;
  }
  if (type == MPI_UINT64_T || type == MPI_UNSIGNED_LONG_LONG ||
      (type == MPI_UNSIGNED_LONG && sizeof(unsigned long) == 8)) {
    return DataType::kUint64;
  }
  if (type == MPI_INT8_T || type == MPI_SIGNED_CHAR) return DataType::kInt8;
  if (type == MPI_UINT8_T || type == MPI_UNSIGNED_CHAR) return DataType::kUint8;
  return std::nullopt;
}

// MPI's max and min keep a NaN, as the library's own do wherever a NaN meets the accumulated value
// (their order decides otherwise, and every rank must end with the same bytes).
std::optional<ReduceOp> MapOp(MPI_Op op) {
  if (op == MPI_SUM) return ReduceOp::kSum;
  if (op == MPI_PROD) return ReduceOp::kProd;
  if (op == MPI_MAX) return ReduceOp::kMaxNan;
  if (op == MPI_MIN) return ReduceOp::kMinNan;
  return std::nullopt;
}

// One communicator stragglar handles: its backend, and the protocol over it.
struct CommState {
  MPI_Comm user = MPI_COMM_NULL;
  std::unique_ptr<MpiBackend> backend;
  std::unique_ptr<Communicator> comm;  // after `backend`, which it uses
  MpiExecutorOptions options;          // the same on every rank (rank 0's)
  CallProgress progress;               // the call in progress, for the watchdog
  // Calls entered, here and (host_calls, null where shared memory failed) by every rank of this
  // host, so that the watchdog can name the host's ranks absent from the library's own call.
  std::atomic<int64_t> calls{0};
  std::unique_ptr<HostCallCounts> host_calls;
  bool whole_comm_on_host = false;
  // Raised when a call could not finish on some rank (kernels/exec/mpi/mpi_alarm.h). From then on
  // `own`'s messages are out of step, and every call passes through (`broken`).
  std::unique_ptr<MpiAlarm> alarm;
  bool broken = false;

  // For the watchdog's thread: who of this host has not entered the call in progress.
  std::string AbsentRanks() const;

  int AllReduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                DataType type, ReduceOp reduce_op);
};

int CommState::AllReduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, DataType type, ReduceOp reduce_op) {
  const MpiAlarm::Entry entry = alarm->Enter();
  if (entry != MpiAlarm::Entry::kRun && !broken) {
    Log(LogLevel::kWarn, absl::StrCat(comm->name(),
                                      ": a call failed on some rank (counts that differ across "
                                      "ranks?); every later call passes through"));
  }
  if (entry == MpiAlarm::Entry::kFailed) {
    // Its peers have returned from this call: passed to the library, it would wait for them.
    broken = true;
    const int code = LibraryCode(MpiAlarm::Interrupted()).value_or(MPI_ERR_INTERN);
    PMPI_Comm_call_errhandler(user, code);
    return code;
  }
  if (broken || entry == MpiAlarm::Entry::kPassThrough) {
    broken = true;
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, user);
  }
  const AllReduceArgs args{.send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf,
                           .recv = recvbuf,
                           .count = count,
                           .type = type,
                           .op = reduce_op};
  MpiAllReduceWork work(sendbuf, recvbuf, count, datatype, op, user, args, options, backend->own(),
                        &progress, alarm.get());
  const int64_t entered = calls.fetch_add(1, std::memory_order_relaxed) + 1;
  if (host_calls != nullptr) host_calls->Entered(entered);
  progress.Start();
  const absl::StatusOr<CallDecision> ran =
      comm->AllReduce(static_cast<int64_t>(count) * DataTypeSize(type),
                      /*in_place=*/args.send == args.recv, work);
  progress.Finish();
  if (ran.ok()) return MPI_SUCCESS;
  broken = broken || alarm->Raised();
  // The edge: MPI's own code where MPI failed, else an internal error.
  const int code = LibraryCode(ran.status()).value_or(MPI_ERR_INTERN);
  // What MPI itself does with an error: the communicator's handler decides (fatal by default).
  // The library's own Allreduce has called it already.
  if (!work.ran_native()) PMPI_Comm_call_errhandler(user, code);
  return code;
}

std::string CommState::AbsentRanks() const {
  const std::string elsewhere = whole_comm_on_host ? "" : "; ranks on other hosts: not known here";
  if (host_calls == nullptr) return "which ranks have not entered it is not known here";
  const std::vector<int> behind = host_calls->Behind(calls.load(std::memory_order_relaxed));
  if (behind.empty()) return absl::StrCat("every rank of this host has entered it", elsewhere);
  return absl::StrCat(behind.size() == 1 ? "rank " : "ranks ", absl::StrJoin(behind, ", "),
                      behind.size() == 1 ? " has" : " have", " not entered it", elsewhere);
}

struct Global {
  std::mutex mutex;
  std::atomic<bool> active{false};  // MPI initialized through us, and not off
  int world_rank = 0;
  // The attribute that carries each communicator's CommState (MPI_KEYVAL_INVALID until OnInit).
  int keyval = MPI_KEYVAL_INVALID;
  std::vector<int> world_nodes;  // runtime/mpi/comm_layout.h, gathered at MPI_Init
  LinkCache links;
  // Every live state, owned here; the attributes point into it. A communicator passed through
  // keeps a state without `comm`, so that it is looked at once.
  std::map<CommState*, std::unique_ptr<CommState>> comms;
  // The settings, metrics, the watchdog over every communicator's calls, and the outputs. After
  // `comms`, so that its watchdog stops before the states it reads go.
  PreloadProcess process{"stragglar (MPI)"};
};

// Never destroyed: MPI programs may call into us from atexit handlers and other threads.
Global& G() {
  static Global* global = new Global;
  return *global;
}

// Room left in an eager message for the MPI library's own header (OpenMPI's match header is 14
// bytes; its eager limit counts it).
constexpr int64_t kEagerHeaderBytes = 64;

// STRAGGLAR_MPI_NETWORK_MESSAGE, auto: just below the TCP transport's eager limit, in whole
// 16-byte units; 0 (whole messages) where the library has no such limit.
int64_t NetworkMessageBytes(const PreloadConfig& config) {
  if (config.mpi_network_message_bytes.has_value()) return *config.mpi_network_message_bytes;
  const std::optional<int64_t> eager = TcpEagerLimit();
  if (!eager.has_value() || *eager <= kEagerHeaderBytes + 16) return 0;
  return (*eager - kEagerHeaderBytes) / 16 * 16;
}

// Whether a transfer may cross nodes, and so be cut into network messages: the world's ranks are
// on more than one node, or STRAGGLAR_TOPOLOGY makes nodes of them (runtime/preload_common.h,
// TopologyOfNodes), or the nodes are unknown.
bool MayCrossNodes(const PreloadConfig& config, const std::vector<int>& world_nodes) {
  return config.topology.has_value() || world_nodes.empty() ||
         std::count(world_nodes.begin(), world_nodes.end(), world_nodes.front()) !=
             static_cast<std::ptrdiff_t>(world_nodes.size());
}

// This rank's settings, then rank 0's (runtime/agreed_settings.h), over the world: every
// communicator's ranks then run alike. nullopt when any rank could not agree (said once): then
// every rank passes every call through. Collective over MPI_COMM_WORLD, as MPI_Init is.
std::optional<PreloadConfig> AgreedConfig(const PreloadConfig& mine, int world_rank) {
  absl::StatusOr<PreloadConfig> agreed = AgreeWithRankZero(mine, world_rank, [](std::string& text) {
    return BroadcastTextFromRankZero(MPI_COMM_WORLD, text);
  });
  int all_agreed = agreed.ok() ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &all_agreed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all_agreed == 1) return *std::move(agreed);
  Log(LogLevel::kWarn,
      absl::StrCat("every MPI call passes through: the ranks could not agree on their settings",
                   agreed.ok() ? "" : absl::StrCat(" (", agreed.status().message(), ")")));
  return std::nullopt;
}

void WriteOutputs(Global& g, CommState& state);
int DeleteState(MPI_Comm comm, int keyval, void* attribute, void* extra);

// STRAGGLAR_TIMEOUT, on the watchdog's thread, after its line: rank 0 writes the trace and
// summary of the calls so far, then ends the job. The other ranks wait a little first, so that
// rank 0, stuck in the same call, gets to write them. The calling thread is inside MPI; the
// outputs are read from what finished calls recorded.
void EndOnTimeout() {
  Global& g = G();
  if (g.world_rank == 0) {
    std::unique_lock<std::mutex> lock(g.mutex, std::try_to_lock);
    if (lock.owns_lock()) {
      for (auto& [key, state] : g.comms) WriteOutputs(g, *state);
    }
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_OTHER);
}

void OnInit() {
  Global& g = G();
  std::lock_guard<std::mutex> lock(g.mutex);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g.world_rank);
  SetLogRank(g.world_rank);
  BuildInfo build{.version = std::string(StragglarVersion()),
                  .backend = "mpi",
                  .backend_version = MpiLibraryVersion()};
  std::optional<PreloadConfig> agreed =
      AgreedConfig(ConfigureFromEnv("libstragglar_mpi.so", build.backend_version), g.world_rank);
  if (!agreed.has_value()) return;
  if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, DeleteState, &g.keyval, nullptr) !=
      MPI_SUCCESS) {
    Log(LogLevel::kWarn, "every MPI call passes through: MPI_Comm_create_keyval failed");
    return;
  }
  if (agreed->mode == RuntimeMode::kOff) {
    g.process.Configure(*std::move(agreed), std::move(build));
    Log(LogLevel::kInfo, "STRAGGLAR_MODE=off: every MPI call passes through");
    return;
  }
  // Every world rank's node, once (MPI_Init is collective over the world): each communicator's
  // layout then needs no collective. The node-local rank picks the metrics port (base + local
  // rank).
  g.world_nodes = GatherWorldNodes();
  // STRAGGLAR_MPI_NETWORK_MESSAGE=auto, read from the MPI library only where a transfer may cross
  // nodes: reading it starts OpenMPI's tool interface, which opens every component of every
  // framework, 0.4 s of an 8-rank job's start on one 2-core host (0.70 s against 1.10 s in
  // MPI_Init, docs/results/test-time-2026-12-01.md). Then agreed again, as rank 0 read it: ranks
  // whose libraries have different eager limits must still cut messages alike. Where no
  // transfer crosses nodes the size is never used (MpiExecutorOptions::ranks_per_node is 0).
  if (!agreed->mpi_network_message_bytes.has_value() && MayCrossNodes(*agreed, g.world_nodes)) {
    agreed->mpi_network_message_bytes = NetworkMessageBytes(*agreed);
    agreed = AgreedConfig(*agreed, g.world_rank);
    if (!agreed.has_value()) return;
  }
  g.process.Configure(*std::move(agreed), std::move(build));
  const int local_rank =
      static_cast<int>(g.world_nodes.empty()
                           ? 0
                           : std::count(g.world_nodes.begin(), g.world_nodes.begin() + g.world_rank,
                                        g.world_nodes[g.world_rank]));
  g.process.Start(local_rank, [](const std::string&) { EndOnTimeout(); });
  g.active = true;
}

std::string CommName(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD) return "world";
  char name[MPI_MAX_OBJECT_NAME] = {};
  int length = 0;
  PMPI_Comm_get_name(comm, name, &length);
  std::string text(name, length);
  // Labels stay short and ASCII; OpenMPI's default names carry the context id every rank shares.
  for (char& c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return text.empty() ? "comm" : text;
}

// STRAGGLAR_QUEUES=per-class: on a machine of nodes the executor runs one queue per link class
// and the policy prices plans that way; on one node there is one class, so rounds it is.
void UsePerClassQueues(RuntimeConfig& runtime, MpiExecutorOptions& executor,
                       absl::string_view comm) {
  if (!runtime.topology.has_value() || !runtime.topology->multi_node()) {
    LogOnce(LogLevel::kInfo, "queues-one-node",
            absl::StrCat(comm,
                         ": STRAGGLAR_QUEUES=per-class on one node: plans run round by "
                         "round"));
    return;
  }
  runtime.per_class_queues = true;
  executor.per_class_queues = true;
  Log(LogLevel::kInfo, absl::StrCat(comm, ": plans run on one queue per link class"));
}

// The state of `comm`, created at its first handled call (collective: every rank is in the same
// MPI_Allreduce) and kept as its attribute. nullptr: pass this communicator through (an
// inter-communicator, one rank, or setup failed).
CommState* StateFor(Global& g, MPI_Comm comm) {
  void* attribute = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, g.keyval, &attribute, &found) != MPI_SUCCESS) return nullptr;
  if (found) {
    auto* known = static_cast<CommState*>(attribute);
    return known->comm != nullptr ? known : nullptr;
  }
  int inter = 0, size = 0, rank = 0;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  auto state = std::make_unique<CommState>();
  state->user = comm;
  MPI_Comm own = MPI_COMM_NULL;
  if (!inter && size >= 2 && PMPI_Comm_dup(comm, &own) == MPI_SUCCESS) {
    // The ranks that share memory with this one, from the world's nodes (or, for ranks of
    // another world, gathered: every rank of `comm` takes the same way).
    std::optional<CommLayout> known = LayoutFromWorld(comm, g.world_nodes);
    const CommLayout layout =
        known.has_value() ? *std::move(known) : GatheredLayout(own, HostNodeId());
    state->host_calls = HostCallCounts::Create(own, layout.host_ranks);
    const bool one_host = layout.whole_comm_on_host();
    state->whole_comm_on_host = one_host;
    CommOptions options = PreloadCommOptions(g.process.config(), kBackend, "MPI_Allreduce",
                                             CommName(comm), LagSource::kArrivalClock);
    // Hosts have clocks of their own: the exchange puts the arrivals on rank 0's.
    options.align_clocks = !one_host;
    // Ranks of one host share its cores: a round of `size` transfers runs size / cores at a time.
    options.probe = {
        .small_repeats = 16,
        .large_repeats = 1,
        .large_batches = 3,
        .shared_lanes = one_host ? std::max(1u, std::thread::hardware_concurrency()) : 0.0,
        // Ranks with links of their own (hosts): a slow one is priced, and StragglAR run around
        // it where that is faster (runtime/link_probe.h).
        .find_slow_rank = !one_host};
    state->backend = std::make_unique<MpiBackend>(own, rank, size);
    absl::StatusOr<std::unique_ptr<MpiAlarm>> alarm = MpiAlarm::Post(own);
    state->alarm = alarm.ok() ? *std::move(alarm) : nullptr;
    const int64_t network_message_bytes = g.process.config().mpi_network_message_bytes.value_or(0);
    state->options = {.reduce_segment_bytes = g.process.config().mpi_segment_bytes,
                      .network_message_bytes = network_message_bytes};
    const std::optional<Topology> topology =
        TopologyOfNodes(g.process.config(), layout.node_of_rank, CommName(comm));
    options.runtime.topology = topology;
    if (topology.has_value()) {
      state->options.ranks_per_node = topology->ranks_per_node;
      if (network_message_bytes > 0) {
        Log(LogLevel::kInfo,
            absl::StrCat(CommName(comm), ": transfers between nodes in messages of at most ",
                         FormatBytes(static_cast<double>(network_message_bytes))));
      }
    }
    if (g.process.config().per_class_queues)
      UsePerClassQueues(options.runtime, state->options, CommName(comm));
    // The links of an earlier communicator of this shape, if every rank has them; else probed.
    const LinkShape shape{
        .ranks = size, .nodes = topology.has_value() ? topology->nodes : 1, .one_host = one_host};
    if (std::optional<ProbedLinks> links = g.links.Agreed(own, shape); links.has_value()) {
      options.link = links->intra_node;
      options.link_speeds = links->rank_speeds;
      if (links->inter_node.has_value()) options.runtime.inter_node_link = *links->inter_node;
    }
    const bool probes = !options.link.has_value();
    absl::StatusOr<std::unique_ptr<Communicator>> created =
        Communicator::Create(rank, size, std::move(options), *state->backend);
    if (created.ok() && state->alarm == nullptr) {
      created = absl::InternalError("the call alarm's receive could not be posted");
    }
    if (created.ok()) {
      state->comm = *std::move(created);
      std::optional<LinkModel> between;
      if (topology.has_value()) between = state->comm->core().config().inter_node_link;
      const ProbedLinks links{.intra_node = state->comm->link(),
                              .inter_node = between,
                              .rank_speeds = state->comm->core().link_speeds()};
      if (probes) g.links.Keep(own, shape, links);
      state->comm->observers().Add(std::make_shared<LinkCacheUpdater>(g.links, own, shape, links));
    } else {
      Log(LogLevel::kWarn, absl::StrCat("passing through: ", created.status().message()));
      state->backend.reset();
      state->alarm.reset();
      PMPI_Comm_free(&own);
    }
  }
  std::lock_guard<std::mutex> lock(g.mutex);
  if (state->comm != nullptr) {
    // The trace and the end-of-run summary follow the first world-sized communicator.
    int compare = MPI_UNEQUAL;
    PMPI_Comm_compare(comm, MPI_COMM_WORLD, &compare);
    g.process.AddObservers(*state->comm, size,
                           /*may_trace=*/compare == MPI_IDENT || compare == MPI_CONGRUENT);
    if (g.process.watchdog() != nullptr) {
      g.process.watchdog()->Watch(&state->progress, CommName(comm),
                                  [state = state.get()] { return state->AbsentRanks(); });
    }
  }
  CommState* const kept = state.get();
  g.comms.emplace(kept, std::move(state));
  PMPI_Comm_set_attr(comm, g.keyval, kept);
  return kept->comm != nullptr ? kept : nullptr;
}

// The attribute's delete function: `comm` ends (MPI_Comm_free, MPI_Comm_disconnect, or
// MPI_Finalize for the predefined ones), collectively, so freeing our duplicate here keeps the
// ranks in step. After OnFinalize the states are gone and nothing is left to do.
int DeleteState(MPI_Comm, int, void* attribute, void*) {
  Global& g = G();
  std::unique_ptr<CommState> state;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    auto it = g.comms.find(static_cast<CommState*>(attribute));
    if (it == g.comms.end()) return MPI_SUCCESS;
    state = std::move(it->second);
    g.comms.erase(it);
  }
  if (state->comm == nullptr) return MPI_SUCCESS;
  if (g.process.watchdog() != nullptr) g.process.watchdog()->Unwatch(&state->progress);
  state->comm->Close();
  WriteOutputs(g, *state);
  MPI_Comm own = state->backend->own();
  state->comm.reset();
  state->alarm.reset();  // its receive cancelled before its communicator goes
  PMPI_Comm_free(&own);
  return MPI_SUCCESS;
}

// Rank 0 of the traced communicator writes the trace and the summary.
void WriteOutputs(Global& g, CommState& state) {
  if (state.comm != nullptr) g.process.WriteOutputs(*state.comm);
}

// The communicators still alive: their last outputs, then their states go (their duplicates stay,
// for MPI_Finalize to end). Their attributes' delete functions, if the library calls them, find
// nothing left.
void OnFinalize() {
  Global& g = G();
  if (!g.active) return;
  g.process.EndWatchdog();  // no call is in progress from here on
  std::map<CommState*, std::unique_ptr<CommState>> comms;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    comms.swap(g.comms);
  }
  for (auto& [key, state] : comms) {
    if (state->comm == nullptr) continue;
    // Only the traced communicator spans the world, so only its ranks all reach this point
    // together: the one safe place for a last, partial exchange.
    if (state->comm->observers().recorder() != nullptr) (void)state->comm->Flush();
    state->comm->Close();
    WriteOutputs(g, *state);
  }
  g.active = false;
}

}  // namespace
}  // namespace stragglar

using stragglar::G;

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  const int code = PMPI_Init(argc, argv);
  if (code == MPI_SUCCESS) stragglar::OnInit();
  return code;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int code = PMPI_Init_thread(argc, argv, required, provided);
  if (code == MPI_SUCCESS) stragglar::OnInit();
  return code;
}

int MPI_Finalize(void) {
  stragglar::OnFinalize();
  return PMPI_Finalize();
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  stragglar::Global& g = G();
  // Erroneous buffers go to the library, which says so as MPI does (MPI_ERR_BUFFER, to the
  // communicator's error handler): MPI_IN_PLACE as the receive buffer, or one buffer for both
  // without MPI_IN_PLACE.
  const bool erroneous_buffers =
      recvbuf == MPI_IN_PLACE || (sendbuf == recvbuf && sendbuf != nullptr);
  if (!g.active || count <= 0 || comm == MPI_COMM_NULL || erroneous_buffers) {
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  const std::optional<stragglar::DataType> type = stragglar::MapType(datatype);
  const std::optional<stragglar::ReduceOp> reduce_op = stragglar::MapOp(op);
  if (!type.has_value() || !reduce_op.has_value()) {
    stragglar::LogOnce(stragglar::LogLevel::kInfo, "unsupported",
                       "MPI_Allreduce with a type or op stragglar does not reduce (derived or "
                       "user-defined): passed through");
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  stragglar::CommState* state = stragglar::StateFor(g, comm);
  if (state == nullptr) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  return state->AllReduce(sendbuf, recvbuf, count, datatype, op, *type, *reduce_op);
}

}  // extern "C"
