#include "policy/detector.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "policy/statistics.h"

namespace stragglar {

StragglerDetector::StragglerDetector(int num_ranks, DetectorConfig config)
    : num_ranks_(num_ranks), config_(config), lag_counts_(num_ranks, 0) {}

void StragglerDetector::Observe(absl::Span<const double> lag_s) {
  CallSummary call{.lag_s = std::vector<double>(lag_s.begin(), lag_s.end())};
  const int last = static_cast<int>(std::max_element(lag_s.begin(), lag_s.end()) - lag_s.begin());
  // How the other ranks scatter in this call: their median and a robust standard deviation
  // (1.4826 x the median absolute deviation, which one outlier cannot move much).
  std::vector<double> others;
  others.reserve(lag_s.size());
  for (int rank = 0; rank < static_cast<int>(lag_s.size()); ++rank) {
    if (rank != last) others.push_back(lag_s[rank]);
  }
  const double typical = Median(others);
  for (double& value : others) value = std::abs(value - typical);
  const double spread = 1.4826 * Median(std::move(others));
  if (lag_s[last] - typical > std::max(config_.min_lag_s, config_.noise_multiplier * spread)) {
    call.lagging_rank = last;
    ++lag_counts_[last];
  }
  window_.push_back(std::move(call));
  ++calls_observed_;
  if (static_cast<int>(window_.size()) > config_.window_calls) {
    if (window_.front().lagging_rank >= 0) --lag_counts_[window_.front().lagging_rank];
    window_.pop_front();
  }

  // A young window says little either way: verdicts change only once it holds min_calls calls.
  if (calls_in_window() < config_.min_calls) return;
  if (straggler_.has_value() && persistence(*straggler_) < config_.exit_ratio) straggler_.reset();
  const int candidate = static_cast<int>(std::max_element(lag_counts_.begin(), lag_counts_.end()) -
                                         lag_counts_.begin());
  // A new rank is named when it lags in most calls; it also takes over from a named rank that now
  // lags less often (the straggler moved), without waiting for the old one to fall below exit.
  if (persistence(candidate) >= config_.enter_ratio &&
      (!straggler_.has_value() || persistence(candidate) > persistence(*straggler_))) {
    straggler_ = candidate;
  }
}

double StragglerDetector::persistence(int rank) const {
  return window_.empty() ? 0 : static_cast<double>(lag_counts_[rank]) / window_.size();
}

double StragglerDetector::median_lag(int rank) const {
  std::vector<double> lags;
  lags.reserve(window_.size());
  for (const CallSummary& call : window_) lags.push_back(call.lag_s[rank]);
  return Median(std::move(lags));
}

double StragglerDetector::mean_lag(int rank) const {
  if (window_.empty()) return 0;
  double sum = 0;
  for (const CallSummary& call : window_) sum += call.lag_s[rank];
  return sum / window_.size();
}

}  // namespace stragglar
