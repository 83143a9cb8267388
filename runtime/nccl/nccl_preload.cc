// libstragglar.so: the runtime preloaded (LD_PRELOAD) into unmodified NCCL jobs. It defines
// ncclAllReduce and the communicator lifecycle, and reaches the real NCCL through its profiling
// names (runtime/nccl/nccl_api.h); its own traffic uses them too, so it never re-enters itself.
// Every function it does not define goes to NCCL directly, and errors from NCCL or CUDA are
// returned to the caller unchanged.
//
// Per communicator, at the first call it handles (a collective call, so every rank is in it): the
// NCCL backend (runtime/nccl/nccl_backend.h) and the communicator protocol every backend runs
// (runtime/communicator.h): a measured link model and the learned state, agreed on by all ranks;
// per call, everything enqueued on the user's stream without waiting for the GPU: the decision
// (identical on every rank), NCCL's own AllReduce (the default algorithm, priced as Ring) or a
// plan over NCCL send/recv and our CUDA kernels, bracketed by the GPU call timer (CUPTI, or CUDA
// events). A call's timing exists only once the GPU has run it, so the protocol defers the epoch
// exchange: decisions lag the measurements by one epoch, identically on every rank.
//
// Passed through untouched: STRAGGLAR_MODE=off, calls inside a user's ncclGroupStart/End, during
// CUDA graph capture, PreMulSum ops, fp8 types, calls under STRAGGLAR_MIN_BYTES, non-blocking
// communicators and communicators of one rank.
//
// With STRAGGLAR_LINK_PROFILING=on, ncclSend and ncclRecv go to NCCL unchanged and are timed per
// link (runtime/nccl/nccl_link_groups.h); at each blocking communicator's creation rank 0 shares
// the address of its link report exchange (TCP) on it.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "kernels/cuda/device_scope.h"
#include "profiler/gpu_timer.h"
#include "runtime/agreed_settings.h"
#include "runtime/call_gate.h"
#include "runtime/call_watchdog.h"
#include "runtime/communicator.h"
#include "runtime/env_config.h"
#include "runtime/nccl/nccl_api.h"
#include "runtime/nccl/nccl_backend.h"
#include "runtime/nccl/nccl_call_watch.h"
#include "runtime/nccl/nccl_codes.h"
#include "runtime/nccl/nccl_comm_state.h"
#include "runtime/nccl/nccl_link_groups.h"
#include "runtime/nccl/nccl_links.h"
#include "runtime/nccl/nccl_text_broadcast.h"
#include "runtime/preload_common.h"
#include "runtime/preload_process.h"
#include "runtime/version.h"

