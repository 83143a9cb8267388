#include "runtime/replay/replay.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

// Incomplete calls listed one by one in the report; the rest are counted.
constexpr size_t kMaxListedIncompleteCalls = 100;

}  // namespace

nlohmann::json StragglersJson(absl::Span<const DetectionEvent> detections) {
  nlohmann::json stragglers = nlohmann::json::array();
  for (const DetectionEvent& event : detections) {
    if (event.straggler.has_value()) {
      stragglers.push_back({{"rank", *event.straggler},
                            {"detected_at_call", event.call},
                            {"persistence", event.persistence},
                            {"mean_lag_s", event.mean_lag_s}});
    } else if (!stragglers.empty()) {
      stragglers.back()["cleared_at_call"] = event.call;
    }
  }
  return stragglers;
}

// Gathers from the timings the replay was given: the epoch's calls, every rank's timing of each.
class PolicyReplayer::Backend final : public CommBackend {
 public:
  Backend(int num_ranks, bool deferred) : num_ranks_(num_ranks), deferred_(deferred) {}

  // Timings are given, never measured.
  double Now() override { return 0; }
  // Exactly what the online backends hand to AbsorbEpoch: every rank's [arrival, duration] per
  // call of the gathered epoch (the oldest calls not gathered yet: deferred, later calls are
  // already in), rank after rank.
  absl::Status StartGather(absl::Span<const double> mine) override {
    const size_t calls = mine.size() / 2;
    if (calls > epoch_.size()) return absl::InternalError("replay: gathering calls not given");
    gathered_.clear();
    gathered_.reserve(2 * calls * num_ranks_);
    for (int rank = 0; rank < num_ranks_; ++rank) {
      for (size_t call = 0; call < calls; ++call) {
        gathered_.push_back(epoch_[call][rank].arrival_s);
        gathered_.push_back(epoch_[call][rank].duration_s);
      }
    }
    epoch_.erase(epoch_.begin(), epoch_.begin() + calls);
    return absl::OkStatus();
  }
  bool DefersExchange() const override { return deferred_; }
  absl::StatusOr<std::vector<double>> FinishGather() override { return std::move(gathered_); }
  // One process plays every rank: rank 0's text is everyone's.
  absl::Status BroadcastFromRankZero(std::string& text) override { return absl::OkStatus(); }

  void Add(std::vector<CallTiming> call) { epoch_.push_back(std::move(call)); }

 private:
  int num_ranks_;
  bool deferred_;
  std::deque<std::vector<CallTiming>> epoch_;  // [call not gathered yet][rank]
  std::vector<double> gathered_;
};

namespace {

// A replayed call's work: nothing runs; its timings are the ones given for the decision.
class ReplayedCall final : public CallWork {
 public:
  ReplayedCall(int num_ranks,
               absl::FunctionRef<absl::StatusOr<ReplayedTimings>(const CallDecision&)> timings,
               absl::FunctionRef<void(std::vector<CallTiming>)> gather)
      : num_ranks_(num_ranks), timings_(timings), gather_(gather) {}

  CallOutcome Run(const CallDecision& decision, const RankProgram* program) override {
    absl::StatusOr<ReplayedTimings> timings = timings_(decision);
    if (!timings.ok()) return {.status = timings.status()};
    if (static_cast<int>(timings->by_rank.size()) != num_ranks_) {
      return {.status = absl::InvalidArgumentError(absl::StrCat(
                  "replay: ", timings->by_rank.size(), " timings for ", num_ranks_, " ranks"))};
    }
    const CallTiming mine = timings->by_rank[0];
    gather_(std::move(timings->by_rank));
    return {.timing = mine, .measured = timings->measured};
  }
  bool RunsPlans() const override { return false; }

 private:
  int num_ranks_;
  absl::FunctionRef<absl::StatusOr<ReplayedTimings>(const CallDecision&)> timings_;
  absl::FunctionRef<void(std::vector<CallTiming>)> gather_;
};

}  // namespace

