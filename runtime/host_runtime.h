// The host runtime: n ranks that are threads of one process. One HostTransport carries both the
// programs' messages and the protocol's own (the epoch exchange, the learned state's broadcast);
// each rank has its own Communicator (runtime/communicator.h) over a HostBackend.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "exporters/observer.h"
#include "kernels/exec/host/host_executor.h"
#include "kernels/exec/host/host_transport.h"
#include "runtime/communicator.h"
#include "runtime/link_probe.h"
#include "runtime/runtime_core.h"

namespace stragglar {

// Measures alpha and beta of the in-process transport as the plans see them: every rank sends a
// message to the next and reduces the one from the previous (one ring round, all ranks at once,
// so contention for the cores is included), after warm-up rounds that exclude thread start-up
// skew; the ranks share the machine's cores (runtime/link_probe.h's formula).
absl::StatusOr<LinkModel> MeasureHostLink(int num_ranks);

// The same on a machine of nodes emulated as `emulation` says (HostTransport::EmulateNodes), each
// link class on its own rings (runtime/link_probe.h): the rings inside the nodes, then the rails'
// rings through the emulated NICs. What the emulated NIC costs a plan, thread wake-ups on a busy
// host included. InvalidArgument unless `topology` has several nodes of at least 2 ranks and
// `emulation` emulates its nodes.
absl::StatusOr<ProbedLinks> MeasureEmulatedLinks(const Topology& topology,
                                                 const HostTransport::NodeEmulation& emulation);

class HostCommunicator {
 public:
  // `observers` see every call and every epoch exchange of every rank (exporters). With a
  // config.topology of several nodes, messages between its nodes are delayed as
  // `emulated_inter_node_link` says (HostTransport::EmulateNodes): an emulated machine of nodes.
  // nullopt: as config.inter_node_link, the link the policy prices with, says. There, with
  // config.per_class_queues, every rank runs its plans on one queue per link class
  // (HostExecutorOptions::ranks_per_node), as the policy then prices them.
  static absl::StatusOr<std::unique_ptr<HostCommunicator>> Create(
      int num_ranks, const RuntimeConfig& config, const LinkModel& link,
      std::vector<std::shared_ptr<CollectiveObserver>> observers = {},
      std::optional<LinkModel> emulated_inter_node_link = std::nullopt);

  // Saves the learned state (config.state_file) one last time.
  ~HostCommunicator();

  // Called by rank `rank`'s thread; every rank makes the same sequence of calls. Returns the
  // decision that was executed. Arrival is taken on entry, on a clock all ranks share. A failed
  // call aborts the shared transport (so no rank hangs) and, as with an NCCL communicator after an
  // error, every later call fails too: create a new communicator to continue. `timing`, when
  // given, receives what the runtime recorded for this call (what a trace should show).
  // `timeout` bounds each wait for a peer.
  absl::StatusOr<CallDecision> AllReduce(int rank, const AllReduceArgs& args,
                                         CallTiming* timing = nullptr,
                                         absl::Duration timeout = absl::Seconds(60));

  // Exchanges the calls of a partial epoch (at the end of a job), so that they reach the
  // observers. Called by every rank's thread.
  absl::Status Flush(int rank);

  int num_ranks() const { return static_cast<int>(ranks_.size()); }
  const RuntimeCore& core(int rank) const { return ranks_[rank]->comm->core(); }
  // Seconds since the communicator was created: the shared arrival clock.
  double Now() const;

 private:
  class Backend;
  struct Rank {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Communicator> comm;  // after `backend`, which it uses
  };

  HostCommunicator(int num_ranks);

  HostTransport transport_;
  // What every call's HostExecutorOptions::ranks_per_node is: 0 unless the ranks run on one
  // queue per link class.
  int queue_ranks_per_node_ = 0;
  std::chrono::steady_clock::time_point origin_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace stragglar