namespace stragglar {
namespace {

constexpr absl::string_view kBackend = "nccl";

// The largest settings text a communicator's creation shares (runtime/agreed_settings.h): every
// value but STRAGGLAR_STATE_FILE's is short, and a path is at most PATH_MAX (4096) bytes.
constexpr size_t kSettingsBytes = 16 << 10;

struct Global {
  std::mutex mutex;
  // The settings, metrics, the watchdog over every handled communicator's calls (null when
  // STRAGGLAR_WARN_AFTER and STRAGGLAR_TIMEOUT are off; stopped at exit, before CUDA goes), and
  // the outputs.
  PreloadProcess process{"stragglar (NCCL)"};
  std::once_flag configured;
  std::once_flag timer_once;
  std::unique_ptr<GpuCallTimer> timer;
  // nullptr: pass this one through. Shared with the calls in progress on it, so that a
  // communicator aborted from another thread lives until they return.
  std::map<ncclComm_t, std::shared_ptr<CommState>> comms;
  // Per communicator created outside a group: the settings agreed with its rank 0 at its
  // creation. Communicators without (created inside ncclGroupStart/End, or by ncclCommInitAll)
  // use this process's settings until their first handled call agrees on the rest.
  std::map<ncclComm_t, std::shared_ptr<const PreloadConfig>> agreed;
  std::set<ncclComm_t> nonblocking;  // created with blocking = 0: passed through
  int next_comm_index = 0;
  // STRAGGLAR_LINK_PROFILING=on: per communicator created since, in creation order ("p2p0", ...).
  // Shared: a call in progress keeps its communicator's profiling alive while another thread
  // aborts the communicator (PyTorch's watchdog does).
  std::map<ncclComm_t, std::shared_ptr<NcclLinks>> links;
  int next_links_index = 0;
};

// Never destroyed: NCCL calls may come from other threads while the process exits.
Global& G() {
  static Global* global = new Global;
  return *global;
}

void WriteOutputsAtExit();

const PreloadConfig& Config() {
  Global& g = G();
  std::call_once(g.configured, [&g] {
    PreloadConfig config = ConfigureFromEnv("libstragglar.so", NcclVersionText(Api()));
    if (config.per_class_queues) {
      LogAlways(
          LogLevel::kWarn,
          "STRAGGLAR_QUEUES=per-class is the MPI library's; the NCCL library runs plans round "
          "by round");
    }
    g.process.Configure(std::move(config), {.version = std::string(StragglarVersion()),
                                            .backend = "nccl",
                                            .backend_version = NcclVersionNumber(Api())});
    if (g.process.config().mode != RuntimeMode::kOff) {
      // Every communicator is watched with its own ending: the process is the user's.
      g.process.Start(LocalRankFromEnv(), [](const std::string&) {});
      std::atexit(WriteOutputsAtExit);
    }
  });
  return g.process.config();
}

// The process's GPU call timer, created on first use (CUPTI unless STRAGGLAR_PROFILER=events,
// else CUDA events).
GpuCallTimer* Timer(Global& g) {
  std::call_once(g.timer_once, [&g] {
    std::string reason;
    g.timer = GpuCallTimer::Create(g.process.config().prefer_cupti, &reason);
    if (!reason.empty()) LogOnce(LogLevel::kInfo, "timer", reason);
    if (g.timer != nullptr) {
      Log(LogLevel::kInfo,
          absl::StrCat("timing calls with ", GpuTimerSourceName(g.timer->source())));
    }
  });
  return g.timer.get();
}

// The settings `comm`'s ranks agreed on at its creation; this process's when they did not.
std::shared_ptr<const PreloadConfig> ConfigOf(Global& g, ncclComm_t comm, bool* agreed = nullptr) {
  std::lock_guard<std::mutex> lock(g.mutex);
  auto it = g.agreed.find(comm);
  if (agreed != nullptr) *agreed = it != g.agreed.end();
  if (it != g.agreed.end()) return it->second;
  static const auto* own_settings = new std::shared_ptr<const PreloadConfig>(
      std::make_shared<const PreloadConfig>(g.process.config()));
  return *own_settings;
}

void WriteOutputs(Global& g, CommState& state) { g.process.WriteOutputs(*state.comm); }

// How long another thread's ending of a communicator (STRAGGLAR_TIMEOUT's, an abort) waits for the
// calling thread to leave the library, so that it never runs beside one of its NCCL calls; a
// thread that stays is the one waiting on the stuck work, which only a revocation ends. Short:
// STRAGGLAR_TIMEOUT's ending holds the watchdog's lock.
constexpr auto kCallerLeaves = std::chrono::milliseconds(200);
// How long an abort waits for a call that stays once it has revoked the communicator, whose waits
// then end: NCCL's abort must not free the communicator under the call.
constexpr auto kRevokedCallerLeaves = std::chrono::seconds(10);

// Ends the waits on `state`'s work (NcclBackend::Revoke), saying so where NCCL cannot.
void Revoke(CommState& state) {
  if (absl::Status revoked = state.backend->Revoke(); !revoked.ok()) {
    Log(LogLevel::kWarn,
        absl::StrCat(state.comm->name(), ": cannot stop its work: ", revoked.message()));
  }
}

// Puts `state`'s calls under the watchdog. On STRAGGLAR_TIMEOUT the communicator is revoked, so
// that its waits end and its calls fail from then on, and its trace and summary are written.
void WatchCalls(Global& g, CommState& state, const std::string& name) {
  // Alive while this ending runs: Forget stops the watch, which waits for the ending to return,
  // before it lets go of the state.
  CommState* watched = &state;
  state.watch = std::make_unique<NcclCallWatch>(
      *g.process.watchdog(), state.backend->device(), name, [&g, watched](const std::string&) {
        // Revoked beside a call that stays: the call is waiting on the stuck work, which only the
        // revocation ends (Revoke is safe beside it, and once or more).
        watched->gate.RunOrHandOver(
            [&g, watched] {
              if (watched->torn_down) return;
              Revoke(*watched);
              WriteOutputs(g, *watched);
            },
            kCallerLeaves, [watched] { Revoke(*watched); });
      });
}

// The state of `comm`, created at its first handled call (every rank is in the same call).
// nullptr: pass this communicator through.
std::shared_ptr<CommState> StateFor(Global& g, ncclComm_t comm, cudaStream_t stream) {
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    auto it = g.comms.find(comm);
    if (it != g.comms.end()) return it->second;
    if (g.nonblocking.contains(comm)) return nullptr;
  }
  // Communicators are named in the order of their first handled call, the same on every rank
  // when the ranks create and use them in the same order (as NCCL requires).
  std::string name;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    name = absl::StrCat("comm", g.next_comm_index++);
  }
  const NcclApi& api = Api();
  int size = 0, rank = 0, device = 0;
  std::shared_ptr<CommState> state;
  if (api.complete() && api.comm_count(comm, &size) == ncclSuccess &&
      api.comm_user_rank(comm, &rank) == ncclSuccess &&
      api.comm_cu_device(comm, &device) == ncclSuccess && size >= 2) {
    DeviceScope scope(device);
    bool agreed_at_creation = false;
    std::shared_ptr<const PreloadConfig> known = ConfigOf(g, comm, &agreed_at_creation);
    state = std::make_shared<CommState>();
    state->backend =
        std::make_unique<NcclBackend>(comm, rank, size, device, Timer(g), known->epoch_calls);
    state->backend->set_stream(stream);
    absl::StatusOr<PreloadConfig> settings = *known;
    if (!agreed_at_creation) {
      settings = AgreeWithRankZero(*known, rank, [&state](std::string& text) {
        return state->backend->BroadcastFromRankZero(text);
      });
    }
    absl::StatusOr<std::unique_ptr<Communicator>> created = absl::UnknownError("");
    if (settings.ok() && settings->mode == RuntimeMode::kOff) {
      created = absl::FailedPreconditionError("rank 0 has STRAGGLAR_MODE=off");
    } else if (settings.ok()) {
      state->backend->set_epoch_calls(settings->epoch_calls);
      CommOptions options = PreloadCommOptions(*settings, kBackend, "ncclAllReduce", name,
                                               LagSource::kDuration);  // clock-free: across hosts
      // Every GPU has links of its own (NVLink ports, or a NIC per GPU between nodes): a slow
      // one is priced, and StragglAR run around its rank where that is faster. Looked for at
      // setup only (mid-run, a probe would be timed behind calls the GPU has not run yet), and
      // not with the device executor, whose probe times its own Ring through every rank at once
      // and cannot tell one rank's link from another's.
      options.probe = {
          .small_repeats = 16, .large_repeats = 4, .find_slow_rank = !settings->device_executor};
      options.runtime.native_is_nccl = true;  // native, the default, is NCCL's own AllReduce
      // Collective, like the creation, and before it: the link probe at creation measures the
      // executor that will run the plans.
      if (settings->device_executor) {
        state->backend->StartDeviceExecutor({.window_bytes = settings->ipc_bytes,
                                             .ctas = settings->ipc_ctas,
                                             .system_scope = settings->device_system_scope},
                                            settings->ipc_timeout_s, settings->device_stamps);
      }
      options.native_pre_arrival = settings->native_pre_arrival;
      absl::StatusOr<std::optional<Topology>> topology =
          LearnTopology(*settings, *state->backend, size, HostNodeId(), name);
      if (topology.ok()) {
        options.runtime.topology = *topology;
      } else {
        Log(LogLevel::kWarn, absl::StrCat("priced as one node: ", topology.status().message()));
      }
      created = Communicator::Create(rank, size, std::move(options), *state->backend);
    } else {
      created = settings.status();
    }
    if (created.ok()) {
      state->comm = *std::move(created);
    } else {
      Log(LogLevel::kWarn,
          absl::StrCat("passing communicator through: ", created.status().message()));
      state.reset();
    }
  }
  std::lock_guard<std::mutex> lock(g.mutex);
  if (state != nullptr) {
    // The trace and the end-of-run summary follow the first communicator (usually the world's).
    g.process.AddObservers(*state->comm, size, /*may_trace=*/true);
    if (g.process.watchdog() != nullptr) WatchCalls(g, *state, name);
  }
  return g.comms.emplace(comm, std::move(state)).first->second;
}

