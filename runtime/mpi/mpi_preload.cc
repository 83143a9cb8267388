// libstragglar_mpi.so: the runtime preloaded into unmodified MPI programs through the standard
// PMPI profiling interface. It defines MPI_Allreduce (and the lifecycle calls it needs); every
// other MPI function, and every call it does not handle, goes to the MPI library unchanged.
//
// Per communicator, at the first call it handles (a collective call, so every rank is there):
// a private duplicate for stragglar's own messages, a measured link model, and a RuntimeCore.
// Then, per call: Decide (identical on every rank), run either the MPI library's own Allreduce
// (the default algorithm, which the cost model prices as Ring and the calibration measures) or a
// plan over nonblocking point-to-point with our reduction kernels, and Record the timing. Every
// STRAGGLAR_EPOCH_CALLS calls the ranks allgather their timings at the same call index and absorb
// them, so they all switch together.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "exporters/prometheus_exporter.h"
#include "exporters/trace_recorder.h"
#include "kernels/mpi_executor.h"
#include "runtime/env_config.h"
#include "runtime/log.h"
#include "runtime/preload_common.h"
#include "runtime/runtime_core.h"
#include "runtime/state_file.h"

namespace stragglar {
namespace {

constexpr absl::string_view kBackend = "mpi";

double Now() {
  // CLOCK_MONOTONIC is one clock for every process of a host: arrivals compare across ranks there.
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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

std::optional<ReduceOp> MapOp(MPI_Op op) {
  if (op == MPI_SUM) return ReduceOp::kSum;
  if (op == MPI_PROD) return ReduceOp::kProd;
  if (op == MPI_MAX) return ReduceOp::kMax;
  if (op == MPI_MIN) return ReduceOp::kMin;
  return std::nullopt;
}

// Sends `text` from `root` to every rank of `comm`.
int BroadcastString(std::string& text, int root, int rank, MPI_Comm comm) {
  int64_t length = static_cast<int64_t>(text.size());
  if (int code = PMPI_Bcast(&length, 1, MPI_INT64_T, root, comm); code != MPI_SUCCESS) return code;
  if (rank != root) text.assign(length, '\0');
  return PMPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, root, comm);
}

// alpha and beta of `comm` as a plan sees them: one ring round (every rank sends to the next and
// receives from the previous) of tiny and of large messages. The slowest rank's numbers, so that
// every rank holds the same model and decides the same.
LinkModel MeasureMpiLink(MPI_Comm comm, int rank, int size, bool one_host) {
  constexpr int kLarge = 4 << 20;
  std::vector<std::byte> out(kLarge), in(kLarge);
  auto round = [&](int bytes, int repeats) {
    PMPI_Barrier(comm);
    const double start = Now();
    for (int i = 0; i < repeats; ++i) {
      PMPI_Sendrecv(out.data(), bytes, MPI_BYTE, (rank + 1) % size, 0, in.data(), bytes, MPI_BYTE,
                    (rank + size - 1) % size, 0, comm, MPI_STATUS_IGNORE);
    }
    return (Now() - start) / repeats;
  };
  round(kLarge, 1);  // first touch of the buffers and of the connections
  double measured[2] = {round(64, 16), round(kLarge, 2)};
  PMPI_Allreduce(MPI_IN_PLACE, measured, 2, MPI_DOUBLE, MPI_MAX, comm);
  // Ranks of one host share its cores: a round of `size` transfers runs size / cores at a time.
  const double lanes = one_host ? std::max(1u, std::thread::hardware_concurrency()) : 0;
  const double slowdown = lanes > 0 ? std::max(1.0, size / lanes) : 1.0;
  const double per_byte = std::max(measured[1] - measured[0], 1e-12) / kLarge / slowdown;
  return LinkModel{.alpha_s = std::max(measured[0], 1e-7),
                   .bandwidth_bytes_per_s = 1.0 / per_byte,
                   .shared_lanes = lanes};
}

// One communicator stragglar handles.
class CommState {
 public:
  CommState(MPI_Comm user, MPI_Comm own, int rank, int size, RuntimeCore core, std::string name,
            MpiExecutorOptions options)
      : user_(user),
        own_(own),
        rank_(rank),
        size_(size),
        core_(std::move(core)),
        name_(std::move(name)),
        options_(options) {}

