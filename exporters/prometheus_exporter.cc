#include "exporters/prometheus_exporter.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {

std::string SizeBucketLabel(int64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB"};
  int64_t bound = 1024;
  for (int exponent = 10; exponent <= 30; ++exponent, bound <<= 1) {
    if (bytes <= bound) {
      return absl::StrCat(int64_t{1} << (exponent % 10), kUnits[exponent / 10 - 1]);
    }
  }
  return ">1GiB";
}

const prometheus::Histogram::BucketBoundaries& DurationBuckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = [] {
    prometheus::Histogram::BucketBoundaries bounds;
    // step / 10^k: one correctly rounded division, so the `le` labels read 1e-05, not
    // 9.999999e-06 (which repeated multiplication by 10 would give).
    for (double divisor = 1e6; divisor >= 1; divisor /= 10) {
      for (double step : {1.0, 2.5, 5.0}) bounds.push_back(step / divisor);
    }
    bounds.push_back(10);
    return bounds;
  }();
  return buckets;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address, int port, std::shared_ptr<prometheus::Registry> registry) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " outside [0, 65535]"));
  }
  // civetweb takes IPv6 addresses in brackets.
  const bool ipv6 = address.find(':') != std::string::npos && address.front() != '[';
  const std::string host = ipv6 ? absl::StrCat("[", address, "]") : address;
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // One serving thread: a scrape every few seconds needs no more.
    exposer = std::make_unique<prometheus::Exposer>(absl::StrCat(host, ":", port), 1);
  } catch (const std::exception& error) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", host, ":", port, " (",
                                               error.what(), "; is the port in use?)"));
  }
  exposer->RegisterCollectable(registry);
  const std::vector<int> ports = exposer->GetListeningPorts();
  const int bound = ports.empty() ? port : ports.front();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer), std::move(registry),
                                                          bound, absl::StrCat(host, ":", bound)));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                             std::shared_ptr<prometheus::Registry> registry, int port,
                             std::string endpoint)
    : registry_(std::move(registry)),
      exposer_(std::move(exposer)),
      port_(port),
      endpoint_(std::move(endpoint)) {}

PrometheusObserver::PrometheusObserver(prometheus::Registry& registry, std::string comm,
                                       int num_ranks, const std::vector<int>& exported_ranks)
    : comm_(std::move(comm)),
      calls_family_(prometheus::BuildCounter()
                        .Name("stragglar_collective_calls_total")
                        .Help("Collectives this rank entered, by algorithm")
                        .Register(registry)),
      duration_family_(prometheus::BuildHistogram()
                           .Name("stragglar_collective_duration_seconds")
                           .Help("Time from this rank's arrival to its completion of a collective")
                           .Register(registry)),
      measured_link_family_(prometheus::BuildGauge()
                                .Name("stragglar_link_measured_bytes_per_second")
                                .Help("This rank's own link each way as the slow-link probe "
                                      "measured it, from its fastest and its slowest batch")
                                .Register(registry)),
      ranks_(num_ranks) {
  auto& lag = prometheus::BuildHistogram()
                  .Name("stragglar_arrival_lag_seconds")
                  .Help("How far this rank arrived behind the earliest rank of the same call")
                  .Register(registry);
  auto& wait = prometheus::BuildCounter()
                   .Name("stragglar_wait_seconds_total")
                   .Help("Time this rank waited for the last rank of each call to arrive")
                   .Register(registry);
  auto& straggler = prometheus::BuildGauge()
                        .Name("stragglar_straggler_rank")
                        .Help("The rank named persistent straggler; -1 when none")
                        .Register(registry);
  auto& persistence =
      prometheus::BuildGauge()
          .Name("stragglar_straggler_persistence_ratio")
          .Help("Share of the detector's recent calls in which this rank was the late one")
          .Register(registry);
  auto& saved = prometheus::BuildCounter()
                    .Name("stragglar_time_saved_seconds_total")
                    .Help(
                        "Estimated: modelled time of the default algorithm minus the measured "
                        "time, over calls where the chosen algorithm was faster")
                    .Register(registry);
  auto& lost = prometheus::BuildCounter()
                   .Name("stragglar_time_lost_seconds_total")
                   .Help(
                       "Estimated: measured time minus the modelled time of the default "
                       "algorithm, over calls where the chosen algorithm was slower")
                   .Register(registry);
  auto& slow_link = prometheus::BuildGauge()
                        .Name("stragglar_slow_link_rank")
                        .Help("The rank behind the link the probe found slow; -1 when none")
                        .Register(registry);
  auto& link_bandwidth =
      prometheus::BuildGauge()
          .Name("stragglar_link_bandwidth_bytes_per_second")
          .Help("This rank's link as the policy prices it: the probe's bandwidth per direction")
          .Register(registry);
  auto& switches = prometheus::BuildCounter()
                       .Name("stragglar_policy_switches_total")
                       .Help("Times the policy's algorithm changed for a message size bucket")
                       .Register(registry);
  for (int rank = 0; rank < num_ranks; ++rank) {
    if (!exported_ranks.empty() &&
        std::find(exported_ranks.begin(), exported_ranks.end(), rank) == exported_ranks.end()) {
      continue;
    }
    const prometheus::Labels labels = RankLabels(rank);
    RankSeries& series = ranks_[rank];
    series.exported = true;
    series.lag = &lag.Add(labels, DurationBuckets());
    series.wait = &wait.Add(labels);
    series.straggler = &straggler.Add(labels);
    series.straggler->Set(-1);
    series.persistence = &persistence.Add(labels);
    series.slow_link = &slow_link.Add(labels);
    series.slow_link->Set(-1);
    series.link_bandwidth = &link_bandwidth.Add(labels);
    series.saved = &saved.Add(labels);
    series.lost = &lost.Add(labels);
    series.switches = &switches.Add(labels);
    // Every algorithm at 0 from the start, so rate() sees the first calls of each.
    for (Algorithm algorithm : kAllAlgorithms) {
      prometheus::Labels with_algorithm = labels;
      with_algorithm.emplace("algorithm", std::string(AlgorithmName(algorithm)));
      series.calls[algorithm] = &calls_family_.Add(with_algorithm);
    }
  }
}

