#include "policy/model/simulator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {

absl::StatusOr<SimulationResult> SimulatePlan(const Plan& plan, double bytes, const LinkModel& link,
                                              absl::Span<const double> arrival_s) {
  return SimulatePlan(plan, bytes, NetworkModel::Flat(plan.num_ranks, link), arrival_s);
}

absl::StatusOr<SimulationResult> SimulatePlan(const Plan& plan, double bytes,
                                              const NetworkModel& network,
                                              absl::Span<const double> arrival_s) {
  return SimulateRounds(plan, {}, 0, plan.num_rounds(), bytes, network, arrival_s);
}

absl::StatusOr<SimulationResult> SimulatePlan(const PlanHeader& header, double bytes,
                                              const LinkModel& link,
                                              absl::Span<const double> arrival_s) {
  return SimulatePlan(header, bytes, NetworkModel::Flat(header.num_ranks, link), arrival_s);
}

absl::StatusOr<SimulationResult> SimulatePlan(const PlanHeader& header, double bytes,
                                              const NetworkModel& network,
                                              absl::Span<const double> arrival_s) {
  std::vector<RingRun> runs;
  if (header.algorithm == Algorithm::kRing && header.variant == PlanVariant::kFlat &&
      header.num_ranks >= 2) {
    runs = RingRunsOfRing(header.num_ranks);  // Ring's one ring run is all the model reads
  }
  return SimulateRounds(PlanRounds{.header = header, .runs = runs}, 0, header.num_rounds(), bytes,
                        network, arrival_s);
}

PlanRounds RoundsOf(const Plan& plan, absl::Span<const RingRun> runs,
                    const CompactRounds* compact) {
  return {.header = HeaderOf(plan), .runs = runs, .compact = compact, .transfers = &plan};
}

absl::StatusOr<SimulationResult> SimulateRounds(const Plan& plan, absl::Span<const RingRun> runs,
                                                int begin_round, int end_round, double bytes,
                                                const LinkModel& link,
                                                absl::Span<const double> arrival_s) {
  return SimulateRounds(plan, runs, begin_round, end_round, bytes,
                        NetworkModel::Flat(plan.num_ranks, link), arrival_s);
}

absl::StatusOr<SimulationResult> SimulateRounds(const Plan& plan, absl::Span<const RingRun> runs,
                                                int begin_round, int end_round, double bytes,
                                                const NetworkModel& network,
                                                absl::Span<const double> arrival_s) {
  return SimulateRounds(RoundsOf(plan, runs), begin_round, end_round, bytes, network, arrival_s);
}

namespace {

// ValidateSimulation's checks that are not of the arrival times.
absl::Status ValidateMachine(const PlanHeader& plan, double bytes, const NetworkModel& network) {
  if (!(bytes >= 0) || !std::isfinite(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("bytes must be finite and >= 0, got ", bytes));
  }
  if (absl::Status status = ValidateNetwork(network); !status.ok()) return status;
  if (network.topology.num_ranks() != plan.num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("topology ", TopologyName(network.topology),
                                                   " has ", network.topology.num_ranks(),
                                                   " ranks, the plan ", plan.num_ranks));
  }
  return absl::OkStatus();
}