void WriteOutputsAtExit() {
  Global& g = G();
  std::lock_guard<std::mutex> lock(g.mutex);
  // Its thread asks CUDA about the calls' work: stopped before CUDA is torn down.
  g.process.StopWatchdog();
  // The exchange threads must not poll the GPU timer while the process tears CUDA down.
  for (auto& [comm, links] : g.links) links->Stop();
  for (auto& [comm, state] : g.comms) {
    if (state != nullptr) WriteOutputs(g, *state);
  }
}

// The communicator is going away (`aborting`: aborted or revoked): save, write its outputs, forget
// it. Its device memory and the communicators split off it are freed here, before NCCL frees it.
// A call on another thread that is inside and stays (an abort from a watchdog thread) is first
// revoked, which ends its waits, and waited for; where NCCL cannot revoke, or the call still
// stays, the call frees them as it leaves. True when the watchdog had revoked it
// (STRAGGLAR_TIMEOUT).
bool Forget(ncclComm_t comm, bool aborting) {
  Global& g = G();
  std::shared_ptr<CommState> state;
  std::shared_ptr<NcclLinks> links;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    g.nonblocking.erase(comm);
    g.agreed.erase(comm);
    if (auto it = g.links.find(comm); it != g.links.end()) {
      links = std::move(it->second);
      g.links.erase(it);
    }
    if (auto it = g.comms.find(comm); it != g.comms.end()) {
      state = std::move(it->second);
      g.comms.erase(it);
    }
  }
  links.reset();  // its exchange stops now (or when the last call using it returns)
  if (state == nullptr) return false;
  // No STRAGGLAR_TIMEOUT ending runs from here on: one in progress, which may hold the gate (and
  // would otherwise be handed the teardown below on the watchdog's own thread), has returned.
  if (state->watch != nullptr) state->watch->Stop();
  // Revoked by the watchdog: its work and its ready ranks' may still be stopping.
  const bool revoked = state->backend->revoked();
  aborting = aborting || revoked;
  // Whoever runs the teardown holds the state: this thread, or the call it is handed to.
  CommState* forgotten = state.get();
  auto teardown = [&g, forgotten, aborting] {
    forgotten->watch.reset();
    DeviceScope scope(forgotten->backend->device());
    forgotten->backend->ReleaseDeviceExecutor(aborting);
    forgotten->backend->ready_comms().Release(aborting);
    forgotten->comm->Close();
    WriteOutputs(g, *forgotten);
    forgotten->torn_down = true;
  };
  if (state->gate.TryRun(teardown, kCallerLeaves)) return revoked;
  if (aborting && state->backend->Revoke().ok() &&
      state->gate.TryRun(teardown, kRevokedCallerLeaves)) {
    return revoked;
  }
  Log(LogLevel::kWarn, absl::StrCat(forgotten->comm->name(),
                                    ": a call is still inside; it frees the communicator's "
                                    "resources as it leaves"));
  state->gate.RunOrHandOver(teardown, std::chrono::milliseconds(0));
  return revoked;
}

