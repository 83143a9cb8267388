#include "runtime/host_runtime.h"

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/reduce.h"

namespace stragglar {
namespace {

// The state file's machine id names the backend too: host threads and GPUs learn different costs.
constexpr absl::string_view kHostBackend = "host-threads";

// Seconds per ring round of `bytes`-byte messages with every rank sending and reducing at once,
// moved the way the executor moves chunks (lent, then reduced by the receiver straight from the
// sender's memory): wall time of `rounds` rounds after `warmup` rounds, so thread start-up skew
// is excluded.
absl::StatusOr<double> TimeRingRound(int num_ranks, int64_t bytes, int warmup, int rounds) {
  HostTransport transport(num_ranks);
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
      const int next = (rank + 1) % num_ranks;
      const int previous = (rank + num_ranks - 1) % num_ranks;
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
                     message->pieces[0].data(), count);
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

}  // namespace

absl::StatusOr<LinkModel> MeasureHostLink(int num_ranks) {
  if (num_ranks < 2) return absl::InvalidArgumentError("need at least 2 ranks to measure");
  // Large enough that the ranks' buffers spill out of the caches, as a big AllReduce's do.
  constexpr int64_t kLargeBytes = 4 << 20;
  absl::StatusOr<double> small = TimeRingRound(num_ranks, 64, 16, 256);
  if (!small.ok()) return small.status();
  absl::StatusOr<double> large = TimeRingRound(num_ranks, kLargeBytes, 2, 12);
  if (!large.ok()) return large.status();
  // The ring round ran num_ranks transfers on the machine's cores at once.
  const double lanes = std::max(1u, std::thread::hardware_concurrency());
  const double slowdown = std::max(1.0, num_ranks / lanes);
  const double per_byte = std::max(*large - *small, 1e-12) / kLargeBytes / slowdown;
  return LinkModel{
      .alpha_s = *small, .bandwidth_bytes_per_s = 1.0 / per_byte, .shared_lanes = lanes};
}

absl::StatusOr<std::unique_ptr<HostCommunicator>> HostCommunicator::Create(
    int num_ranks, const RuntimeConfig& config, const LinkModel& link,
    std::vector<std::shared_ptr<CollectiveObserver>> observers) {
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int rank = 0; rank < num_ranks; ++rank) {
    absl::StatusOr<RuntimeCore> core = RuntimeCore::Create(config, rank, num_ranks, link);
    if (!core.ok()) return core.status();
    ranks.push_back(std::make_unique<Rank>(*std::move(core)));
  }
  if (!config.state_file.empty()) {
    // Loaded once and given to every rank, so that all of them start from the same state.
    absl::StatusOr<LearnedState> state =
        LoadState(config.state_file, num_ranks, MachineId(kHostBackend));
    if (state.ok()) {
      for (std::unique_ptr<Rank>& rank : ranks) {
        if (absl::Status status = rank->core.ImportState(*state); !status.ok()) return status;
      }
    } else {
      std::fprintf(stderr, "stragglar: %s; starting fresh\n",
                   std::string(state.status().message()).c_str());
    }
  }
  auto comm = std::unique_ptr<HostCommunicator>(
      new HostCommunicator(std::make_unique<HostTransport>(num_ranks), std::move(ranks)));
  comm->state_file_ = config.state_file;
  comm->observers_ = std::move(observers);
  return comm;
}

HostCommunicator::HostCommunicator(std::unique_ptr<HostTransport> transport,
                                   std::vector<std::unique_ptr<Rank>> ranks)
    : transport_(std::move(transport)),
      ranks_(std::move(ranks)),
      origin_(std::chrono::steady_clock::now()) {}

HostCommunicator::~HostCommunicator() { SaveState(/*force=*/true); }

