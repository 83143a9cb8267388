#include "pipeline/links/link_exchange.h"

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace stragglar {

LinkExchanger::LinkExchanger(LinkExchangeOptions options,
                             std::unique_ptr<ReportTransport> transport, TakeSides take,
                             LinkProfiler& profiler)
    : options_(options),
      transport_(std::move(transport)),
      take_(std::move(take)),
      profiler_(profiler),
      thread_([this] { Loop(); }) {}

void LinkExchanger::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  transport_->Cancel();
  if (thread_.joinable()) thread_.join();
}

void LinkExchanger::Loop() {
  if (options_.thread_setup) options_.thread_setup();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, options_.interval, [this] { return stopping_; })) break;
    }
    absl::Status status = ExchangeOnce();
    if (absl::IsCancelled(status)) break;
    if (!status.ok()) {
      Log(absl::IsUnavailable(status) ? LogLevel::kInfo : LogLevel::kWarn,
          absl::StrCat("link profiling stopped: ", status.message()));
      break;
    }
    ++exchanges_;
  }
  running_ = false;
}

absl::Status LinkExchanger::ExchangeOnce() {
  std::vector<double> block;
  EncodeReport(take_(options_.slots), options_.slots, block);
  absl::StatusOr<std::vector<double>> gathered = transport_->AllGather(block);
  if (!gathered.ok()) return gathered.status();
  const size_t per_rank = block.size();
  if (gathered->size() != per_rank * options_.size) {
    return absl::InternalError(absl::StrCat("the link report gather returned ", gathered->size(),
                                            " values, expected ", per_rank * options_.size));
  }
  std::vector<std::vector<TransferSide>> by_rank;
  for (int rank = 0; rank < options_.size; ++rank) {
    absl::StatusOr<std::vector<TransferSide>> sides = DecodeReport(
        absl::MakeConstSpan(*gathered).subspan(rank * per_rank, per_rank), options_.slots);
    if (!sides.ok()) {
      return absl::InternalError(absl::StrCat("rank ", rank, ": ", sides.status().message()));
    }
    by_rank.push_back(*std::move(sides));
  }
  // An advice file that cannot be written is said, and the profiling goes on.
  if (absl::Status absorbed = profiler_.Absorb(by_rank); !absorbed.ok()) {
    LogOnce(LogLevel::kWarn, "link-absorb", std::string(absorbed.message()));
  }
  return absl::OkStatus();
}

}  // namespace stragglar
