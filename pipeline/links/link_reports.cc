#include "pipeline/links/link_reports.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

constexpr int kFields = 5;  // peer, direction, index, bytes, seconds
// Doubles hold integers exactly up to 2^53; indices and sizes stay far below it.
constexpr double kLargestExact = 9007199254740992.0;

bool IsCount(double value, double limit) {
  return value >= 0 && value <= limit && value == std::floor(value);
}

}  // namespace

int ReportDoubles(int slots) { return 1 + kFields * slots; }

int EncodeReport(absl::Span<const TransferSide> sides, int slots, std::vector<double>& block) {
  const int taken = static_cast<int>(std::min<size_t>(sides.size(), slots));
  block.assign(ReportDoubles(slots), 0.0);
  block[0] = taken;
  for (int i = 0; i < taken; ++i) {
    const TransferSide& side = sides[i];
    double* entry = &block[1 + kFields * i];
    entry[0] = side.peer;
    entry[1] = side.send ? 1 : 0;
    entry[2] = static_cast<double>(side.index);
    entry[3] = static_cast<double>(side.bytes);
    entry[4] = side.seconds;
  }
  return taken;
}

absl::StatusOr<std::vector<TransferSide>> DecodeReport(absl::Span<const double> block, int slots) {
  if (static_cast<int>(block.size()) != ReportDoubles(slots)) {
    return absl::InvalidArgumentError(
        absl::StrCat("link report of ", block.size(), " values, expected ", ReportDoubles(slots)));
  }
  if (!IsCount(block[0], slots)) {
    return absl::InvalidArgumentError(
        absl::StrCat("link report count ", block[0], " is not an integer from 0 to ", slots));
  }
  std::vector<TransferSide> sides(static_cast<size_t>(block[0]));
  for (size_t i = 0; i < sides.size(); ++i) {
    const double* entry = &block[1 + kFields * i];
    if (!IsCount(entry[0], 1 << 30) || (entry[1] != 0 && entry[1] != 1) ||
        !IsCount(entry[2], kLargestExact) || !IsCount(entry[3], kLargestExact) ||
        !(entry[4] >= 0) || !std::isfinite(entry[4])) {
      return absl::InvalidArgumentError(absl::StrCat("link report entry ", i, " is malformed"));
    }
    sides[i] = {.peer = static_cast<int>(entry[0]),
                .send = entry[1] == 1,
                .index = static_cast<uint64_t>(entry[2]),
                .bytes = static_cast<int64_t>(entry[3]),
                .seconds = entry[4]};
  }
  return sides;
}

std::vector<LinkTransfer> LinkMatcher::Add(int rank, absl::Span<const TransferSide> sides) {
  std::vector<LinkTransfer> completed;
  for (const TransferSide& side : sides) {
    const Link link = side.send ? Link{rank, side.peer} : Link{side.peer, rank};
    Ends& ends = links_[{link.src, link.dst}];
    auto& mine = side.send ? ends.sends : ends.receives;
    auto& theirs = side.send ? ends.receives : ends.sends;
    if (auto other = theirs.find(side.index); other != theirs.end()) {
      // The sender's size: NCCL requires both ends to name the same count.
      const int64_t bytes = side.send ? side.bytes : other->second.bytes;
      completed.push_back(
          {.link = link, .bytes = bytes, .seconds = std::min(side.seconds, other->second.seconds)});
      theirs.erase(other);
    } else {
      mine[side.index] = {side.bytes, side.seconds};
    }
    ends.newest = std::max(ends.newest, side.index);
    Prune(ends);
  }
  return completed;
}

void LinkMatcher::Prune(Ends& ends) {
  if (ends.newest < window_) return;
  const uint64_t oldest_kept = ends.newest - window_;
  for (auto* sides : {&ends.sends, &ends.receives}) {
    while (!sides->empty() && sides->begin()->first < oldest_kept) {
      sides->erase(sides->begin());
      ++dropped_;
    }
  }
}

int64_t LinkMatcher::waiting() const {
  int64_t count = 0;
  for (const auto& [link, ends] : links_) count += ends.sends.size() + ends.receives.size();
  return count;
}

}  // namespace stragglar