absl::Status ValidateArrivalCount(const PlanHeader& plan, absl::Span<const double> arrival_s) {
  if (static_cast<int>(arrival_s.size()) != plan.num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("simulation needs ", plan.num_ranks,
                                                   " arrival times, got ", arrival_s.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSimulation(const Plan& plan, double bytes, const NetworkModel& network,
                                absl::Span<const double> arrival_s) {
  return ValidateSimulation(HeaderOf(plan), bytes, network, arrival_s);
}

absl::Status ValidateSimulation(const PlanHeader& plan, double bytes, const NetworkModel& network,
                                absl::Span<const double> arrival_s) {
  if (absl::Status status = ValidateArrivalCount(plan, arrival_s); !status.ok()) return status;
  if (absl::Status status = ValidateMachine(plan, bytes, network); !status.ok()) return status;
  for (double arrival : arrival_s) {
    if (!std::isfinite(arrival)) return absl::InvalidArgumentError("arrival times must be finite");
  }
  return absl::OkStatus();
}

std::optional<CompactRounds> CompactRoundsOf(const Plan& plan) {
  constexpr int kMax = std::numeric_limits<uint16_t>::max();
  if (plan.num_ranks > kMax + 1) return std::nullopt;
  CompactRounds compact;
  compact.round_begin.reserve(plan.rounds.size() + 1);
  for (const Round& round : plan.rounds) {
    compact.round_begin.push_back(static_cast<int64_t>(compact.moves.size()));
    for (const Transfer& transfer : round.transfers) {
      if (transfer.chunks.size() > static_cast<size_t>(kMax) || transfer.src < 0 ||
          transfer.dst < 0 || transfer.src > kMax || transfer.dst > kMax) {
        return std::nullopt;
      }
      compact.moves.push_back({static_cast<uint16_t>(transfer.src),
                               static_cast<uint16_t>(transfer.dst),
                               static_cast<uint16_t>(transfer.chunks.size())});
    }
  }
  compact.round_begin.push_back(static_cast<int64_t>(compact.moves.size()));
  return compact;
}

namespace {

// A rank's time as one pass of the simulation carries it: one simulation's (double), or several
// simulations' over the same rounds at once (Lanes), each lane on its own. The rule is max-plus
// (the later of two times, a time plus a cost), so -infinity in a lane is "no path yet".
template <size_t K>
using Lanes = std::array<double, K>;
inline double Later(double a, double b) { return std::max(a, b); }
inline double After(double time, double cost) { return time + cost; }
template <size_t K>
Lanes<K> Later(const Lanes<K>& a, const Lanes<K>& b) {
  Lanes<K> later;
  for (size_t k = 0; k < K; ++k) later[k] = std::max(a[k], b[k]);
  return later;
}
template <size_t K>
Lanes<K> After(Lanes<K> time, double cost) {
  for (double& lane : time) lane += cost;
  return time;
}

// Which links each of a plan's ranks takes: node_of[rank], the node whose links it uses (empty on
// one node), and the plan's rank behind the slow link (LinkModel::slow_rank, -1: none), whose
// transfers move their bytes slow_factor times slower.
struct RankLinks {
  std::vector<int> node_of;
  int slow = -1;
  double slow_factor = 1;
  // With a slow rank, for ring runs' two-class closed form: 1 for it, 0 for the others.
  std::vector<int> slow_as_node;

  bool Touches(int src, int dst) const { return slow >= 0 && (src == slow || dst == slow); }
};

// One round of `moves` (each with src, dst and a chunk count), the simulator's rule: a transfer
// starts when both of its ranks are ready and ends its cost later; a rank is ready again when all
// of its transfers of the round have ended. Consecutive transfers of one chunk count and class
// share their cost, computed once: the same expression, so the same bits.
template <typename Time, typename Moves, typename ChunksOf>
void AdvanceRound(const Moves& moves, ChunksOf chunks_of, double bytes_per_chunk,
                  const NetworkModel& network, const RankLinks& links, std::vector<Time>& ready,
                  std::vector<Time>& next) {
  const std::vector<int>& node_of = links.node_of;
  const int transfers = static_cast<int>(moves.size());
  size_t cached_chunks = 0;
  const LinkModel* cached_link = nullptr;
  bool cached_slow = false;
  double cost = 0;
  for (const auto& move : moves) {
    const Time start = Later(ready[move.src], ready[move.dst]);
    const LinkModel& link = node_of.empty() || node_of[move.src] == node_of[move.dst]
                                ? network.intra_node
                                : network.inter_node;
    const size_t chunks = chunks_of(move);
    const bool slow = links.Touches(move.src, move.dst);
    if (&link != cached_link || chunks != cached_chunks || slow != cached_slow) {
      const double bytes = bytes_per_chunk * chunks;
      cost = link.TransferSeconds(slow ? bytes * links.slow_factor : bytes, transfers);
      cached_link = &link;
      cached_chunks = chunks;
      cached_slow = slow;
    }
    const Time end = After(start, cost);
    next[move.src] = Later(next[move.src], end);
    next[move.dst] = Later(next[move.dst], end);
  }
  // Only ranks that took part moved on; copying back keeps `ready` and `next` equal between
  // rounds.
  for (const auto& move : moves) {
    ready[move.src] = next[move.src];
    ready[move.dst] = next[move.dst];
  }
}

// `rounds` rounds of a ring run from `ready`, each hop taking its class's time (`node_of` empty:
// one class). Lanes are advanced one at a time: the run's closed form is a pass over its ranks.
void AdvanceRun(const RingRun& run, int rounds, const std::vector<int>& node_of, double intra_s,
                double inter_s, std::vector<double>& ready) {
  if (!node_of.empty()) {
    AdvanceRingRounds(run, rounds, node_of, intra_s, inter_s, ready);
  } else {
    AdvanceRingRounds(run, rounds, intra_s, ready);
  }
}
template <size_t K>
void AdvanceRun(const RingRun& run, int rounds, const std::vector<int>& node_of, double intra_s,
                double inter_s, std::vector<Lanes<K>>& ready) {
  std::vector<double> lane(ready.size());
  for (size_t k = 0; k < K; ++k) {
    for (size_t rank = 0; rank < ready.size(); ++rank) lane[rank] = ready[rank][k];
    AdvanceRun(run, rounds, node_of, intra_s, inter_s, lane);
    for (size_t rank = 0; rank < ready.size(); ++rank) ready[rank][k] = lane[rank];
  }
}

// The arguments of SimulateRounds other than the arrival times, checked.
absl::Status ValidateRoundRange(const PlanRounds& rounds, int begin_round, int end_round) {
  const PlanHeader& plan = rounds.header;
  if (begin_round < 0 || end_round > plan.num_rounds() || begin_round > end_round) {
    return absl::InvalidArgumentError(absl::StrCat("rounds [", begin_round, ", ", end_round,
                                                   ") are not within the plan's ",
                                                   plan.num_rounds()));
  }
  const CompactRounds* compact = rounds.compact;
  if (compact != nullptr &&
      (compact->round_begin.size() != static_cast<size_t>(plan.num_rounds()) + 1 ||
       compact->round_begin.back() != static_cast<int64_t>(compact->moves.size()))) {
    return absl::InvalidArgumentError("the compact rounds are not this plan's");
  }
  if (rounds.transfers != nullptr && HeaderOf(*rounds.transfers) != plan) {
    return absl::InvalidArgumentError("the transfers are not this plan's");
  }
  return absl::OkStatus();
}

absl::Status ValidateRounds(const PlanRounds& rounds, int begin_round, int end_round, double bytes,
                            const NetworkModel& network, absl::Span<const double> arrival_s) {
  if (absl::Status status = ValidateSimulation(rounds.header, bytes, network, arrival_s);
      !status.ok()) {
    return status;
  }
  return ValidateRoundRange(rounds, begin_round, end_round);
}

// `renamed` checked as a renaming of `plan`'s ranks: empty (none), or one rank in range per rank.
absl::Status ValidateRenaming(const PlanHeader& plan, absl::Span<const int> renamed) {
  if (renamed.empty()) return absl::OkStatus();
  if (static_cast<int>(renamed.size()) != plan.num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("renaming ", renamed.size(), " ranks of a plan of ", plan.num_ranks));
  }
  for (int rank : renamed) {
    if (rank < 0 || rank >= plan.num_ranks) {
      return absl::InvalidArgumentError(absl::StrCat("renamed rank ", rank, " is out of range"));
    }
  }
  return absl::OkStatus();
}

// The links each of `plan`'s ranks takes under `renamed` (empty: none): its new name's. The nodes
// are empty on one node, where AdvanceRounds prices every transfer alike but the slow rank's.
RankLinks LinksOf(const PlanHeader& plan, absl::Span<const int> renamed,
                  const NetworkModel& network) {
  RankLinks links;
  // Where a slow rank is, every link is of one class, and the slow rank is the intra-node link's
  // (ValidateNetwork).
  const LinkModel& link = network.intra_node;
  for (int c = 0; link.has_slow_rank() && c < plan.num_ranks; ++c) {
    if ((renamed.empty() ? c : renamed[c]) == link.slow_rank) links.slow = c;
  }
  links.slow_factor = link.slow_factor;
  if (links.slow >= 0) {
    links.slow_as_node.assign(static_cast<size_t>(plan.num_ranks), 0);
    links.slow_as_node[links.slow] = 1;
  }
  if (!network.topology.multi_node()) return links;
  links.node_of.resize(plan.num_ranks);
  for (int c = 0; c < plan.num_ranks; ++c) {
    links.node_of[c] = network.topology.NodeOf(renamed.empty() ? c : renamed[c]);
  }
  return links;
}

// Rounds [begin_round, end_round) of `rounds` from `ready` (each rank's start, by the plan's
// ranks), with `links` the links each rank's transfers take.
template <typename Time>
absl::Status AdvanceRounds(const PlanRounds& rounds, int begin_round, int end_round, double bytes,
                           const NetworkModel& network, const RankLinks& links,
                           std::vector<Time>& ready) {
  const PlanHeader& plan = rounds.header;
  const absl::Span<const RingRun> runs = rounds.runs;
  const CompactRounds* compact = rounds.compact;
  const double bytes_per_chunk = bytes / plan.num_chunks;
  std::vector<Time> next = ready;
  auto run = runs.begin();
  for (int r = begin_round; r < end_round;) {
    while (run != runs.end() && run->first_round + run->rounds <= r) ++run;
    if (run != runs.end() && run->first_round <= r) {
      // A run of ring rounds, or the part of it within [r, end_round), in closed form.
      const int run_rounds = std::min(run->first_round + run->rounds, end_round) - r;
      const double bytes_per_transfer = bytes_per_chunk * static_cast<size_t>(run->chunks);
      const double intra_s =
          network.intra_node.TransferSeconds(bytes_per_transfer, run->transfers());
      if (links.slow >= 0) {
        // Every hop is of one class (ValidateNetwork): the hops to and from the slow rank are the
        // run's second.
        const LinkModel& link = links.node_of.empty() ? network.intra_node : network.inter_node;
        const double hop_s = link.TransferSeconds(bytes_per_transfer, run->transfers());
        const double slow_s =
            link.TransferSeconds(bytes_per_transfer * links.slow_factor, run->transfers());
        AdvanceRun(*run, run_rounds, links.slow_as_node, hop_s, slow_s, ready);
      } else {
        const double inter_s = links.node_of.empty() ? intra_s
                                                     : network.inter_node.TransferSeconds(
                                                           bytes_per_transfer, run->transfers());
        AdvanceRun(*run, run_rounds, links.node_of, intra_s, inter_s, ready);
      }
      for (const std::vector<int>& cycle : run->cycles) {
        for (int rank : cycle) next[rank] = ready[rank];
      }
      r += run_rounds;
      continue;
    }
    if (compact == nullptr && rounds.transfers == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          AlgorithmName(plan.algorithm), "'s plan for ", plan.num_ranks,
          " ranks is known here by its header alone, and its round ", r,
          " is in no ring run: simulating it needs its transfers or their compact form"));
    }
    if (compact != nullptr) {
      const absl::Span<const CompactRounds::Move> moves(
          compact->moves.data() + compact->round_begin[r],
          compact->round_begin[r + 1] - compact->round_begin[r]);
      AdvanceRound(
          moves, [](const CompactRounds::Move& move) -> size_t { return move.chunks; },
          bytes_per_chunk, network, links, ready, next);
    } else {
      AdvanceRound(
          rounds.transfers->rounds[r].transfers,
          [](const Transfer& transfer) -> size_t { return transfer.chunks.size(); },
          bytes_per_chunk, network, links, ready, next);
    }
    ++r;
  }
  return absl::OkStatus();
}

SimulationResult ResultOf(std::vector<double> finish_s, absl::Span<const double> arrival_s) {
  SimulationResult result;
  result.finish_s = std::move(finish_s);
  const double last_finish = *std::max_element(result.finish_s.begin(), result.finish_s.end());
  result.completion_s = last_finish - *std::min_element(arrival_s.begin(), arrival_s.end());
  result.after_last_arrival_s = last_finish - *std::max_element(arrival_s.begin(), arrival_s.end());
  return result;
}

}  // namespace

