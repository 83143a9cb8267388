#include "pipeline/link_monitor.h"

#include <algorithm>
#include <bit>

#include "base/statistics.h"

namespace stragglar {
namespace {

// The power-of-two bucket of a size: transfers within a factor of two share a baseline.
int SizeBucket(int64_t bytes) {
  return bytes <= 1 ? 0 : std::bit_width(static_cast<uint64_t>(bytes - 1));
}

}  // namespace

std::vector<Link> PipelineLinks(int stages) {
  std::vector<Link> links;
  for (int i = 0; i + 1 < stages; ++i) {
    links.push_back({i, i + 1});
    links.push_back({i + 1, i});
  }
  return links;
}

LinkMonitor::LinkMonitor(std::vector<Link> links, LinkMonitorConfig config)
    : links_(std::move(links)),
      config_(config),
      detector_(static_cast<int>(links_.size()), config.detector),
      baselines_(links_.size()),
      epoch_(links_.size()) {}

int LinkMonitor::IndexOf(Link link) const {
  const auto it = std::find(links_.begin(), links_.end(), link);
  return it == links_.end() ? -1 : static_cast<int>(it - links_.begin());
}

double LinkMonitor::ExpectedSeconds(int link, int64_t bytes) const {
  const auto& baselines = baselines_[link];
  const auto it = baselines.find(SizeBucket(bytes));
  return it == baselines.end() ? 0 : it->second.seconds_per_byte * std::max<int64_t>(bytes, 1);
}

void LinkMonitor::Record(int link, int64_t bytes, double seconds) {
  const int64_t counted_bytes = std::max<int64_t>(bytes, 1);
  const double per_byte = seconds / counted_bytes;
  auto [it, first] = baselines_[link].try_emplace(SizeBucket(bytes));
  Baseline& baseline = it->second;
  // The expectation before this transfer: its own time when it is the first of its size.
  const double expected = (first ? per_byte : baseline.seconds_per_byte) * counted_bytes;
  const double delay_s = std::max(0.0, seconds - expected);
  const double excess_s = std::max(0.0, seconds - (1 + config_.tolerance) * expected);
  epoch_[link].push_back({seconds, delay_s, excess_s});
  if (baseline.transfers < kLearnTransfers) {
    baseline.first.push_back(per_byte);
    baseline.seconds_per_byte = Median(baseline.first);
    if (++baseline.transfers == kLearnTransfers) baseline.first = {};  // learned: memory back
    return;
  }
  // Following the median: a step up for a slower transfer, down for a faster one, so that
  // stalls move it no more than fast transfers do.
  if (per_byte > baseline.seconds_per_byte) {
    baseline.seconds_per_byte *= 1 + config_.baseline_drift;
  } else if (per_byte < baseline.seconds_per_byte) {
    baseline.seconds_per_byte /= 1 + config_.baseline_drift;
  }
}

LinkEpochReport LinkMonitor::EndEpoch() {
  const int num_links = static_cast<int>(links_.size());
  size_t observations = 0;
  std::vector<double> median(num_links);
  for (int l = 0; l < num_links; ++l) {
    observations = std::max(observations, epoch_[l].size());
    std::vector<double> excesses;
    for (const Transfer& transfer : epoch_[l]) excesses.push_back(transfer.excess_s);
    median[l] = MedianInPlace(excesses);
  }
  // The k-th transfers of every link; a link with fewer transfers this epoch stands in with its
  // median, so it neither hides nor stands out.
  std::vector<double> excess_s(num_links);
  for (size_t k = 0; num_links >= 2 && k < observations; ++k) {
    for (int l = 0; l < num_links; ++l) {
      excess_s[l] = k < epoch_[l].size() ? epoch_[l][k].excess_s : median[l];
    }
    detector_.Observe(excess_s);
  }
  LinkEpochReport report;
  for (int l = 0; l < num_links; ++l) {
    LinkSummary summary{.link = links_[l],
                        .transfers = static_cast<int>(epoch_[l].size()),
                        .persistence = detector_.persistence(l)};
    for (const Transfer& transfer : epoch_[l]) {
      summary.mean_seconds += transfer.seconds / epoch_[l].size();
      summary.mean_delay_s += transfer.delay_s / epoch_[l].size();
    }
    report.links.push_back(summary);
    epoch_[l].clear();
  }
  if (detector_.straggler().has_value()) report.slow_link = links_[*detector_.straggler()];
  return report;
}

}  // namespace stragglar
