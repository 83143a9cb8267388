#include "exporters/trace_recorder.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stragglar {

void TraceRecorder::OnEpoch(int rank, const EpochReport& report) {
  if (rank != recording_rank_) return;
  for (size_t i = 0; i < report.calls.size(); ++i) {
    const EpochCallReport& call = report.calls[i];
    for (size_t rank = 0; rank < call.timing.size(); ++rank) {
      if (static_cast<int64_t>(rows_.size()) >= kMaxRows) {
        truncated_ = true;
        return;
      }
      const RankLinkSpeed measured =
          rank < report.link_speeds.size() ? report.link_speeds[rank] : RankLinkSpeed{};
      rows_.push_back({.call = report.first_call + static_cast<int64_t>(i),
                       .rank = static_cast<int>(rank),
                       .arrival_s = call.timing[rank].arrival_s,
                       .duration_s = call.timing[rank].duration_s,
                       .bytes = call.bytes,
                       .algorithm = std::string(AlgorithmName(call.decision.algorithm)),
                       .link_bytes_per_s = report.link.RankBandwidth(static_cast<int>(rank)),
                       .link_send_bytes_per_s = measured.send_bytes_per_s,
                       .link_receive_bytes_per_s = measured.receive_bytes_per_s});
    }
  }
}

absl::Status TraceRecorder::Write(const std::string& path, absl::string_view process_name) const {
  std::ofstream file(path);
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write the trace file ", path, ": ", std::strerror(errno)));
  }
  if (absl::EndsWithIgnoreCase(path, ".json")) {
    file << PerfettoTrace(rows_, process_name).dump() << "\n";
  } else {
    WriteCsvTrace(rows_, file);
  }
  file.close();
  if (!file) return absl::DataLossError(absl::StrCat("failed writing the trace file ", path));
  return absl::OkStatus();
}

}  // namespace stragglar