absl::StatusOr<SimulationResult> SimulateRounds(const Plan& plan, absl::Span<const RingRun> runs,
                                                const CompactRounds* compact, int begin_round,
                                                int end_round, double bytes,
                                                const NetworkModel& network,
                                                absl::Span<const double> arrival_s) {
  return SimulateRounds(RoundsOf(plan, runs, compact), begin_round, end_round, bytes, network,
                        arrival_s);
}

absl::StatusOr<SimulationResult> SimulateRounds(const PlanRounds& rounds, int begin_round,
                                                int end_round, double bytes,
                                                const NetworkModel& network,
                                                absl::Span<const double> arrival_s) {
  if (absl::Status status =
          ValidateRounds(rounds, begin_round, end_round, bytes, network, arrival_s);
      !status.ok()) {
    return status;
  }
  const RankLinks links = LinksOf(rounds.header, {}, network);
  std::vector<double> ready(arrival_s.begin(), arrival_s.end());
  if (absl::Status status =
          AdvanceRounds(rounds, begin_round, end_round, bytes, network, links, ready);
      !status.ok()) {
    return status;
  }
  return ResultOf(std::move(ready), arrival_s);
}

absl::StatusOr<SimulationResult> SimulateRenamedRounds(
    const Plan& plan, absl::Span<const RingRun> runs, const CompactRounds* compact,
    absl::Span<const int> renamed, int begin_round, int end_round, double bytes,
    const NetworkModel& network, absl::Span<const double> arrival_s) {
  return SimulateRenamedRounds(RoundsOf(plan, runs, compact), renamed, begin_round, end_round,
                               bytes, network, arrival_s);
}

