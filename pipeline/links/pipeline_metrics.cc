#include "pipeline/links/pipeline_metrics.h"

#include "exporters/prometheus_exporter.h"

namespace stragglar {

PipelineMetrics::PipelineMetrics(prometheus::Registry& registry, std::string comm,
                                 const std::vector<Link>& links, std::optional<int> exporting_rank)
    : comm_(std::move(comm)),
      links_(links),
      exporting_rank_(exporting_rank),
      warmup_family_(prometheus::BuildGauge()
                         .Name("stragglar_pipeline_warmup_forwards")
                         .Help("Recommended 1F1B warm-up forwards of each pipeline stage, once a "
                               "slow link is named")
                         .Register(registry)) {
  auto& transfer = prometheus::BuildHistogram()
                       .Name("stragglar_link_transfer_seconds")
                       .Help("Time of each point-to-point transfer over a link (src -> dst)")
                       .Register(registry);
  auto& delay = prometheus::BuildGauge()
                    .Name("stragglar_link_delay_seconds")
                    .Help(
                        "Mean estimated delay of a link's transfers in the last epoch, against "
                        "what the link's own history says they should take")
                    .Register(registry);
  auto& slow = prometheus::BuildGauge()
                   .Name("stragglar_slow_link")
                   .Help("1 for the link named persistently slow, 0 for the others")
                   .Register(registry);
  for (const Link& link : links_) {
    if (exporting_rank.has_value() && link.src != *exporting_rank) {
      transfer_.push_back(nullptr);
      delay_.push_back(nullptr);
      slow_.push_back(nullptr);
      continue;
    }
    const prometheus::Labels labels = {{"comm", comm_},
                                       {"rank", std::to_string(link.src)},
                                       {"src", std::to_string(link.src)},
                                       {"dst", std::to_string(link.dst)}};
    transfer_.push_back(&transfer.Add(labels, DurationBuckets()));
    delay_.push_back(&delay.Add(labels));
    slow_.push_back(&slow.Add(labels));
  }
}

void PipelineMetrics::OnTransfer(int link, double seconds) {
  if (transfer_[link] != nullptr) transfer_[link]->Observe(seconds);
}

void PipelineMetrics::OnEpoch(const LinkEpochReport& report) {
  for (size_t l = 0; l < links_.size() && l < report.links.size(); ++l) {
    if (delay_[l] == nullptr) continue;
    delay_[l]->Set(report.links[l].mean_delay_s);
    slow_[l]->Set(report.slow_link == links_[l] ? 1 : 0);
  }
}

void PipelineMetrics::OnAdvice(const std::vector<int>& warmup) {
  for (size_t stage = 0; stage < warmup.size(); ++stage) {
    if (exporting_rank_.has_value() && static_cast<int>(stage) != *exporting_rank_) continue;
    warmup_family_
        .Add({{"comm", comm_}, {"rank", std::to_string(stage)}, {"stage", std::to_string(stage)}})
        .Set(warmup[stage]);
  }
}

}  // namespace stragglar