absl::StatusOr<PolicyReplayer> PolicyReplayer::Create(
    RuntimeConfig config, int num_ranks, LinkModel link, bool deferred_exchange,
    std::function<std::optional<LinkModel>(const EpochReport&)> replayed_link) {
  config.mode = RuntimeMode::kAdapt;
  auto backend = std::make_unique<Backend>(num_ranks, deferred_exchange);
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      Communicator::Create(/*rank=*/0, num_ranks,
                           {.runtime = std::move(config),
                            .name = "replay",
                            .link = link,
                            .replayed_link = std::move(replayed_link)},
                           *backend);
  if (!comm.ok()) return comm.status();
  return PolicyReplayer(std::move(backend), *std::move(comm));
}

PolicyReplayer::PolicyReplayer(std::unique_ptr<Backend> backend, std::unique_ptr<Communicator> comm)
    : backend_(std::move(backend)), comm_(std::move(comm)) {}
PolicyReplayer::PolicyReplayer(PolicyReplayer&&) = default;
PolicyReplayer& PolicyReplayer::operator=(PolicyReplayer&&) = default;
PolicyReplayer::~PolicyReplayer() = default;

const RuntimeCore& PolicyReplayer::core() const { return comm_->core(); }

absl::StatusOr<CallDecision> PolicyReplayer::Call(
    int64_t bytes,
    absl::FunctionRef<absl::StatusOr<ReplayedTimings>(const CallDecision&)> timings) {
  // Named, so that it outlives the FunctionRef the work holds to it.
  const auto gather = [this](std::vector<CallTiming> call) { backend_->Add(std::move(call)); };
  ReplayedCall work(core().num_ranks(), timings, gather);
  return comm_->AllReduce(bytes, /*in_place=*/true, work);
}

absl::StatusOr<SimulationResult> PolicyReplayer::Price(const CallDecision& decision, int64_t bytes,
                                                       absl::Span<const double> arrival_s) {
  return comm_->Price(decision, bytes, arrival_s);
}

std::optional<LinkModel> SlowLinkFromTrace(const LinkModel& base,
                                           absl::Span<const double> link_bytes_per_s) {
  if (link_bytes_per_s.empty() || std::any_of(link_bytes_per_s.begin(), link_bytes_per_s.end(),
                                              [](double speed) { return !(speed > 0); })) {
    return std::nullopt;
  }
  std::vector<double> sorted(link_bytes_per_s.begin(), link_bytes_per_s.end());
  const size_t median = (sorted.size() - 1) / 2;  // the probe's median round, as a speed
  std::nth_element(sorted.begin(), sorted.begin() + median, sorted.end());
  const auto slowest = std::min_element(link_bytes_per_s.begin(), link_bytes_per_s.end());
  const double factor = sorted[median] / *slowest;
  LinkModel link = base;
  link.slow_rank = -1;
  link.slow_factor = 1;
  // The trace keeps 9 significant digits: a factor the run priced at exactly the bar reads back a
  // hair under it.
  if (factor >= kSlowRankRatio * (1 - 1e-6)) {
    link.slow_rank = static_cast<int>(slowest - link_bytes_per_s.begin());
    link.slow_factor = factor;
  }
  return link;
}

