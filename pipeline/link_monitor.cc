#include "pipeline/link_monitor.h"

#include <algorithm>
#include <bit>

namespace stragglar {
namespace {

// The power-of-two bucket of a size: transfers within a factor of two share a baseline.
int SizeBucket(int64_t bytes) {
  return bytes <= 1 ? 0 : std::bit_width(static_cast<uint64_t>(bytes - 1));
}

double MedianDelay(std::vector<double> delays) {
  if (delays.empty()) return 0;
  const size_t middle = delays.size() / 2;
  std::nth_element(delays.begin(), delays.begin() + middle, delays.end());
  return delays[middle];
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
      seconds_per_byte_(links_.size()),
      epoch_(links_.size()) {}

int LinkMonitor::IndexOf(Link link) const {
  const auto it = std::find(links_.begin(), links_.end(), link);
  return it == links_.end() ? -1 : static_cast<int>(it - links_.begin());
}

double LinkMonitor::ExpectedSeconds(int link, int64_t bytes) const {
  const auto& baselines = seconds_per_byte_[link];
  const auto it = baselines.find(SizeBucket(bytes));
  return it == baselines.end() ? 0 : it->second * std::max<int64_t>(bytes, 1);
}

void LinkMonitor::Record(int link, int64_t bytes, double seconds) {
  const double per_byte = seconds / std::max<int64_t>(bytes, 1);
  auto [it, first] = seconds_per_byte_[link].try_emplace(SizeBucket(bytes), per_byte);
  // The expectation before this transfer: its own time when it is the first of its size.
  const double expected = it->second * std::max<int64_t>(bytes, 1);
  epoch_[link].push_back({seconds, std::max(0.0, seconds - expected)});
  if (!first) it->second = std::min(it->second * (1 + config_.baseline_drift), per_byte);
}

LinkEpochReport LinkMonitor::EndEpoch() {
  const int num_links = static_cast<int>(links_.size());
  size_t observations = 0;
  std::vector<double> median(num_links);
  for (int l = 0; l < num_links; ++l) {
    observations = std::max(observations, epoch_[l].size());
    std::vector<double> delays;
    for (const Transfer& transfer : epoch_[l]) delays.push_back(transfer.delay_s);
    median[l] = MedianDelay(std::move(delays));
  }
  // The k-th transfers of every link; a link with fewer transfers this epoch stands in with its
  // median, so it neither hides nor stands out.
  std::vector<double> delay_s(num_links);
  for (size_t k = 0; num_links >= 2 && k < observations; ++k) {
    for (int l = 0; l < num_links; ++l) {
      delay_s[l] = k < epoch_[l].size() ? epoch_[l][k].delay_s : median[l];
    }
    detector_.Observe(delay_s);
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
