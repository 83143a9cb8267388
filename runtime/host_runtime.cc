#include "runtime/host_runtime.h"

#include <algorithm>
#include <barrier>
#include <cstring>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/reduce/reduce.h"
#include "runtime/link_probe.h"

namespace stragglar {
namespace {

// How long a rank waits for a peer's part of the protocol's own traffic.
constexpr absl::Duration kProtocolTimeout = absl::Seconds(60);

// Seconds per ring round of `bytes`-byte messages with every rank sending and reducing at once,
// moved the way the executor moves chunks (lent, then reduced by the receiver straight from the
// sender's memory): wall time of `rounds` rounds after `warmup` rounds, so thread start-up skew
// is excluded.
absl::StatusOr<double> TimeRingRound(int num_ranks, int64_t bytes, int warmup, int rounds,
                                     absl::FunctionRef<RingPeers(int)> peers_of,
                                     const HostTransport::NodeEmulation& emulation) {
  HostTransport transport(num_ranks);
  if (emulation.ranks_per_node > 0) {
    if (absl::Status status = transport.EmulateNodes(emulation); !status.ok()) return status;
  }
  const int64_t count = bytes / static_cast<int64_t>(sizeof(float));
  // Each rank lends `outgoing` and reduces into `accumulator`, as the executor does with two
  // different chunks in one ring round.
  std::vector<std::vector<float>> outgoing(num_ranks, std::vector<float>(count, 1.0f));
  std::vector<std::vector<float>> accumulator(num_ranks, std::vector<float>(count, 1.0f));
  std::vector<absl::Status> status(num_ranks);
  std::barrier warm(num_ranks);
  std::chrono::steady_clock::time_point start;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < num_ranks; ++rank) {
    threads.emplace_back([&, rank] {
      const auto [next, previous] = peers_of(rank);
      const absl::Span<const std::byte> lent(
          reinterpret_cast<const std::byte*>(outgoing[rank].data()), count * sizeof(float));
      for (int i = 0; i < warmup + rounds; ++i) {
        if (i == warmup) {
          warm.arrive_and_wait();
          if (rank == 0) start = std::chrono::steady_clock::now();
          warm.arrive_and_wait();
        }
        const int64_t ticket = transport.Lend(rank, next, {}, {lent});
        absl::StatusOr<HostTransport::BorrowedMessage> message =
            transport.Borrow(previous, rank, absl::Seconds(30));
        absl::Status round_status = message.status();
        if (message.ok()) {
          ReduceInto(DataType::kFloat32, ReduceOp::kSum, accumulator[rank].data(),
                     message->spans[0].data(), count);
          transport.Return(previous, rank);
          round_status = transport.WaitReturned(rank, next, ticket, absl::Seconds(30));
        }
        if (!round_status.ok()) {
          status[rank] = round_status;
          transport.Abort(round_status);
          (void)transport.WaitReturned(rank, next, ticket, absl::Seconds(30));
          // Keep the barrier count right so the other threads are not left waiting.
          if (i < warmup) warm.arrive_and_drop();
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / rounds;
}

// The bytes of a vector of doubles, for the transport.
absl::Span<const std::byte> BytesOf(absl::Span<const double> values) {
  return {reinterpret_cast<const std::byte*>(values.data()), values.size() * sizeof(double)};
}

// The link of one probe ring: alpha from rounds of tiny messages, beta from rounds of large ones,
// all ranks at once, on `lanes` shared cores (0: each transfer has a lane of its own).
absl::StatusOr<LinkModel> MeasureRings(int num_ranks, absl::FunctionRef<RingPeers(int)> peers_of,
                                       const HostTransport::NodeEmulation& emulation,
                                       double lanes) {
  absl::StatusOr<double> small =
      TimeRingRound(num_ranks, kProbeSmallBytes, 16, 256, peers_of, emulation);
  if (!small.ok()) return small.status();
  absl::StatusOr<double> large =
      TimeRingRound(num_ranks, kProbeLargeBytes, 2, 12, peers_of, emulation);
  if (!large.ok()) return large.status();
  return LinkFromRingRounds(*small, *large, kProbeLargeBytes, num_ranks, lanes);
}

// The ring rounds run num_ranks transfers on the machine's cores at once.
double HostLanes() { return std::max(1u, std::thread::hardware_concurrency()); }

}  // namespace

absl::StatusOr<LinkModel> MeasureHostLink(int num_ranks) {
  if (num_ranks < 2) return absl::InvalidArgumentError("need at least 2 ranks to measure");
  return MeasureRings(
      num_ranks, [num_ranks](int rank) { return FlatRingPeers(rank, num_ranks); }, {}, HostLanes());
}

absl::StatusOr<ProbedLinks> MeasureEmulatedLinks(const Topology& topology,
                                                 const HostTransport::NodeEmulation& emulation) {
  if (!topology.multi_node() || topology.ranks_per_node < 2 ||
      emulation.ranks_per_node != topology.ranks_per_node) {
    return absl::InvalidArgumentError(
        absl::StrCat("measuring emulated links needs several nodes of at least 2 ranks, emulated "
                     "as such; got ",
                     TopologyName(topology), " emulated in nodes of ", emulation.ranks_per_node));
  }
  absl::StatusOr<LinkModel> intra = MeasureRings(
      topology.num_ranks(), [&](int rank) { return NodeRingPeers(rank, topology); }, emulation,
      HostLanes());
  if (!intra.ok()) return intra.status();
  // Every rank has an emulated NIC of its own: its transfers between nodes share no lanes.
  absl::StatusOr<LinkModel> inter = MeasureRings(
      topology.num_ranks(), [&](int rank) { return RailRingPeers(rank, topology); }, emulation, 0);
  if (!inter.ok()) return inter.status();
  return ProbedLinks{.intra_node = *intra, .inter_node = *inter};
}

// One rank's side of the protocol's traffic, over the shared transport.
class HostCommunicator::Backend final : public CommBackend {
 public:
  Backend(int rank, HostCommunicator& owner) : rank_(rank), owner_(owner) {}

  double Now() override { return owner_.Now(); }

  absl::Status StartGather(absl::Span<const double> mine) override {
    for (int peer = 0; peer < owner_.transport_.num_ranks(); ++peer) {
      if (peer != rank_) owner_.transport_.Send(rank_, peer, BytesOf(mine));
    }
    mine_.assign(mine.begin(), mine.end());
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<double>> FinishGather() override {
    const size_t per_rank = mine_.size();
    std::vector<double> all(per_rank * owner_.transport_.num_ranks());
    std::copy(mine_.begin(), mine_.end(), all.begin() + rank_ * per_rank);
    for (int peer = 0; peer < owner_.transport_.num_ranks(); ++peer) {
      if (peer == rank_) continue;
      absl::StatusOr<std::vector<std::byte>> message =
          owner_.transport_.Receive(peer, rank_, kProtocolTimeout);
      if (!message.ok()) return message.status();
      if (message->size() != per_rank * sizeof(double)) {
        absl::Status mismatch = absl::InvalidArgumentError(
            absl::StrCat("epoch exchange: rank ", peer, " sent ", message->size(), " bytes, rank ",
                         rank_, " expected ", per_rank * sizeof(double)));
        owner_.transport_.Abort(mismatch);
        return mismatch;
      }
      std::memcpy(all.data() + peer * per_rank, message->data(), message->size());
    }
    return all;
  }

  absl::Status BroadcastFromRankZero(std::string& text) override {
    if (rank_ == 0) {
      const absl::Span<const std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                                              text.size());
      for (int peer = 1; peer < owner_.transport_.num_ranks(); ++peer) {
        owner_.transport_.Send(0, peer, bytes);
      }
      return absl::OkStatus();
    }
    absl::StatusOr<std::vector<std::byte>> message =
        owner_.transport_.Receive(0, rank_, kProtocolTimeout);
    if (!message.ok()) return message.status();
    text.assign(reinterpret_cast<const char*>(message->data()), message->size());
    return absl::OkStatus();
  }

 private:
  const int rank_;
  HostCommunicator& owner_;
  std::vector<double> mine_;
};

namespace {

// A call's work: this rank's program over the transport (the host has no collective of its own:
// its default algorithm is our Ring plan).
class HostCallWork final : public CallWork {
 public:
  HostCallWork(const AllReduceArgs& args, const HostExecutorOptions& options,
               HostTransport& transport)
      : args_(args), options_(options), transport_(transport) {}

  CallOutcome Run(const CallDecision& decision, const RankProgram* program) override {
    if (program == nullptr) {
      return {.status = absl::InternalError("the host runtime has no collective of its own")};
    }
    return {.status = host::Run(*program, args_, options_, transport_)};
  }

 private:
  const AllReduceArgs& args_;
  const HostExecutorOptions& options_;
  HostTransport& transport_;
};

}  // namespace

HostCommunicator::HostCommunicator(int num_ranks)
    : transport_(num_ranks), origin_(std::chrono::steady_clock::now()) {}

absl::StatusOr<std::unique_ptr<HostCommunicator>> HostCommunicator::Create(
    int num_ranks, const RuntimeConfig& config, const LinkModel& link,
    std::vector<std::shared_ptr<CollectiveObserver>> observers,
    std::optional<LinkModel> emulated_inter_node_link) {
  auto host = std::unique_ptr<HostCommunicator>(new HostCommunicator(std::max(num_ranks, 0)));
  // On a machine of nodes the ranks are threads of one host, so the links between "nodes" are
  // emulated: messages between them arrive as the emulated link says, for the same plans the
  // policy prices. (A topology of another size fails in Communicator::Create.)
  if (config.topology.has_value() && config.topology->multi_node() &&
      config.topology->num_ranks() == num_ranks) {
    const LinkModel& nic = emulated_inter_node_link.value_or(config.inter_node_link);
    if (absl::Status status =
            host->transport_.EmulateNodes({.ranks_per_node = config.topology->ranks_per_node,
                                           .alpha_s = nic.alpha_s,
                                           .bytes_per_s = nic.bandwidth_bytes_per_s});
        !status.ok()) {
      return status;
    }
    if (config.per_class_queues) host->queue_ranks_per_node_ = config.topology->ranks_per_node;
  }
  const CommOptions options{.runtime = config,
                            .name = "host",
                            .backend = "host-threads",
                            .link = link,
                            // Asked for on the command line: say so when there is none yet.
                            .missing_state_level = LogLevel::kWarn};
  // Rank by rank on this thread: the protocol's only collective at creation is rank 0's
  // broadcast of the learned state, and the transport queues rank 0's sends for the others.
  for (int rank = 0; rank < std::max(num_ranks, 1); ++rank) {
    auto each = std::make_unique<Rank>();
    each->backend = std::make_unique<Backend>(rank, *host);
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        Communicator::Create(rank, num_ranks, options, *each->backend);
    if (!comm.ok()) return comm.status();
    each->comm = *std::move(comm);
    for (const std::shared_ptr<CollectiveObserver>& observer : observers) {
      each->comm->observers().Add(observer);
    }
    host->ranks_.push_back(std::move(each));
  }
  return host;
}

HostCommunicator::~HostCommunicator() = default;

double HostCommunicator::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
}

absl::StatusOr<CallDecision> HostCommunicator::AllReduce(int rank, const AllReduceArgs& args,
                                                         CallTiming* timing,
                                                         absl::Duration timeout) {
  if (rank < 0 || rank >= num_ranks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside [0, ", num_ranks(), ")"));
  }
  const HostExecutorOptions options{.timeout = timeout, .ranks_per_node = queue_ranks_per_node_};
  HostCallWork work(args, options, transport_);
  const int64_t bytes = args.count * DataTypeSize(args.type);
  absl::StatusOr<CallDecision> decision =
      ranks_[rank]->comm->AllReduce(bytes, /*in_place=*/args.send == args.recv, work, timing);
  // Every failure aborts the shared transport: the other ranks return instead of waiting for a
  // rank that will not come, and later calls fail (the communicator is dead, as NCCL's would be).
  if (!decision.ok()) transport_.Abort(decision.status());
  return decision;
}

absl::Status HostCommunicator::Flush(int rank) {
  if (rank < 0 || rank >= num_ranks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside [0, ", num_ranks(), ")"));
  }
  absl::Status status = ranks_[rank]->comm->Flush();
  if (!status.ok()) transport_.Abort(status);
  return status;
}

}  // namespace stragglar