void HostCommunicator::SaveState(bool force) {
  // Nothing learned yet (no exchange, no imported state): keep whatever the file holds.
  if (state_file_.empty() || ranks_.empty() || !ranks_[0]->core.HasLearned()) return;
  const absl::Time now = absl::Now();
  if (!force && now - last_save_ < kStateSaveInterval) return;
  last_save_ = now;
  LearnedState state = ranks_[0]->core.ExportState();
  state.machine = MachineId(kHostBackend);
  if (absl::Status status = stragglar::SaveState(state_file_, state);
      !status.ok() && !save_failed_) {
    save_failed_ = true;
    std::fprintf(stderr, "stragglar: %s; not saving the learned state\n",
                 std::string(status.message()).c_str());
  }
}

double HostCommunicator::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
}

absl::StatusOr<CallDecision> HostCommunicator::AllReduce(int rank, const HostAllReduceArgs& args,
                                                         CallTiming* timing) {
  if (rank < 0 || rank >= num_ranks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside [0, ", num_ranks(), ")"));
  }
  Rank& self = *ranks_[rank];
  // Every failure aborts the shared transport: the other ranks return instead of waiting for a
  // rank that will not come, and later calls fail (the communicator is dead, as NCCL's would be).
  auto fail = [this](absl::Status status) {
    transport_->Abort(status);
    return status;
  };
  const double arrival = Now();
  const int64_t bytes = args.count * DataTypeSize(args.type);
  absl::StatusOr<CallDecision> decision = self.core.Decide(bytes);
  if (!decision.ok()) return fail(decision.status());
  absl::StatusOr<const Plan*> plan = self.core.PlanFor(*decision, bytes);
  if (!plan.ok()) return fail(plan.status());
  for (const std::shared_ptr<CollectiveObserver>& observer : observers_) {
    observer->OnStart(rank, *decision, bytes);
  }
  if (absl::Status status = ExecutePlanOnHost(**plan, rank, args, *transport_); !status.ok()) {
    return status;  // the executor has aborted the transport already
  }
  const CallTiming recorded{.arrival_s = arrival, .duration_s = Now() - arrival};
  self.core.Record(recorded);
  if (timing != nullptr) *timing = recorded;
  for (const std::shared_ptr<CollectiveObserver>& observer : observers_) {
    observer->OnCall(rank, *decision, bytes, recorded);
  }
  if (self.core.ExchangeDue()) {
    if (absl::Status status = ExchangeEpoch(rank); !status.ok()) return fail(status);
  }
  return decision;
}

absl::Status HostCommunicator::ExchangeEpoch(int rank) {
  RuntimeCore& core = ranks_[rank]->core;
  const std::vector<double> mine = core.EpochPayload();
  const auto bytes = absl::MakeConstSpan(reinterpret_cast<const std::byte*>(mine.data()),
                                         mine.size() * sizeof(double));
  for (int peer = 0; peer < num_ranks(); ++peer) {
    if (peer != rank) transport_->Send(rank, peer, bytes);
  }
  std::vector<double> all(mine.size() * num_ranks());
  std::copy(mine.begin(), mine.end(), all.begin() + rank * mine.size());
  for (int peer = 0; peer < num_ranks(); ++peer) {
    if (peer == rank) continue;
    absl::StatusOr<std::vector<std::byte>> message =
        transport_->Receive(peer, rank, absl::Seconds(60));
    if (!message.ok()) return message.status();
    if (message->size() != bytes.size()) {
      absl::Status mismatch = absl::InvalidArgumentError(
          absl::StrCat("epoch exchange: rank ", peer, " sent ", message->size(), " bytes, rank ",
                       rank, " expected ", bytes.size()));
      transport_->Abort(mismatch);
      return mismatch;
    }
    std::memcpy(all.data() + peer * mine.size(), message->data(), message->size());
  }
  if (absl::Status status = core.AbsorbEpoch(all); !status.ok()) return status;
  for (const std::shared_ptr<CollectiveObserver>& observer : observers_) {
    observer->OnEpoch(rank, core.last_epoch());
  }
  // Rank 0's thread owns the saving (its core, its clock), so no lock is needed.
  if (rank == 0) SaveState(/*force=*/false);
  return absl::OkStatus();
}

}  // namespace stragglar