  MPI_Comm own() const { return own_; }
  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  RuntimeCore& core() { return core_; }
  CommObservers& observers() { return observers_; }
  const std::shared_ptr<TraceRecorder>& recorder() const { return observers_.recorder(); }

  int AllReduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                DataType type, ReduceOp reduce_op, const PreloadConfig& config);
  // Exchanges a partial epoch (at finalize), so its calls reach the trace and the summary.
  void Flush();
  void SaveLearned(bool force);

 private:
  int Exchange();

  MPI_Comm user_;
  MPI_Comm own_;
  int rank_;
  int size_;
  RuntimeCore core_;
  std::string name_;
  CommObservers observers_;
  const MpiExecutorOptions options_;                  // the same on every rank (rank 0's)
  absl::flat_hash_set<const Plan*> described_plans_;  // rank 0, at INFO: logged on first use
  std::chrono::steady_clock::time_point last_save_{};
};

int CommState::AllReduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, DataType type, ReduceOp reduce_op,
                         const PreloadConfig& config) {
  const double arrival = Now();
  const int64_t bytes = static_cast<int64_t>(count) * DataTypeSize(type);
  // The default algorithm is the MPI library's own Allreduce unless our Ring is forced.
  const CallStart start = StartCall(core_, config, bytes, observers_, "MPI_Allreduce");
  const CallDecision& decision = start.decision;
  const bool native = start.native;

  int code = MPI_SUCCESS;
  if (native) {
    code = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, user_);
  } else {
    absl::StatusOr<const Plan*> plan = core_.PlanFor(decision, bytes);
    absl::Status status = plan.status();
    if (plan.ok() && rank_ == 0 && LogEnabled(LogLevel::kInfo) &&
        described_plans_.insert(*plan).second) {
      Log(LogLevel::kInfo, absl::StrCat(name_, ": ", DescribePlan(**plan, bytes)));
    }
    if (plan.ok()) {
      const MpiAllReduceArgs args{.send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf,
                                  .recv = recvbuf,
                                  .count = count,
                                  .type = type,
                                  .op = reduce_op};
      absl::StatusOr<RankProgram> program =
          LowerPlan(**plan, rank_, {.in_place = args.send == args.recv});
      status = program.ok() ? ExecuteProgramWithMpi(*program, args, options_, own_, &code)
                            : program.status();
    }
    if (!status.ok()) {
      Log(LogLevel::kWarn,
          absl::StrCat("MPI_Allreduce on ", name_, " (", AlgorithmName(decision.algorithm),
                       ") failed: ", status.message()));
      if (code == MPI_SUCCESS) code = MPI_ERR_INTERN;
    }
  }
  const CallTiming timing{.arrival_s = arrival, .duration_s = Now() - arrival};
  // Recorded even after an error, so that every rank's epoch stays at the same call index.
  core_.Record(timing, decision);
  for (const auto& observer : observers_.all()) observer->OnCall(rank_, decision, bytes, timing);
  if (code == MPI_SUCCESS && core_.ExchangeDue()) code = Exchange();
  if (code != MPI_SUCCESS && !native) {
    // What MPI itself does with an error: the communicator's handler decides (fatal by default).
    PMPI_Comm_call_errhandler(user_, code);
  }
  return code;
}

int CommState::Exchange() {
  const std::vector<double> mine = core_.EpochPayload();
  std::vector<double> all(mine.size() * size_);
  const int values = static_cast<int>(mine.size());
  if (int code =
          PMPI_Allgather(mine.data(), values, MPI_DOUBLE, all.data(), values, MPI_DOUBLE, own_);
      code != MPI_SUCCESS) {
    return code;
  }
  if (absl::Status status = core_.AbsorbEpoch(all); !status.ok()) {
    Log(LogLevel::kWarn, absl::StrCat("epoch exchange on ", name_, ": ", status.message()));
    return MPI_ERR_INTERN;
  }
  for (const auto& observer : observers_.all()) observer->OnEpoch(rank_, core_.last_epoch());
  if (LogEnabled(LogLevel::kTrace)) {
    const std::optional<int> straggler = core_.detector().straggler();
    Log(LogLevel::kTrace, absl::StrCat(name_, " epoch ", core_.epochs(), ": straggler ",
                                       straggler ? absl::StrCat(*straggler) : "none"));
  }
  SaveLearned(/*force=*/false);
  return MPI_SUCCESS;
}

