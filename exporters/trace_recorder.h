// Collects a communicator's trace rows from the epoch reports (for a preload library, where no
// single place sees every rank's calls): every rank gets the same report, so one rank records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "exporters/observer.h"
#include "exporters/trace.h"

namespace stragglar {

class TraceRecorder : public CollectiveObserver {
 public:
  // Rows kept at most (about 50 bytes each): a long job keeps its first ones, and says so.
  static constexpr int64_t kMaxRows = 4'000'000;

  // Keeps the reports that rank `recording_rank` absorbs.
  explicit TraceRecorder(int recording_rank) : recording_rank_(recording_rank) {}

  void OnCall(int rank, const CallDecision& decision, int64_t bytes,
              const CallTiming& timing) override {}
  void OnEpoch(int rank, const EpochReport& report) override;

  const std::vector<TraceRow>& rows() const { return rows_; }
  bool truncated() const { return truncated_; }
  // The contract's CSV, or Perfetto JSON when `path` ends in ".json". The error names the path.
  absl::Status Write(const std::string& path, absl::string_view process_name) const;

 private:
  int recording_rank_;
  std::vector<TraceRow> rows_;
  bool truncated_ = false;
};

}  // namespace stragglar
