#include "runtime/communicator.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/units.h"
#include "runtime/state_file.h"

namespace stragglar {
namespace {

// Rank 0 saves what the policy learned after an exchange at most this often (and when closed).
constexpr std::chrono::seconds kStateSaveInterval(10);

}  // namespace

std::string DescribePlan(const Plan& plan, int64_t bytes) {
  std::string text = absl::StrCat(AlgorithmName(plan.algorithm));
  if (plan.straggler.has_value()) absl::StrAppend(&text, " around rank ", *plan.straggler);
  absl::StrAppend(&text, " for ", FormatBytes(static_cast<double>(bytes)), ": ", plan.num_chunks,
                  " chunks");
  if (plan.variant == PlanVariant::kLogDepth && plan.post_arrival_rounds() > 0) {
    // Every post-arrival transfer carries one block.
    const size_t block = plan.rounds[plan.pre_arrival_rounds].transfers.front().chunks.size();
    absl::StrAppend(&text, " (log-depth: the straggler's buffer in ", plan.num_chunks / block,
                    " blocks)");
  } else if (plan.variant == PlanVariant::kHierarchical) {
    absl::StrAppend(&text, " (hierarchical)");
  } else if (plan.straggler.has_value() && plan.num_ranks > 1 &&
             plan.num_chunks > plan.num_ranks - 1) {
    absl::StrAppend(&text, " (", plan.num_chunks / (plan.num_ranks - 1), " pieces per rank)");
  }
  if (plan.straggler.has_value()) {
    absl::StrAppend(&text, ", ", plan.pre_arrival_rounds,
                    " rounds before the straggler arrives and ", plan.post_arrival_rounds(),
                    " after");
  } else {
    absl::StrAppend(&text, ", ", plan.num_rounds(), " rounds");
  }
  return text;
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(int rank, int num_ranks,
                                                                   CommOptions options,
                                                                   CommBackend& backend) {
  LinkModel link;
  std::vector<RankLinkSpeed> link_speeds;
  if (options.link.has_value()) {
    link = *options.link;
    link_speeds = std::move(options.link_speeds);
  } else {
    // Checked before the probe, so that a bad world fails alike on every rank without traffic.
    if (num_ranks < 2 || rank < 0 || rank >= num_ranks) {
      return RuntimeCore::Create(options.runtime, rank, num_ranks, link).status();
    }
    absl::StatusOr<ProbedLinks> probed =
        ProbeLinks(backend, rank, num_ranks, options.runtime.topology, options.probe);
    if (!probed.ok()) return probed.status();
    link = probed->intra_node;
    link_speeds = std::move(probed->rank_speeds);
    if (probed->inter_node.has_value()) {
      options.runtime.inter_node_link = *probed->inter_node;
      if (rank == 0) {
        Log(LogLevel::kInfo, absl::StrCat(options.name, ": inside nodes ", DescribeLink(link),
                                          "; between nodes ", DescribeLink(*probed->inter_node)));
      }
    } else if (rank == 0) {
      Log(LogLevel::kInfo, absl::StrCat(options.name, ": ", DescribeLink(link)));
    }
    if (rank == 0 && !link_speeds.empty()) {
      Log(LogLevel::kInfo, absl::StrCat(options.name, ": ", DescribeLinkSpeeds(link_speeds)));
    }
  }
  absl::StatusOr<RuntimeCore> core = RuntimeCore::Create(options.runtime, rank, num_ranks, link);
  if (!core.ok()) return core.status();
  core->SetLinkSpeeds(std::move(link_speeds));
  auto comm = std::unique_ptr<Communicator>(
      new Communicator(std::move(options), backend, *std::move(core)));
  if (absl::Status status = comm->LoadLearnedState(); !status.ok()) return status;
  return comm;
}

Communicator::Communicator(CommOptions options, CommBackend& backend, RuntimeCore core)
    : options_(std::move(options)), backend_(backend), core_(std::move(core)) {
  if (options_.align_clocks && !backend_.DefersExchange()) clocks_.emplace(core_.num_ranks());
}

Communicator::~Communicator() { Close(); }

// Read on rank 0, broadcast, parsed by every rank: all start from the same state, or all fresh.
absl::Status Communicator::LoadLearnedState() {
  const std::string& path = core_.config().state_file;
  if (path.empty()) return absl::OkStatus();
  std::string text, machine = MachineId(options_.backend), error;
  if (rank() == 0) {
    absl::StatusOr<std::string> read = ReadStateText(path);
    if (read.ok()) {
      text = *std::move(read);
    } else {
      error = std::string(read.status().message());
    }
  }
  if (absl::Status status = backend_.BroadcastFromRankZero(text); !status.ok()) return status;
  if (absl::Status status = backend_.BroadcastFromRankZero(machine); !status.ok()) return status;
  if (text.empty()) {
    if (rank() == 0) Log(options_.missing_state_level, absl::StrCat(error, "; starting fresh"));
    return absl::OkStatus();
  }
  absl::StatusOr<LearnedState> learned = ParseState(text, path, core_.num_ranks(), machine);
  absl::Status imported = learned.ok() ? core_.ImportState(*learned) : learned.status();
  if (rank() == 0) {
    if (imported.ok()) {
      Log(LogLevel::kInfo, absl::StrCat("loaded the learned state ", path));
    } else {
      Log(LogLevel::kWarn, absl::StrCat(imported.message(), "; starting fresh"));
    }
  }
  return absl::OkStatus();
}

void Communicator::SaveLearnedState(bool force) {
  const std::string& path = core_.config().state_file;
  // Nothing learned yet (no exchange, no imported state): keep whatever the file holds.
  if (rank() != 0 || path.empty() || !core_.HasLearned()) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_save_ < kStateSaveInterval) return;
  last_save_ = now;
  LearnedState state = core_.ExportState();
  state.machine = MachineId(options_.backend);
  if (absl::Status status = SaveState(path, state); !status.ok()) {
    LogOnce(LogLevel::kWarn, "save-state",
            absl::StrCat(status.message(), "; not saving the learned state"));
  }
}

void Communicator::Close() {
  if (closed_) return;
  closed_ = true;
  SaveLearnedState(/*force=*/true);
}

CallDecision Communicator::Decide(int64_t bytes, bool* native) {
  absl::StatusOr<CallDecision> decided = core_.Decide(bytes);
  CallDecision decision;
  if (decided.ok()) {
    decision = *decided;
  } else {
    // Cannot happen with a valid core; the call then runs the default, and the call counts stay
    // aligned.
    LogOnce(LogLevel::kWarn, "decide",
            absl::StrCat("policy failed: ", decided.status().message(), "; using the default"));
    decision = CallDecision{.algorithm = core_.config().default_algorithm};
  }
  *native =
      ApplyForcedAlgorithm(options_.forced, options_.forced_straggler, core_.num_ranks(), decision);
  if (*native && !options_.has_native) {
    // A backend without a library of its own (the host runtime) never offers native.
    LogOnce(LogLevel::kWarn, "no-native",
            "this backend has no AllReduce of its own; running the Ring plan");
    decision.algorithm = Algorithm::kRing;
    *native = false;
  }
  if (std::optional<PlanVariant> family = ForcedPlanVariant(options_.forced)) {
    // The forced family in the shape the chooser would price for this size; a function of the
    // size and the link every rank shares, so every rank runs the same plan.
    absl::StatusOr<StragglarShape> shape =
        core_.policy().plans().ShapeOfFamily(*family, static_cast<double>(bytes), core_.link());
    if (shape.ok()) {
      decision.shape = *shape;
    } else {
      LogOnce(LogLevel::kWarn, "forced-family",
              absl::StrCat("STRAGGLAR_ALGORITHM=", ForcedAlgorithmName(options_.forced), ": ",
                           shape.status().message(),
                           "; running StragglAR's default plan for the size"));
    }
  }
  return decision;
}

absl::StatusOr<const RankProgram*> Communicator::ProgramFor(const CallDecision& decision,
                                                            int64_t bytes, Placement placement) {
  absl::StatusOr<const Plan*> plan = core_.PlanFor(decision, bytes);
  if (!plan.ok()) return plan.status();
  auto it = programs_.find({*plan, placement});
  if (it == programs_.end()) {
    absl::StatusOr<RankProgram> program = LowerPlan(**plan, rank(), placement);
    if (!program.ok()) return program.status();
    it = programs_.emplace(std::make_pair(*plan, placement), *std::move(program)).first;
  }
  if (rank() == 0 && LogEnabled(LogLevel::kInfo) && described_plans_.insert(*plan).second) {
    Log(LogLevel::kInfo, absl::StrCat(options_.name, ": ", DescribePlan(**plan, bytes)));
  }
  return &it->second;
}

void Communicator::Record(const CallDecision& decision, int64_t bytes, double arrival_s,
                          const CallOutcome& outcome, CallTiming* timing) {
  if (outcome.ticket.has_value()) {
    core_.RecordPending(decision, {.ticket = *outcome.ticket, .host_arrival_s = arrival_s});
    return;
  }
  CallTiming recorded = outcome.timing.value_or(
      CallTiming{.arrival_s = arrival_s,
                 .duration_s = outcome.host_duration ? backend_.Now() - arrival_s : 0.0});
  core_.Record(recorded, decision, outcome.measured);
  if (timing != nullptr) *timing = recorded;
  for (const auto& observer : observers_.all()) {
    observer->OnCall(rank(), decision, bytes, recorded);
  }
}

void Communicator::DeliverTimings(bool wait, int64_t until_call) {
  while (std::optional<std::pair<int64_t, PendingTiming>> pending = core_.OldestPending()) {
    const auto& [call, ticket] = *pending;
    if (call >= until_call) return;
    CallTiming timing{.arrival_s = ticket.host_arrival_s, .duration_s = 0};
    absl::Status status;
    if (wait) {
      absl::StatusOr<CallTiming> measured = backend_.WaitTiming(ticket.ticket);
      if (measured.ok()) timing = *measured;
      status = measured.status();
    } else {
      absl::StatusOr<std::optional<CallTiming>> measured = backend_.PollTiming(ticket.ticket);
      if (measured.ok() && !measured->has_value()) return;  // not known yet: later
      if (measured.ok()) timing = **measured;
      status = measured.status();
    }
    if (!status.ok()) {
      LogOnce(LogLevel::kWarn, "timer-read",
              absl::StrCat("reading a call's GPU timing failed (", status.message(),
                           "); using the host's arrival time"));
    }
    backend_.ReleaseTiming(ticket.ticket);
    (void)core_.Fill(call, timing);
    const RecordedCall* recorded = core_.Recorded(call);
    for (const auto& observer : observers_.all()) {
      observer->OnCall(rank(), recorded->decision, recorded->bytes, timing);
    }
  }
}

absl::Status Communicator::FollowLinkChange() {
  if (options_.replayed_link) {
    const std::optional<LinkModel> replayed = options_.replayed_link(core_.last_epoch());
    if (!replayed.has_value() || KeyOf(0, *replayed) == KeyOf(0, core_.link())) {
      return absl::OkStatus();
    }
    return core_.SetLink(*replayed);
  }
  // A backend that defers its exchange (the GPU's) is not probed mid-run: its probe's rounds would
  // queue behind the calls the GPU has not run yet, and time those.
  const double moved = core_.last_epoch().calibration_move;
  if (moved < kReprobeMove || core_.epochs() == link_changed_after_epoch_ + 1 ||
      backend_.DefersExchange() ||
      !LooksForSlowRank(core_.num_ranks(), options_.runtime.topology, options_.probe)) {
    return absl::OkStatus();
  }
  const LinkModel before = core_.link();
  LinkModel without_slow_rank = before;
  without_slow_rank.slow_rank = -1;
  without_slow_rank.slow_factor = 1;
  absl::StatusOr<SlowLinkProbe> probe = ProbeSlowRank(
      backend_, rank(), core_.num_ranks(), without_slow_rank, options_.probe.large_batches);
  if (!probe.ok()) return probe.status();
  core_.SetLinkSpeeds(std::move(probe->speeds));
  const LinkModel& probed = probe->link;
  // The same slow rank, slower by about as much: what the calibration measures already.
  if (probed.slow_rank == before.slow_rank &&
      std::abs(std::log(probed.slow_factor / before.slow_factor)) < std::log(1.25)) {
    return absl::OkStatus();
  }
  if (absl::Status status = core_.SetLink(probed); !status.ok()) return status;
  link_changed_after_epoch_ = core_.epochs();
  if (rank() == 0) {
    Log(LogLevel::kInfo,
        absl::StrCat(options_.name, ": after epoch ", core_.epochs() - 1, " (calibration moved ",
                     absl::StrFormat("%.2g", moved), "x) ", DescribeLink(probed),
                     probed.has_slow_rank() || !before.has_slow_rank()
                         ? ""
                         : absl::StrCat("; rank ", before.slow_rank, "'s is not slow any more")));
    Log(LogLevel::kInfo,
        absl::StrCat(options_.name, ": ", DescribeLinkSpeeds(core_.last_epoch().link_speeds)));
  }
  return absl::OkStatus();
}

absl::Status Communicator::Absorb(const std::vector<double>& all) {
  if (absl::Status status = core_.AbsorbEpoch(all); !status.ok()) return status;
  if (absl::Status status = FollowLinkChange(); !status.ok()) return status;
  for (const auto& observer : observers_.all()) observer->OnEpoch(rank(), core_.last_epoch());
  if (LogEnabled(LogLevel::kTrace)) {
    const std::optional<int> straggler = core_.detector().straggler();
    Log(LogLevel::kTrace, absl::StrCat(options_.name, " epoch ", core_.epochs(), ": straggler ",
                                       straggler ? absl::StrCat(*straggler) : "none"));
  }
  SaveLearnedState(/*force=*/false);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> Communicator::GatherAligned(std::vector<double> payload) {
  payload.push_back(gather_end_s_);
  if (absl::Status status = backend_.StartGather(payload); !status.ok()) return status;
  absl::StatusOr<std::vector<double>> all = backend_.FinishGather();
  if (!all.ok()) return all.status();
  gather_end_s_ = backend_.Now();
  const size_t per_rank = payload.size();
  const int num_ranks = core_.num_ranks();
  if (all->size() != per_rank * num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch exchange: expected ", per_rank * num_ranks, " values (", per_rank,
                     " from each of ", num_ranks, " ranks), got ", all->size()));
  }
  std::vector<double> stamps(num_ranks);
  for (int r = 0; r < num_ranks; ++r) stamps[r] = (*all)[(r + 1) * per_rank - 1];
  clocks_->Add(stamps);
  // Each call is (arrival, duration): the arrival moves onto rank 0's clock.
  std::vector<double> aligned;
  aligned.reserve(num_ranks * (per_rank - 1));
  for (int r = 0; r < num_ranks; ++r) {
    const double offset_s = clocks_->offset(r);
    for (size_t i = 0; i + 1 < per_rank; ++i) {
      const double value = (*all)[r * per_rank + i];
      aligned.push_back(i % 2 == 0 ? value - offset_s : value);
    }
  }
  return aligned;
}

absl::Status Communicator::ExchangeNow() {
  if (clocks_.has_value()) {
    // Before the first epoch's gather, gathers of stamps alone: the first epoch's arrivals are
    // then aligned by a median of ClockAlignment::kFirstGathers stamps too (the first gather
    // carries none).
    for (; stamp_gathers_ < ClockAlignment::kFirstGathers; ++stamp_gathers_) {
      if (absl::StatusOr<std::vector<double>> none = GatherAligned({}); !none.ok()) {
        return none.status();
      }
    }
    absl::StatusOr<std::vector<double>> all = GatherAligned(core_.EpochPayload());
    if (!all.ok()) return all.status();
    return Absorb(*all);
  }
  if (absl::Status status = backend_.StartGather(core_.EpochPayload()); !status.ok()) {
    return status;
  }
  absl::StatusOr<std::vector<double>> all = backend_.FinishGather();
  if (!all.ok()) return all.status();
  return Absorb(*all);
}

// Reads the sealed epoch's timings (its calls finished half an epoch ago, so this normally does
// not wait) and starts gathering every rank's.
absl::Status Communicator::GatherSealed() {
  DeliverTimings(/*wait=*/true, core_.sealed_first_call() + core_.sealed_calls());
  if (absl::Status status = backend_.StartGather(core_.EpochPayload()); !status.ok()) {
    return status;
  }
  gathered_ = true;
  return absl::OkStatus();
}

// Every handled call passes here first, at the same call index on every rank: absorb the sealed
// epoch when the current one is full (gathered half an epoch ago: normally long finished), seal
// the full one, and half an epoch later start its gather.
absl::Status Communicator::AdvanceDeferredExchange() {
  if (core_.ExchangeDue()) {
    if (core_.HasSealedEpoch()) {
      if (!gathered_) {
        if (absl::Status status = GatherSealed(); !status.ok()) return status;
      }
      absl::StatusOr<std::vector<double>> all = backend_.FinishGather();
      if (!all.ok()) return all.status();
      if (absl::Status status = Absorb(*all); !status.ok()) return status;
    }
    if (absl::Status status = core_.SealEpoch(); !status.ok()) return status;
    gathered_ = false;
  }
  const int64_t since_sealed = core_.calls() - (core_.sealed_first_call() + core_.sealed_calls());
  if (core_.HasSealedEpoch() && !gathered_ && since_sealed >= core_.config().epoch_calls / 2) {
    return GatherSealed();
  }
  return absl::OkStatus();
}

absl::StatusOr<CallDecision> Communicator::RunDisabled(CallWork& work) {
  if (!options_.has_native) return disabled_;
  const CallDecision decision{.call = core_.calls(), .algorithm = Algorithm::kNative};
  const CallOutcome outcome = work.Run(decision, nullptr);
  // Nothing is recorded any more.
  if (outcome.ticket.has_value()) backend_.ReleaseTiming(*outcome.ticket);
  if (!outcome.status.ok()) return outcome.status;
  return decision;
}

absl::StatusOr<CallDecision> Communicator::AllReduce(int64_t bytes, bool in_place, CallWork& work,
                                                     CallTiming* timing) {
  if (!disabled_.ok()) return RunDisabled(work);
  auto disable = [&](absl::Status status) {
    disabled_ = status;
    if (!options_.library_call.empty()) {
      Log(LogLevel::kWarn,
          absl::StrCat("epoch exchange on ", options_.name, " failed: ", status.message(), "; ",
                       options_.has_native ? "the library's own AllReduce" : "failing every call",
                       " from now on"));
    }
    return status;
  };
  if (backend_.DefersExchange()) {
    if (absl::Status status = AdvanceDeferredExchange(); !status.ok()) return disable(status);
    DeliverTimings(/*wait=*/false, core_.calls());
  }
  const double arrival_s = backend_.Now();
  bool native = false;
  const CallDecision decision = Decide(bytes, &native);
  for (const auto& observer : observers_.all()) observer->OnStart(rank(), decision, bytes);
  CallOutcome outcome;
  if (native || !work.RunsPlans()) {
    outcome = work.Run(decision, nullptr);
  } else {
    const Placement placement =
        work.RunsInPlace()
            ? Placement{.in_place = true}
            : Placement{.in_place = in_place, .native_pre_arrival = options_.native_pre_arrival};
    absl::StatusOr<const RankProgram*> program = ProgramFor(decision, bytes, placement);
    outcome = program.ok() ? work.Run(decision, *program) : CallOutcome{.status = program.status()};
  }
  // Our own work's failures are said here; the library's own collective reports its own.
  if (!outcome.status.ok() && !native && !options_.library_call.empty()) {
    Log(LogLevel::kWarn,
        absl::StrCat(options_.library_call, " on ", options_.name, " (",
                     AlgorithmName(decision.algorithm), ") failed: ", outcome.status.message()));
  }
  // Recorded even after an error, so that every rank's epoch stays at the same call index.
  Record(decision, bytes, arrival_s, outcome, timing);
  if (!outcome.status.ok()) return outcome.status;
  if (!backend_.DefersExchange() && core_.ExchangeDue()) {
    if (absl::Status status = ExchangeNow(); !status.ok()) return disable(status);
  }
  return decision;
}

absl::Status Communicator::Flush() {
  if (!disabled_.ok() || backend_.DefersExchange() || core_.EpochPayload().empty()) {
    return absl::OkStatus();
  }
  return ExchangeNow();
}

}  // namespace stragglar