// Rank 0's settings on every rank of `comm`, at its creation (a collective: every rank is in the
// call). nullptr when they could not be shared (said once): the communicator is passed through.
std::shared_ptr<const PreloadConfig> AgreeAtCreation(Global& g, ncclComm_t comm) {
  const NcclApi& api = Api();
  int rank = 0, device = 0;
  if (!api.complete() || api.comm_user_rank(comm, &rank) != ncclSuccess ||
      api.comm_cu_device(comm, &device) != ncclSuccess) {
    LogOnce(LogLevel::kWarn, "agree-unknown",
            "passing a communicator through: its rank or device is unknown");
    return nullptr;
  }
  absl::StatusOr<PreloadConfig> agreed =
      AgreeWithRankZero(g.process.config(), rank, [&](std::string& text) {
        absl::StatusOr<std::string> shared =
            BroadcastTextAtCreation(comm, device, text, kSettingsBytes, "the settings");
        if (!shared.ok()) return shared.status();
        if (shared->empty()) return absl::InvalidArgumentError("rank 0's settings are too long");
        text = *std::move(shared);
        return absl::OkStatus();
      });
  if (!agreed.ok()) {
    LogOnce(LogLevel::kWarn, "agree-failed",
            absl::StrCat("passing a communicator through: ", agreed.status().message()));
    return nullptr;
  }
  return std::make_shared<const PreloadConfig>(*std::move(agreed));
}