namespace {

// The slow links a replay followed, in the report's form.
nlohmann::json SlowLinksJson(const std::vector<std::pair<int64_t, LinkModel>>& changes) {
  nlohmann::json slow_links = nlohmann::json::array();
  int named = -1;
  for (const auto& [call, link] : changes) {
    if (link.slow_rank == named) continue;
    if (named >= 0) slow_links.back()["cleared_at_call"] = call;
    if (link.has_slow_rank()) {
      slow_links.push_back({{"rank", link.slow_rank},
                            {"detected_at_call", call},
                            {"slow_factor", link.slow_factor}});
    }
    named = link.slow_rank;
  }
  return slow_links;
}

// Per message size: how often each algorithm was chosen and the modelled time of the policy's
// choice, of always-Ring and of always-Halving-Doubling on each call's real arrivals.
struct SizeTotals {
  int64_t calls = 0;
  int64_t explored = 0;  // calls that ran an exploration candidate (included in `mix`)
  std::map<std::string, int64_t> mix;
  double policy_s = 0, ring_s = 0, halving_doubling_s = 0;
};

// Replays one complete call and adds what its choice and the baselines cost to `totals`.
absl::Status ReplayCall(PolicyReplayer& replayer, const Trace::Call& call, LagSource lag_source,
                        std::vector<CallTiming>& timing, SizeTotals& totals) {
  for (size_t rank = 0; rank < timing.size(); ++rank) timing[rank] = *call.rank[rank];
  absl::StatusOr<CallDecision> decision =
      replayer.Call(call.bytes, [&](const CallDecision& decided) {
        // The trace's durations measure what ran online; the calibration may credit them to this
        // replay's choice only when that is what ran (not another policy's choice, or native
        // NCCL).
        return ReplayedTimings{
            .by_rank = timing,
            .measured = call.algorithm.has_value() && *call.algorithm == decided.algorithm};
      });
  if (!decision.ok()) return decision.status();
  const std::vector<double> lag_s = LagsFromTimings(timing, lag_source);
  double seconds[3];
  const CallDecision priced[3] = {
      *decision, {.algorithm = Algorithm::kRing}, {.algorithm = Algorithm::kHalvingDoubling}};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<SimulationResult> result = replayer.Price(priced[i], call.bytes, lag_s);
    if (!result.ok()) return result.status();
    seconds[i] = result->after_last_arrival_s;
  }
  ++totals.calls;
  ++totals.mix[std::string(AlgorithmName(decision->algorithm))];
  if (decision->explored) ++totals.explored;
  totals.policy_s += seconds[0];
  totals.ring_s += seconds[1];
  totals.halving_doubling_s += seconds[2];
  return absl::OkStatus();
}