void CommState::Flush() {
  if (core_.EpochPayload().empty()) return;
  (void)Exchange();
}

void CommState::SaveLearned(bool force) {
  if (rank_ != 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_save_ < std::chrono::seconds(10)) return;
  last_save_ = now;
  SaveLearnedState(core_, kBackend);
}

struct Global {
  std::mutex mutex;
  bool active = false;  // MPI initialized through us, and not off
  PreloadConfig config;
  int world_rank = 0;
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<MetricsServer> server;
  std::map<MPI_Comm, std::unique_ptr<CommState>> comms;
  bool traced = false;  // the communicator that traces and summarizes has been chosen
};

// Never destroyed: MPI programs may call into us from atexit handlers and other threads.
Global& G() {
  static Global* global = new Global;
  return *global;
}

void OnInit() {
  Global& g = G();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.config = PreloadConfigFromEnv();
  SetLogLevel(g.config.debug);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g.world_rank);
  SetLogRank(g.world_rank);
  if (g.config.mode == RuntimeMode::kOff) {
    Log(LogLevel::kInfo, "STRAGGLAR_MODE=off: every MPI call passes through");
    return;
  }
  // The node-local rank picks the metrics port (base + local rank). MPI_Init is collective over
  // the world, so this collective split is safe here.
  MPI_Comm node = MPI_COMM_NULL;
  int local_rank = 0;
  if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    PMPI_Comm_rank(node, &local_rank);
    PMPI_Comm_free(&node);
  }
  MetricsSetup metrics = StartMetricsFromEnv(local_rank);
  g.registry = std::move(metrics.registry);
  g.server = std::move(metrics.server);
  g.active = true;
  Log(LogLevel::kInfo, absl::StrCat("libstragglar_mpi: ", DescribeConfig(g.config)));
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

// Sender and receiver must cut a message alike, so every rank takes rank 0's segment size; a rank
// whose own setting differs says so (collective over `own`).
MpiExecutorOptions AgreedExecutorOptions(const PreloadConfig& config, MPI_Comm own, int rank) {
  int64_t segment_bytes = config.mpi_segment_bytes;
  PMPI_Bcast(&segment_bytes, 1, MPI_INT64_T, 0, own);
  if (segment_bytes != config.mpi_segment_bytes) {
    LogOnce(LogLevel::kWarn, "mpi-segment-differs",
            absl::StrCat("STRAGGLAR_MPI_SEGMENT differs across ranks: rank ", rank, " has ",
                         config.mpi_segment_bytes, " bytes, rank 0 ", segment_bytes,
                         "; every rank uses rank 0's"));
  }
  return {.reduce_segment_bytes = segment_bytes};
}