absl::StatusOr<SimulationResult> SimulateRenamedRounds(const PlanRounds& rounds,
                                                       absl::Span<const int> renamed,
                                                       int begin_round, int end_round, double bytes,
                                                       const NetworkModel& network,
                                                       absl::Span<const double> arrival_s) {
  const PlanHeader& plan = rounds.header;
  if (absl::Status status =
          ValidateRounds(rounds, begin_round, end_round, bytes, network, arrival_s);
      !status.ok()) {
    return status;
  }
  if (renamed.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("renaming 0 ranks of a plan of ", plan.num_ranks));
  }
  if (absl::Status status = ValidateRenaming(plan, renamed); !status.ok()) return status;
  // The plan's rank c is rank renamed[c]: it starts when that rank arrives and uses its links.
  std::vector<double> ready(plan.num_ranks);
  for (int c = 0; c < plan.num_ranks; ++c) ready[c] = arrival_s[renamed[c]];
  if (absl::Status status = AdvanceRounds(rounds, begin_round, end_round, bytes, network,
                                          LinksOf(plan, renamed, network), ready);
      !status.ok()) {
    return status;
  }
  std::vector<double> finish_s(plan.num_ranks);
  for (int c = 0; c < plan.num_ranks; ++c) finish_s[renamed[c]] = ready[c];
  return ResultOf(std::move(finish_s), arrival_s);
}

