// Prometheus metrics for operators (the contract's names, prefix stragglar_, labels comm and
// rank), fed by the runtime's observer hooks, served by prometheus-cpp's pull exposer.
//
// What each metric means (docs/monitoring.md has the dashboard and alerts built on them):
//   stragglar_collective_calls_total{algorithm}            calls this rank entered, per algorithm
//   stragglar_collective_duration_seconds{algorithm,size_bucket}  arrival -> completion (histogram)
//   stragglar_arrival_lag_seconds                          behind the call's earliest rank
//   (histogram) stragglar_wait_seconds_total                           waiting for the call's last
//   rank, summed stragglar_straggler_rank                               the named persistent
//   straggler, -1: none stragglar_straggler_persistence_ratio                  share of the window
//   this rank lagged stragglar_time_saved_seconds_total / _time_lost_...    estimated vs the
//   default algorithm stragglar_policy_switches_total                        chosen algorithm
//   changed for a size
// calls_total counts on entry (a hung call shows as the ranks that entered it being one ahead),
// the duration histogram on completion; both at once; the others at each epoch exchange (when every
// rank's arrival is known).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "exporters/observer.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace stragglar {

// The size_bucket label of a message: the smallest power of two >= bytes, from "1KiB" (every
// message up to 1 KiB) to "1GiB", and ">1GiB" above: 21 values at most, whatever the job sends.
std::string SizeBucketLabel(int64_t bytes);

// Histogram boundaries from 1 us to 10 s in 1-2.5-5 steps (collective times and lags).
const prometheus::Histogram::BucketBoundaries& DurationBuckets();

// Serves a registry at http://address:port/metrics.
class MetricsServer {
 public:
  // Binds `address`:`port` (port 0: any free port). Unavailable, naming the address, when it
  // cannot bind (typically: the port is in use), so the caller can log one line and go on.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, int port, std::shared_ptr<prometheus::Registry> registry);

  // The port actually bound (the chosen one when started with port 0).
  int port() const { return port_; }
  // "address:port", e.g. for a log line.
  const std::string& endpoint() const { return endpoint_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                std::shared_ptr<prometheus::Registry> registry, int port, std::string endpoint);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
  std::string endpoint_;
};

// Exports one communicator's ranks into `registry` (label comm = `comm`). Several observers (one
// per communicator) may share a registry: the families are shared, the label sets differ.
// `exported_ranks`: the ranks whose series this process serves (a preload library: its own rank,
// so that no two endpoints export the same series); empty: all of them (ranks as threads).
class PrometheusObserver : public CollectiveObserver {
 public:
  PrometheusObserver(prometheus::Registry& registry, std::string comm, int num_ranks,
                     const std::vector<int>& exported_ranks = {});

  void OnStart(int rank, const CallDecision& decision, int64_t bytes) override;
  void OnCall(int rank, const CallDecision& decision, int64_t bytes,
              const CallTiming& timing) override;
  void OnEpoch(int rank, const EpochReport& report) override;

 private:
  // One rank's series; only that rank's thread touches it, so it needs no lock (prometheus-cpp's
  // metrics and families are themselves thread-safe).
  struct RankSeries {
    bool exported = false;
    prometheus::Histogram* lag = nullptr;
    prometheus::Counter* wait = nullptr;
    prometheus::Gauge* straggler = nullptr;
    prometheus::Gauge* persistence = nullptr;
    prometheus::Gauge* slow_link = nullptr;       // the rank behind the slow link, or -1
    prometheus::Gauge* link_bandwidth = nullptr;  // this rank's link, bytes/s per direction
    // This rank's link each way as the slow-link probe measured it: send and receive, from the
    // fastest batch and from the slowest. Added at the first report that has them.
    std::array<prometheus::Gauge*, 4> measured_link{};
    prometheus::Counter* saved = nullptr;
    prometheus::Counter* lost = nullptr;
    prometheus::Counter* switches = nullptr;
    std::map<Algorithm, prometheus::Counter*> calls;
    std::map<std::pair<Algorithm, std::string>, prometheus::Histogram*> duration;
    // The last algorithm the policy chose (not explored) per size bucket, for switches.
    std::map<std::string, Algorithm> chosen;
  };

  prometheus::Labels RankLabels(int rank) const;

  std::string comm_;
  prometheus::Family<prometheus::Counter>& calls_family_;
  prometheus::Family<prometheus::Histogram>& duration_family_;
  prometheus::Family<prometheus::Gauge>& measured_link_family_;
  std::vector<RankSeries> ranks_;
};

}  // namespace stragglar