// The state of `comm`, created at its first handled call (collective: every rank is in the same
// MPI_Allreduce). nullptr: pass this communicator through (an inter-communicator, one rank, or
// setup failed).
CommState* StateFor(Global& g, MPI_Comm comm) {
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    auto it = g.comms.find(comm);
    if (it != g.comms.end()) return it->second.get();
  }
  int inter = 0, size = 0, rank = 0;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  std::unique_ptr<CommState> state;
  if (!inter && size >= 2) {
    MPI_Comm own = MPI_COMM_NULL;
    if (PMPI_Comm_dup(comm, &own) == MPI_SUCCESS) {
      MPI_Comm node = MPI_COMM_NULL;
      int node_size = 0;
      PMPI_Comm_split_type(own, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
      PMPI_Comm_size(node, &node_size);
      PMPI_Comm_free(&node);
      const bool one_host = node_size == size;
      RuntimeConfig config = ToRuntimeConfig(g.config);
      config.default_algorithm = Algorithm::kRing;  // priced as Ring; runs MPI's own Allreduce
      config.candidates = {Algorithm::kRing, Algorithm::kStragglar};
      config.lag_source = one_host ? LagSource::kArrivalClock : LagSource::kDuration;
      const LinkModel link = MeasureMpiLink(own, rank, size, one_host);
      if (rank == 0) Log(LogLevel::kInfo, absl::StrCat(CommName(comm), ": ", DescribeLink(link)));
      absl::StatusOr<RuntimeCore> core = RuntimeCore::Create(config, rank, size, link);
      if (core.ok()) {
        state = std::make_unique<CommState>(comm, own, rank, size, *std::move(core), CommName(comm),
                                            AgreedExecutorOptions(g.config, own, rank));
      } else {
        Log(LogLevel::kWarn, absl::StrCat("passing through: ", core.status().message()));
      }
    }
  }
  if (state != nullptr) {
    // The learned state: read on rank 0, broadcast, parsed by all, so all start from the same.
    const std::string& path = state->core().config().state_file;
    if (!path.empty()) {
      std::string text, machine = MachineId(kBackend), error;
      if (rank == 0) {
        absl::StatusOr<std::string> read = ReadStateText(path);
        if (read.ok())
          text = *std::move(read);
        else
          error = std::string(read.status().message());
      }
      BroadcastString(text, 0, rank, state->own());
      BroadcastString(machine, 0, rank, state->own());
      if (!text.empty()) {
        absl::StatusOr<LearnedState> learned = ParseState(text, path, size, machine);
        if (learned.ok()) {
          (void)state->core().ImportState(*learned);
          if (rank == 0) Log(LogLevel::kInfo, absl::StrCat("loaded the learned state ", path));
        } else if (rank == 0) {
          Log(LogLevel::kWarn, absl::StrCat(learned.status().message(), "; starting fresh"));
        }
      } else if (rank == 0) {
        Log(LogLevel::kInfo, absl::StrCat(error, "; starting fresh"));
      }
    }
    std::lock_guard<std::mutex> lock(g.mutex);
    if (g.registry != nullptr) {
      state->observers().Add(std::make_shared<PrometheusObserver>(*g.registry, state->name(), size,
                                                                  std::vector<int>{rank}));
    }
    // The trace and the end-of-run summary follow the first world-sized communicator.
    int compare = MPI_UNEQUAL;
    PMPI_Comm_compare(comm, MPI_COMM_WORLD, &compare);
    if (!g.traced && (compare == MPI_IDENT || compare == MPI_CONGRUENT)) {
      g.traced = true;
      state->observers().SetRecorder(std::make_shared<TraceRecorder>(0));
    }
  }
  std::lock_guard<std::mutex> lock(g.mutex);
  return g.comms.emplace(comm, std::move(state)).first->second.get();
}

// Rank 0 of the traced communicator writes the trace and the summary.
void WriteOutputs(Global& g, CommState& state) {
  const std::shared_ptr<TraceRecorder>& recorder = state.recorder();
  if (recorder == nullptr || state.rank() != 0) return;
  WriteRunOutputs(*recorder, g.config, state.name(), "stragglar (MPI)");
}

void OnFinalize() {
  Global& g = G();
  if (!g.active) return;
  for (auto& [comm, state] : g.comms) {
    if (state == nullptr) continue;
    // Only the traced communicator spans the world, so only its ranks all reach this point
    // together: the one safe place for a last, partial exchange.
    if (state->recorder() != nullptr) state->Flush();
    state->SaveLearned(/*force=*/true);
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

int MPI_Comm_free(MPI_Comm* comm) {
  stragglar::Global& g = G();
  if (comm != nullptr && g.active) {
    std::unique_ptr<stragglar::CommState> state;
    {
      std::lock_guard<std::mutex> lock(g.mutex);
      auto it = g.comms.find(*comm);
      if (it != g.comms.end()) {
        state = std::move(it->second);
        g.comms.erase(it);
      }
    }
    if (state != nullptr) {
      // MPI_Comm_free is collective, so freeing our duplicate here keeps the ranks in step.
      state->SaveLearned(/*force=*/true);
      stragglar::WriteOutputs(g, *state);
      MPI_Comm own = state->own();
      PMPI_Comm_free(&own);
    }
  }
  return PMPI_Comm_free(comm);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  stragglar::Global& g = G();
  if (!g.active || count <= 0 || comm == MPI_COMM_NULL) {
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
  return state->AllReduce(sendbuf, recvbuf, count, datatype, op, *type, *reduce_op, g.config);
}

}  // extern "C"