absl::StatusOr<std::array<std::vector<double>, 2>> SimulateFromTwoStarts(
    const Plan& plan, absl::Span<const RingRun> runs, const CompactRounds* compact,
    absl::Span<const int> renamed, int begin_round, int end_round, double bytes,
    const NetworkModel& network, const std::array<absl::Span<const double>, 2>& start_s) {
  return SimulateFromTwoStarts(RoundsOf(plan, runs, compact), renamed, begin_round, end_round,
                               bytes, network, start_s);
}

absl::StatusOr<std::array<std::vector<double>, 2>> SimulateFromTwoStarts(
    const PlanRounds& rounds, absl::Span<const int> renamed, int begin_round, int end_round,
    double bytes, const NetworkModel& network,
    const std::array<absl::Span<const double>, 2>& start_s) {
  const PlanHeader& plan = rounds.header;
  for (absl::Span<const double> start : start_s) {
    if (absl::Status status = ValidateArrivalCount(plan, start); !status.ok()) return status;
    for (double time : start) {
      if (!std::isfinite(time) && time != -std::numeric_limits<double>::infinity()) {
        return absl::InvalidArgumentError("start times must be finite or -infinity");
      }
    }
  }
  if (absl::Status status = ValidateMachine(plan, bytes, network); !status.ok()) return status;
  if (absl::Status status = ValidateRoundRange(rounds, begin_round, end_round); !status.ok()) {
    return status;
  }
  if (absl::Status status = ValidateRenaming(plan, renamed); !status.ok()) return status;
  const auto name_of = [&](int c) { return renamed.empty() ? c : renamed[c]; };
  std::vector<Lanes<2>> ready(plan.num_ranks);
  for (int c = 0; c < plan.num_ranks; ++c) {
    ready[c] = {start_s[0][name_of(c)], start_s[1][name_of(c)]};
  }
  if (absl::Status status = AdvanceRounds(rounds, begin_round, end_round, bytes, network,
                                          LinksOf(plan, renamed, network), ready);
      !status.ok()) {
    return status;
  }
  std::array<std::vector<double>, 2> finish_s;
  for (size_t k = 0; k < 2; ++k) {
    finish_s[k].resize(plan.num_ranks);
    for (int c = 0; c < plan.num_ranks; ++c) finish_s[k][name_of(c)] = ready[c][k];
  }
  return finish_s;
}