prometheus::Labels PrometheusObserver::RankLabels(int rank) const {
  return {{"comm", comm_}, {"rank", absl::StrCat(rank)}};
}

void PrometheusObserver::OnStart(int rank, const CallDecision& decision, int64_t bytes) {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size()) || !ranks_[rank].exported) return;
  ranks_[rank].calls[decision.algorithm]->Increment();
}

void PrometheusObserver::OnCall(int rank, const CallDecision& decision, int64_t bytes,
                                const CallTiming& timing) {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size()) || !ranks_[rank].exported) return;
  RankSeries& series = ranks_[rank];
  std::string size_bucket = SizeBucketLabel(bytes);
  auto key = std::make_pair(decision.algorithm, size_bucket);
  auto duration = series.duration.find(key);
  if (duration == series.duration.end()) {
    prometheus::Labels labels = RankLabels(rank);
    labels.emplace("algorithm", std::string(AlgorithmName(decision.algorithm)));
    labels.emplace("size_bucket", size_bucket);
    duration = series.duration.emplace(key, &duration_family_.Add(labels, DurationBuckets())).first;
  }
  duration->second->Observe(timing.duration_s);
  // Exploration calls are deliberate one-offs, not the policy changing its mind.
  if (decision.explored) return;
  auto [chosen, first] = series.chosen.try_emplace(size_bucket, decision.algorithm);
  if (!first && chosen->second != decision.algorithm) {
    chosen->second = decision.algorithm;
    series.switches->Increment();
  }
}

void PrometheusObserver::OnEpoch(int rank, const EpochReport& report) {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size()) || !ranks_[rank].exported) return;
  RankSeries& series = ranks_[rank];
  for (const EpochCallReport& call : report.calls) {
    if (rank >= static_cast<int>(call.lag_s.size())) continue;
    const double lag = call.lag_s[rank];
    series.lag->Observe(lag);
    const double last = *std::max_element(call.lag_s.begin(), call.lag_s.end());
    series.wait->Increment(last - lag);
    if (call.saved_s > 0) series.saved->Increment(call.saved_s);
    if (call.saved_s < 0) series.lost->Increment(-call.saved_s);
  }
  series.straggler->Set(report.straggler.value_or(-1));
  series.slow_link->Set(report.link.slow_rank);
  series.link_bandwidth->Set(report.link.RankBandwidth(rank));
  if (rank < static_cast<int>(report.link_speeds.size())) {
    const RankLinkSpeed& speed = report.link_speeds[rank];
    const std::array<double, 4> measured = {speed.send_bytes_per_s, speed.receive_bytes_per_s,
                                            speed.slowest_send_bytes_per_s,
                                            speed.slowest_receive_bytes_per_s};
    for (size_t i = 0; i < measured.size(); ++i) {
      if (series.measured_link[i] == nullptr) {
        prometheus::Labels labels = RankLabels(rank);
        labels.emplace("direction", i % 2 == 0 ? "send" : "receive");
        labels.emplace("batch", i < 2 ? "fastest" : "slowest");
        series.measured_link[i] = &measured_link_family_.Add(labels);
      }
      series.measured_link[i]->Set(measured[i]);
    }
  }
  if (rank < static_cast<int>(report.persistence.size())) {
    series.persistence->Set(report.persistence[rank]);
  }
}

}  // namespace stragglar
