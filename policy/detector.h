// Detector v1: names a *persistent* straggler from per-call arrival lags that every rank shares
// (after the epoch exchange), so every rank reaches the same verdict at the same call.
//
// Per call, the last rank to arrive "lags" when its lag exceeds the other ranks' median by more
// than max(min_lag_s, noise_multiplier * spread), where spread is a robust standard deviation of
// the other ranks' lags in that call (1.4826 x their median absolute deviation). So the threshold
// follows the noise: a lag of twice the noise is caught, a jitter of the punctual ranks is not.
// Over a sliding window of calls, a rank's persistence is the share of calls in which it lagged.
// Noise makes a random rank last each time (persistence about 1/n per rank), one-off stalls
// count once: neither gets near the bar. A rank is declared at persistence >= enter_ratio (with
// at least min_calls seen) and kept until it falls below exit_ratio, unless another rank lags
// more often and clears the bar itself (the straggler moved). The gap between the ratios is the
// hysteresis that stops one-off stalls and noise from flipping decisions. With a window of 64
// calls and enter_ratio 0.5, a new straggler is named at most 32 calls + one epoch after it
// appears: within 2 epochs of 32 calls.
#pragma once

#include <optional>
#include <vector>

#include "absl/types/span.h"

namespace stragglar {

struct DetectorConfig {
  int window_calls = 64;
  int min_calls = 32;
  double enter_ratio = 0.5;
  double exit_ratio = 0.25;
  double min_lag_s = 20e-6;  // below this a lag is timer noise whatever the spread
  double noise_multiplier = 1.0;
};

class StragglerDetector {
 public:
  StragglerDetector(int num_ranks, DetectorConfig config);

  // One call's lags: lag_s[r] = arrival of rank r minus the earliest arrival (>= 0), one per
  // rank (the constructor's count; a missing rank counts as 0, extra ones are ignored).
  void Observe(absl::Span<const double> lag_s);
  // Starts with `rank` named (a restarted job's saved verdict): kept until a window of min_calls
  // calls shows it below exit_ratio, like any verdict.
  void Seed(int rank) { straggler_ = rank; }

  std::optional<int> straggler() const { return straggler_; }
  // Share of the window's calls in which `rank` lagged.
  double persistence(int rank) const;
  // Median lag of `rank` over the window (0 before any call): the predicted arrival offset.
  double median_lag(int rank) const;
  // median_lag of every rank, into `out` (resized to the rank count).
  void MedianLags(std::vector<double>& out) const;
  double mean_lag(int rank) const;
  int calls_in_window() const { return calls_in_window_; }
  int64_t calls_observed() const { return calls_observed_; }
  const DetectorConfig& config() const { return config_; }

 private:
  // The last rank of this call if it lags beyond the threshold, else -1.
  int LaggingRank(absl::Span<const double> lag_s);
  // The rank's lags over the window, in no particular order.
  absl::Span<const double> LagsOf(int rank) const {
    return {lags_.data() + static_cast<size_t>(rank) * window_slots_,
            static_cast<size_t>(calls_in_window_)};
  }

  int num_ranks_;
  DetectorConfig config_;
  // The window as a ring of window_slots_ calls, rank-major (rank r's lags are contiguous, so a
  // rank's median reads one run of memory: at 1024 ranks, gathering it across per-call vectors was
  // most of what the detector cost). Slot s of every rank is the same call.
  int window_slots_;
  std::vector<double> lags_;
  std::vector<int> lagging_rank_;  // per slot: -1 when no rank lagged beyond the threshold
  int next_slot_ = 0;
  int calls_in_window_ = 0;
  std::vector<int> lag_counts_;  // per rank, within the window
  // Observe's scratch, kept so that a call allocates nothing.
  std::vector<double> others_;
  std::vector<double> padded_;
  std::optional<int> straggler_;
  int64_t calls_observed_ = 0;
};

}  // namespace stragglar