// A communicator created non-blocking returns ncclInProgress from its calls; stragglar's
// multi-step work assumes blocking calls, so it passes such communicators through. Every other
// one created outside a group agrees on its settings now, whatever this rank's STRAGGLAR_MODE
// (rank 0's decides), and starts its link profiling when that is on.
void NoteCreated(ncclResult_t result, const ncclComm_t* comm, const ncclConfig_t* config) {
  if (comm == nullptr || *comm == nullptr || (result != ncclSuccess && result != ncclInProgress)) {
    return;
  }
  Global& g = G();
  if (config != nullptr && config->blocking == 0) {
    std::lock_guard<std::mutex> lock(g.mutex);
    g.nonblocking.insert(*comm);
    return;
  }
  int size = 0;
  // Created inside a group (several devices per thread), it exists only at ncclGroupEnd; still
  // being created (NCCL_COMM_BLOCKING=0), it takes no collective yet.
  if (GroupDepth() > 0 || result != ncclSuccess || !Api().complete() ||
      Api().comm_count(*comm, &size) != ncclSuccess || size < 2) {
    if (g.process.config().mode != RuntimeMode::kOff && g.process.config().link_profiling) {
      LogOnce(LogLevel::kInfo, "links-unagreed",
              "no link profiling on communicators created inside ncclGroupStart/End or "
              "non-blocking");
    }
    return;
  }
  std::shared_ptr<const PreloadConfig> agreed = AgreeAtCreation(g, *comm);
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    if (agreed == nullptr) {
      g.comms.emplace(*comm, nullptr);
      return;
    }
    g.agreed[*comm] = agreed;
  }
  if (agreed->mode == RuntimeMode::kOff || !agreed->link_profiling) return;
  // Every rank of the new communicator is in this call, so it can join the address broadcast.
  std::string name;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    name = absl::StrCat("p2p", g.next_links_index++);
  }
  absl::StatusOr<std::unique_ptr<NcclLinks>> links =
      NcclLinks::Start(*comm, name, *agreed, Timer(g), g.process.registry());
  if (!links.ok()) {
    Log(LogLevel::kWarn,
        absl::StrCat("no link profiling on ", name, ": ", links.status().message()));
    return;
  }
  Log(LogLevel::kInfo, absl::StrCat("link profiling on ", name));
  std::lock_guard<std::mutex> lock(g.mutex);
  g.links[*comm] = *std::move(links);
}

std::shared_ptr<NcclLinks> LinksOf(ncclComm_t comm) {
  Global& g = G();
  std::lock_guard<std::mutex> lock(g.mutex);
  auto it = g.links.find(comm);
  return it == g.links.end() ? nullptr : it->second;
}

}  // namespace
}  // namespace stragglar

using stragglar::Config;
using stragglar::Real;

