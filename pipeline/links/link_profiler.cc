#include "pipeline/links/link_profiler.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/log.h"
#include "base/units.h"

namespace stragglar {
namespace {

std::string LinkName(Link link) { return absl::StrCat(link.src, "->", link.dst); }

}  // namespace

absl::StatusOr<std::unique_ptr<LinkProfiler>> LinkProfiler::Create(LinkProfilerOptions options) {
  if (options.stages < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("a pipeline needs at least 2 stages, got ", options.stages));
  }
  if (options.configured_stages.has_value()) {
    if (absl::Status valid = ValidatePipelineSpec(*options.configured_stages); !valid.ok()) {
      return valid;
    }
    if (options.configured_stages->stages() != options.stages) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage times are given for ", options.configured_stages->stages(),
                       " stages, but the communicator has ", options.stages, " ranks"));
    }
  }
  return std::unique_ptr<LinkProfiler>(new LinkProfiler(std::move(options)));
}

LinkProfiler::LinkProfiler(LinkProfilerOptions options)
    : options_(std::move(options)), monitor_(PipelineLinks(options_.stages), options_.monitor) {
  if (options_.metrics != nullptr) {
    metrics_.emplace(*options_.metrics, options_.comm, monitor_.links(), options_.exporting_rank);
  }
}

void LinkProfiler::Record(const LinkTransfer& transfer) {
  const int link = monitor_.IndexOf(transfer.link);
  if (link < 0) {
    ++off_pipeline_;
    LogOnce(LogLevel::kInfo, absl::StrCat("off-pipeline-", options_.comm),
            absl::StrCat(options_.comm, ": point-to-point over ", LinkName(transfer.link),
                         ", between ranks that are not adjacent stages: not monitored"));
    return;
  }
  ++transfers_;
  monitor_.Record(link, transfer.bytes, transfer.seconds);
  if (metrics_) metrics_->OnTransfer(link, transfer.seconds);
}

absl::StatusOr<LinkEpoch> LinkProfiler::EndEpoch(const PipelineSpec* stages) {
  ++epochs_;
  LinkEpoch epoch{.report = monitor_.EndEpoch()};
  last_report_ = epoch.report;
  slow_link_ = epoch.report.slow_link;
  if (metrics_) metrics_->OnEpoch(epoch.report);
  if (stages == nullptr) return epoch;
  absl::StatusOr<std::optional<PipelineAdvice>> advice =
      AdviseWarmup(epoch.report, *stages, options_.memory_microbatches,
                   advice_.has_value() ? advice_->warmup : std::vector<int>{});
  if (!advice.ok()) return advice.status();
  if (!advice->has_value()) return epoch;
  advice_ = **advice;
  epoch.advice = advice_;
  if (metrics_) metrics_->OnAdvice(advice_->warmup);
  if (!options_.advice_file.empty()) {
    if (absl::Status written =
            WriteFileAtomically(options_.advice_file, AdviceJson(*advice_), "advice file");
        !written.ok()) {
      return written;
    }
  }
  return epoch;
}

absl::Status LinkProfiler::Absorb(absl::Span<const std::vector<TransferSide>> by_rank) {
  int64_t completed = 0;
  for (int rank = 0; rank < static_cast<int>(by_rank.size()); ++rank) {
    for (const LinkTransfer& transfer : matcher_.Add(rank, by_rank[rank])) {
      Record(transfer);
      ++completed;
    }
  }
  if (completed == 0) return absl::OkStatus();
  const std::optional<Link> before = slow_link_;
  absl::StatusOr<LinkEpoch> epoch =
      EndEpoch(options_.configured_stages ? &*options_.configured_stages : nullptr);
  if (slow_link_ != before) {
    if (slow_link_.has_value()) {
      const double delay_s = last_report_.links[monitor_.IndexOf(*slow_link_)].mean_delay_s;
      std::string line = absl::StrCat(options_.comm, ": slow link ", LinkName(*slow_link_),
                                      " named (", FormatSeconds(delay_s), " late)");
      if (advice_.has_value()) {
        absl::StrAppend(&line, "; advised warm-up forwards ", absl::StrJoin(advice_->warmup, " "));
      } else if (!options_.configured_stages.has_value()) {
        absl::StrAppend(&line,
                        "; set STRAGGLAR_PIPELINE_MICROBATCHES, STRAGGLAR_PIPELINE_FORWARD and "
                        "STRAGGLAR_PIPELINE_BACKWARD for warm-up advice");
      }
      Log(LogLevel::kWarn, line);
    } else {
      Log(LogLevel::kInfo,
          absl::StrCat(options_.comm, ": slow link ", LinkName(*before), " cleared"));
    }
  }
  return epoch.status();
}

}  // namespace stragglar