std::vector<double> OneLateRank(int num_ranks, int late_rank, double delay_s) {
  std::vector<double> arrival(num_ranks, 0.0);
  arrival[late_rank] = delay_s;
  return arrival;
}

double RingSeconds(int num_ranks, double bytes, const LinkModel& link) {
  return 2.0 * (num_ranks - 1) * link.TransferSeconds(bytes / num_ranks);
}

double HalvingDoublingSeconds(int num_ranks, double bytes, const LinkModel& link) {
  const unsigned n = static_cast<unsigned>(num_ranks);
  const double beta = 1.0 / link.bandwidth_bytes_per_s;
  if (std::has_single_bit(n)) {
    return 2.0 * std::countr_zero(n) * link.alpha_s + 2.0 * (n - 1) / n * bytes * beta;
  }
  const int ceil_log2 = std::bit_width(n - 1);
  return 2.0 * ceil_log2 * link.alpha_s + 2.0 * bytes * beta * (1.5 - 1.0 / std::bit_floor(n));
}

double StragglarReduceScatterSeconds(int num_ranks, double bytes, const LinkModel& link) {
  return (num_ranks - 2) * link.TransferSeconds(bytes / (num_ranks - 1));
}

double StragglarPostArrivalSeconds(int num_ranks, int post_arrival_rounds, double bytes,
                                   const LinkModel& link) {
  return post_arrival_rounds * link.TransferSeconds(bytes / (num_ranks - 1));
}

namespace {

// The smallest delay at which `stragglar_plan` completes before a baseline whose completion for a
// delay `baseline_completion` gives (non-decreasing, growing at most one for one with the delay).
absl::StatusOr<double> BisectBreakEven(
    const Plan& stragglar_plan, double bytes, const NetworkModel& network,
    absl::FunctionRef<absl::StatusOr<double>(double)> baseline_completion) {
  if (!stragglar_plan.straggler.has_value()) {
    return absl::InvalidArgumentError("break-even needs a stragglar plan");
  }
  const int late = *stragglar_plan.straggler;
  // Positive while StragglAR is slower. Non-increasing in the delay: the delay adds to the baseline
  // one for one, while StragglAR hides up to its pre-arrival phase.
  auto gap = [&](double delay) -> absl::StatusOr<double> {
    const std::vector<double> arrival = OneLateRank(stragglar_plan.num_ranks, late, delay);
    absl::StatusOr<SimulationResult> ours = SimulatePlan(stragglar_plan, bytes, network, arrival);
    if (!ours.ok()) return ours.status();
    absl::StatusOr<double> theirs = baseline_completion(delay);
    if (!theirs.ok()) return theirs.status();
    return ours->completion_s - *theirs;
  };
  absl::StatusOr<double> at_zero = gap(0);
  if (!at_zero.ok()) return at_zero.status();
  if (*at_zero < 0) return 0.0;
  // Past this delay both plans only wait for the straggler, so the gap no longer changes.
  absl::StatusOr<SimulationResult> alone =
      SimulatePlan(stragglar_plan, bytes, network, OneLateRank(stragglar_plan.num_ranks, late, 0));
  if (!alone.ok()) return alone.status();
  double high = 2 * alone->completion_s + 1e-9;
  absl::StatusOr<double> at_high = gap(high);
  if (!at_high.ok()) return at_high.status();
  if (*at_high >= 0) return kNever;
  double low = 0;
  while (high - low > 1e-9) {
    const double middle = (low + high) / 2;
    absl::StatusOr<double> at_middle = gap(middle);
    if (!at_middle.ok()) return at_middle.status();
    (*at_middle < 0 ? high : low) = middle;
  }
  return high;
}

}  // namespace