extern "C" {

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  static auto* real = STRAGGLAR_REAL(ncclCommInitRank);
  Config();
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real(comm, nranks, id, rank);
  stragglar::NoteCreated(result, comm, nullptr);
  return result;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  static auto* real = STRAGGLAR_REAL(ncclCommInitRankConfig);
  Config();
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real(comm, nranks, id, rank, config);
  stragglar::NoteCreated(result, comm, config);
  return result;
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int n_ids,
                                      ncclUniqueId* ids, ncclConfig_t* config) {
  static auto* real = STRAGGLAR_REAL(ncclCommInitRankScalable);
  Config();
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real(comm, nranks, rank, n_ids, ids, config);
  stragglar::NoteCreated(result, comm, config);
  return result;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  static auto* real = STRAGGLAR_REAL(ncclCommInitAll);
  Config();
  return real == nullptr ? ncclInternalError : real(comms, ndev, devlist);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  static auto* real = STRAGGLAR_REAL(ncclCommSplit);
  Config();
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real(comm, color, key, newcomm, config);
  stragglar::NoteCreated(result, newcomm, config);
  return result;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude_ranks, int exclude_count,
                            ncclComm_t* newcomm, ncclConfig_t* config, int flags) {
  static auto* real = STRAGGLAR_REAL(ncclCommShrink);
  Config();
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real(comm, exclude_ranks, exclude_count, newcomm, config, flags);
  stragglar::NoteCreated(result, newcomm, config);
  return result;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  static auto* real = STRAGGLAR_REAL(ncclCommFinalize);
  if (real == nullptr) return ncclInternalError;
  // NCCL forbids finalizing a revoked communicator; it is destroyed or aborted as it is.
  if (stragglar::Forget(comm, /*aborting=*/false)) return ncclRemoteError;
  return real(comm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  static auto* real = STRAGGLAR_REAL(ncclCommDestroy);
  if (real == nullptr) return ncclInternalError;
  stragglar::Forget(comm, /*aborting=*/false);
  return real(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  static auto* real = STRAGGLAR_REAL(ncclCommAbort);
  if (real == nullptr) return ncclInternalError;
  stragglar::Forget(comm, /*aborting=*/true);
  return real(comm);
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revoke_flags) {
  static auto* real = STRAGGLAR_REAL(ncclCommRevoke);
  if (real == nullptr) return ncclInternalError;
  stragglar::Forget(comm, /*aborting=*/true);
  return real(comm, revoke_flags);
}

ncclResult_t ncclGroupStart() {
  static auto* real = STRAGGLAR_REAL(ncclGroupStart);
  if (real == nullptr) return ncclInternalError;
  const ncclResult_t result = real();
  if (result == ncclSuccess) stragglar::GroupStarted();
  return result;
}

ncclResult_t ncclGroupEnd() {
  static auto* real = STRAGGLAR_REAL(ncclGroupEnd);
  if (real == nullptr) return ncclInternalError;
  return stragglar::EndGroup(real);
}

// Ends a group without running it (NCCL only estimates it): nothing ran, nothing is indexed.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* info) {
  static auto* real = STRAGGLAR_REAL(ncclGroupSimulateEnd);
  if (real == nullptr) return ncclInternalError;
  stragglar::GroupSimulated();
  return real(info);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  static auto* real = STRAGGLAR_REAL(ncclSend);
  if (real == nullptr) return ncclInternalError;
  return stragglar::PointToPoint(
      comm == nullptr ? nullptr : stragglar::LinksOf(comm), /*send=*/true, peer,
      static_cast<int64_t>(count) * stragglar::NcclTypeBytes(datatype), stream,
      [&] { return real(sendbuff, count, datatype, peer, comm, stream); });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  static auto* real = STRAGGLAR_REAL(ncclRecv);
  if (real == nullptr) return ncclInternalError;
  return stragglar::PointToPoint(
      comm == nullptr ? nullptr : stragglar::LinksOf(comm), /*send=*/false, peer,
      static_cast<int64_t>(count) * stragglar::NcclTypeBytes(datatype), stream,
      [&] { return real(recvbuff, count, datatype, peer, comm, stream); });
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  static auto* real = STRAGGLAR_REAL(ncclAllReduce);
  if (real == nullptr) return ncclInternalError;
  Config();
  const std::optional<stragglar::DataType> type = stragglar::MapType(datatype);
  const std::optional<stragglar::ReduceOp> reduce_op = stragglar::MapOp(op);
  stragglar::NoteOtherGroupWork();
  if (stragglar::GroupDepth() > 0 || count == 0 || comm == nullptr || !type.has_value() ||
      !reduce_op.has_value()) {
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  stragglar::Global& g = stragglar::G();
  // Rank 0's mode and minimum size, so that every rank passes the same calls through.
  const std::shared_ptr<const stragglar::PreloadConfig> config = stragglar::ConfigOf(g, comm);
  if (config->mode == stragglar::RuntimeMode::kOff ||
      static_cast<int64_t>(count) * stragglar::DataTypeSize(*type) < config->min_bytes) {
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  // Under CUDA graph capture the host-side choice would be frozen into the graph: NCCL's own.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
      capture != cudaStreamCaptureStatusNone) {
    stragglar::LogOnce(stragglar::LogLevel::kInfo, "capture",
                       "ncclAllReduce under CUDA graph capture: passed through to NCCL");
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  // Held until the call returns, though another thread may abort the communicator meanwhile.
  const std::shared_ptr<stragglar::CommState> state = stragglar::StateFor(g, comm, stream);
  // Revoked by the watchdog (STRAGGLAR_TIMEOUT): failed, not handed to NCCL.
  if (state != nullptr && state->backend->revoked()) return ncclRemoteError;
  // After a failed epoch exchange (alike on every rank): NCCL's own from now on.
  if (state == nullptr || !state->comm->disabled().ok()) {
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  return state->AllReduce(sendbuff, recvbuff, count, datatype, op, *type, *reduce_op, stream);
}

}  // extern "C"