// The report's "decisions" per size, with what the policy decides for each now that it has seen
// the whole trace, and the "predicted" totals over every size.
absl::Status DecisionsJson(PolicyReplayer& replayer, const std::map<int64_t, SizeTotals>& sizes,
                           const LinkModel& link, nlohmann::json& decisions,
                           nlohmann::json& predicted) {
  decisions = nlohmann::json::object();
  double policy_total = 0, ring_total = 0, hd_total = 0;
  for (const auto& [bytes, totals] : sizes) {
    absl::StatusOr<CallDecision> final_decision = replayer.Preview(bytes);
    if (!final_decision.ok()) return final_decision.status();
    decisions[std::to_string(bytes)] = {
        {"algorithm", AlgorithmName(final_decision->algorithm)},
        {"straggler", final_decision->straggler.has_value()
                          ? nlohmann::json(*final_decision->straggler)
                          : nlohmann::json(nullptr)},
        {"calls", totals.calls},
        {"mix", totals.mix},
        {"explored", totals.explored},
        {"predicted_s",
         {{"policy", totals.policy_s},
          {"ring", totals.ring_s},
          {"halving_doubling", totals.halving_doubling_s}}},
        {"saved_vs_ring_s", totals.ring_s - totals.policy_s},
        {"saved_vs_halving_doubling_s", totals.halving_doubling_s - totals.policy_s},
    };
    policy_total += totals.policy_s;
    ring_total += totals.ring_s;
    hd_total += totals.halving_doubling_s;
  }
  predicted = {{"link", {{"alpha_s", link.alpha_s}, {"bandwidth_Bps", link.bandwidth_bytes_per_s}}},
               {"policy_s", policy_total},
               {"ring_s", ring_total},
               {"halving_doubling_s", hd_total},
               {"saved_vs_ring_s", ring_total - policy_total},
               {"saved_vs_halving_doubling_s", hd_total - policy_total}};
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> ReplayTrace(const Trace& trace, const ReplayOptions& options) {
  const int n = trace.num_ranks;
  if (n < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("the trace has ", n, " rank(s); replay needs at least 2"));
  }
  std::vector<const Trace::Call*> replayed_calls;  // the trace's call of every replayed call
  // The trace's links, each call the last of the epoch whose rows first show a new one.
  std::vector<std::pair<int64_t, LinkModel>> link_changes;
  const std::optional<Topology>& topology = options.config.topology;
  const bool follow_links =
      trace.has_link_column &&
      (!topology.has_value() || !topology->multi_node() || topology->ranks_per_node == 1);
  const auto replayed_link = [&](const EpochReport& report) -> std::optional<LinkModel> {
    if (report.calls.empty()) return std::nullopt;
    const Trace::Call& last =
        *replayed_calls[report.first_call + static_cast<int64_t>(report.calls.size()) - 1];
    std::optional<LinkModel> link = SlowLinkFromTrace(options.link, last.link_bytes_per_s);
    if (link.has_value() &&
        (link_changes.empty() ? link->has_slow_rank()
                              : KeyOf(0, *link) != KeyOf(0, link_changes.back().second))) {
      link_changes.emplace_back(last.call, *link);
    }
    return link;
  };
  absl::StatusOr<PolicyReplayer> replayer = PolicyReplayer::Create(
      options.config, n, options.link, options.deferred_exchange,
      follow_links ? std::function<std::optional<LinkModel>(const EpochReport&)>(replayed_link)
                   : nullptr);
  if (!replayer.ok()) return replayer.status();
  nlohmann::json incomplete = nlohmann::json::array();
  int64_t incomplete_total = 0;
  std::map<int64_t, SizeTotals> sizes;
  std::vector<CallTiming> timing(n);
  for (const Trace::Call& call : trace.calls) {
    std::vector<int> missing;
    for (int rank = 0; rank < n; ++rank) {
      if (!call.rank[rank].has_value()) missing.push_back(rank);
    }
    if (!missing.empty()) {
      if (incomplete.size() < kMaxListedIncompleteCalls) {
        incomplete.push_back({{"call", call.call}, {"missing_ranks", missing}});
      }
      ++incomplete_total;
      continue;
    }
    replayed_calls.push_back(&call);
    if (absl::Status status =
            ReplayCall(*replayer, call, options.config.lag_source, timing, sizes[call.bytes]);
        !status.ok()) {
      return status;
    }
  }
  // The core counts the calls it saw; report the trace's own call indices (it may start anywhere,
  // have gaps, or have skipped incomplete calls).
  std::vector<DetectionEvent> detections = replayer->core().detections();
  for (DetectionEvent& event : detections) event.call = replayed_calls[event.call]->call;
  nlohmann::json decisions, predicted;
  if (absl::Status status = DecisionsJson(*replayer, sizes, options.link, decisions, predicted);
      !status.ok()) {
    return status;
  }
  return nlohmann::json{
      {"ranks", n},
      {"calls", static_cast<int64_t>(replayed_calls.size())},
      {"rows", trace.rows},
      {"duplicate_rows", trace.duplicate_rows},
      {"incomplete_calls", incomplete},
      {"incomplete_calls_total", incomplete_total},
      {"epoch_calls", options.config.epoch_calls},
      {"exchange", options.deferred_exchange ? "deferred" : "immediate"},
      {"lags", options.config.lag_source == LagSource::kDuration ? "duration" : "arrival"},
      {"stragglers", StragglersJson(detections)},
      {"link_column", trace.has_link_column},
      {"slow_links", SlowLinksJson(link_changes)},
      {"calibration", replayer->core().calibration().ToJson()},
      {"decisions", decisions},
      {"predicted", predicted},
  };
}

}  // namespace stragglar