absl::StatusOr<double> BreakEvenDelay(const Plan& stragglar_plan, const Plan& baseline,
                                      double bytes, const LinkModel& link) {
  return BreakEvenDelay(stragglar_plan, baseline, bytes,
                        NetworkModel::Flat(stragglar_plan.num_ranks, link));
}

namespace {

// BreakEvenDelay against `baseline`, a Plan or a PlanHeader that SimulatePlan prices.
template <typename Baseline>
absl::StatusOr<double> BreakEvenAgainst(const Plan& stragglar_plan, const Baseline& baseline,
                                        double bytes, const NetworkModel& network) {
  if (!stragglar_plan.straggler.has_value() || baseline.num_ranks != stragglar_plan.num_ranks) {
    return absl::InvalidArgumentError(
        "break-even needs a stragglar plan and a baseline with as many ranks");
  }
  const int late = *stragglar_plan.straggler;
  return BisectBreakEven(
      stragglar_plan, bytes, network, [&](double delay) -> absl::StatusOr<double> {
        absl::StatusOr<SimulationResult> result =
            SimulatePlan(baseline, bytes, network, OneLateRank(baseline.num_ranks, late, delay));
        if (!result.ok()) return result.status();
        return result->completion_s;
      });
}

}  // namespace

absl::StatusOr<double> BreakEvenDelay(const Plan& stragglar_plan, const Plan& baseline,
                                      double bytes, const NetworkModel& network) {
  return BreakEvenAgainst(stragglar_plan, baseline, bytes, network);
}

absl::StatusOr<double> BreakEvenDelay(const Plan& stragglar_plan, const PlanHeader& baseline,
                                      double bytes, const NetworkModel& network) {
  return BreakEvenAgainst(stragglar_plan, baseline, bytes, network);
}

absl::StatusOr<double> BreakEvenDelay(const Plan& stragglar_plan, double baseline_seconds,
                                      double bytes, const NetworkModel& network) {
  if (!(baseline_seconds >= 0) || !std::isfinite(baseline_seconds)) {
    return absl::InvalidArgumentError("a baseline's time must be finite and >= 0");
  }
  return BisectBreakEven(
      stragglar_plan, bytes, network,
      [&](double delay) -> absl::StatusOr<double> { return delay + baseline_seconds; });
}

std::vector<int> LogDepthBlockChoices(int num_ranks, double bytes, const LinkModel& link) {
  const double levels = std::bit_width(static_cast<unsigned>(num_ranks)) - 1;
  const double transfer_s = bytes / link.bandwidth_bytes_per_s;
  const double best = link.alpha_s > 0 ? std::sqrt(levels * transfer_s / link.alpha_s)
                                       : static_cast<double>(kMaxLogDepthBlocks);
  const auto clamped = [](double blocks) {
    return static_cast<unsigned>(std::clamp(blocks, 1.0, double{kMaxLogDepthBlocks}));
  };
  const int below = static_cast<int>(std::bit_floor(clamped(best)));
  const int above = static_cast<int>(std::bit_ceil(clamped(best)));
  return below == above ? std::vector<int>{below} : std::vector<int>{below, above};
}

std::vector<int> HierarchicalRailBlockChoices(const Topology& topology, double bytes,
                                              const LinkModel& inter_node) {
  std::vector<int> rail_blocks;
  if (topology.nodes <= kMaxFlatRailNodes) rail_blocks.push_back(0);
  if (topology.multi_node()) {
    for (int blocks :
         LogDepthBlockChoices(topology.nodes, bytes / topology.ranks_per_node, inter_node)) {
      rail_blocks.push_back(blocks);
    }
  }
  return rail_blocks;
}

}  // namespace stragglar
