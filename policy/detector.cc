#include "policy/detector.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/statistics.h"

namespace stragglar {

StragglerDetector::StragglerDetector(int num_ranks, DetectorConfig config)
    : num_ranks_(num_ranks),
      config_(config),
      window_slots_(std::max(1, config.window_calls)),
      lags_(static_cast<size_t>(std::max(num_ranks, 0)) * window_slots_, 0.0),
      lagging_rank_(window_slots_, -1),
      lag_counts_(num_ranks, 0) {}

void StragglerDetector::Observe(absl::Span<const double> lag_s) {
  if (static_cast<int>(lag_s.size()) < num_ranks_) {  // missing ranks count as 0
    padded_.assign(lag_s.begin(), lag_s.end());
    padded_.resize(num_ranks_, 0.0);
    lag_s = padded_;
  }
  lag_s = lag_s.first(num_ranks_);
  const int lagging_rank = LaggingRank(lag_s);
  if (lagging_rank >= 0) ++lag_counts_[lagging_rank];
  // The slot of the oldest call, which this one replaces once the window is full.
  const int slot = next_slot_;
  if (calls_in_window_ == window_slots_) {
    if (lagging_rank_[slot] >= 0) --lag_counts_[lagging_rank_[slot]];
  } else {
    ++calls_in_window_;
  }
  lagging_rank_[slot] = lagging_rank;
  for (int rank = 0; rank < num_ranks_; ++rank) {
    lags_[static_cast<size_t>(rank) * window_slots_ + slot] = lag_s[rank];
  }
  next_slot_ = (slot + 1) % window_slots_;
  ++calls_observed_;

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

int StragglerDetector::LaggingRank(absl::Span<const double> lag_s) {
  if (lag_s.empty()) return -1;
  const int last = static_cast<int>(std::max_element(lag_s.begin(), lag_s.end()) - lag_s.begin());
  // How the other ranks scatter in this call: their median and a robust standard deviation
  // (1.4826 x the median absolute deviation, which one outlier cannot move much).
  others_.assign(lag_s.begin(), lag_s.begin() + last);
  others_.insert(others_.end(), lag_s.begin() + last + 1, lag_s.end());
  const double typical = MedianInPlace(others_);
  const double lead_s = lag_s[last] - typical;
  // It lags when lead_s > max(min_lag_s, noise_multiplier * 1.4826 * MAD).
  if (!(lead_s > config_.min_lag_s)) return -1;
  // The MAD itself is not needed, only which side of that bar it falls on: the threshold is
  // monotonic in a deviation, so the deviations under it are a prefix of their sorted order, and
  // the median (the upper one, at index size / 2) is under it exactly when more than size / 2 of
  // them are. The same expression per deviation as on the median, so the same verdict, bit for
  // bit, without a second selection.
  size_t under = 0;
  for (double value : others_) {
    under += config_.noise_multiplier * (1.4826 * std::abs(value - typical)) < lead_s ? 1 : 0;
  }
  return others_.empty() || under > others_.size() / 2 ? last : -1;
}

double StragglerDetector::persistence(int rank) const {
  return calls_in_window_ == 0 ? 0 : static_cast<double>(lag_counts_[rank]) / calls_in_window_;
}

double StragglerDetector::median_lag(int rank) const {
  const absl::Span<const double> lags = LagsOf(rank);
  return Median(std::vector<double>(lags.begin(), lags.end()));
}

void StragglerDetector::MedianLags(std::vector<double>& out) const {
  out.resize(num_ranks_);
  std::vector<double> scratch;
  for (int rank = 0; rank < num_ranks_; ++rank) {
    const absl::Span<const double> lags = LagsOf(rank);
    scratch.assign(lags.begin(), lags.end());
    out[rank] = MedianInPlace(scratch);
  }
}

double StragglerDetector::mean_lag(int rank) const {
  if (calls_in_window_ == 0) return 0;
  // Oldest call first, so the sum rounds the same whatever slot the window starts at.
  const absl::Span<const double> lags = LagsOf(rank);
  const int oldest = calls_in_window_ == window_slots_ ? next_slot_ : 0;
  double sum = 0;
  for (int i = 0; i < calls_in_window_; ++i) sum += lags[(oldest + i) % calls_in_window_];
  return sum / calls_in_window_;
}

}  // namespace stragglar
