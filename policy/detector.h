// Detector v1: names a *persistent* straggler from per-call arrival lags that every rank shares
// (after the epoch exchange), so every rank reaches the same verdict at the same call.
//
// Per call, the last rank to arrive "lags" when its lag exceeds the median rank's lag by more than
// max(min_lag_s, noise_multiplier * median lag). The median rank's lag measures how far punctual
// ranks scatter, but on oversubscribed hosts that scatter can be as large as the straggler's delay
// while the straggler is still last almost every time, so the multiplier is off by default: being
// last, by a clear absolute margin, in most calls is the signal. Over a sliding window of calls, a
// rank's persistence is the share of calls in which it lagged. A rank is declared at persistence >=
// enter_ratio (with at least min_calls seen) and kept until it falls below exit_ratio: the gap is
// the hysteresis that stops one-off stalls and noise from flipping decisions.
#pragma once

#include <deque>
#include <optional>
#include <vector>

#include "absl/types/span.h"

namespace stragglar {

struct DetectorConfig {
  int window_calls = 128;
  int min_calls = 32;
  double enter_ratio = 0.6;
  double exit_ratio = 0.3;
  double min_lag_s = 500e-6;
  double noise_multiplier = 0.0;
};

class StragglerDetector {
 public:
  StragglerDetector(int num_ranks, DetectorConfig config);

  // One call's lags: lag_s[r] = arrival of rank r minus the earliest arrival (>= 0).
  void Observe(absl::Span<const double> lag_s);

  std::optional<int> straggler() const { return straggler_; }
  // Share of the window's calls in which `rank` lagged.
  double persistence(int rank) const;
  // Median lag of `rank` over the window (0 before any call): the predicted arrival offset.
  double median_lag(int rank) const;
  double mean_lag(int rank) const;
  int calls_in_window() const { return static_cast<int>(window_.size()); }
  int64_t calls_observed() const { return calls_observed_; }
  const DetectorConfig& config() const { return config_; }

 private:
  struct CallSummary {
    std::vector<double> lag_s;
    int lagging_rank = -1;  // -1 when no rank lagged beyond the threshold
  };

  int num_ranks_;
  DetectorConfig config_;
  std::deque<CallSummary> window_;
  std::vector<int> lag_counts_;  // per rank, within the window
  std::optional<int> straggler_;
  int64_t calls_observed_ = 0;
};

}  // namespace stragglar
