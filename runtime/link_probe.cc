#include "runtime/link_probe.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "exporters/units.h"

namespace stragglar {

LinkModel LinkFromRingRounds(double small_s, double large_s, int64_t large_bytes, int num_ranks,
                             double shared_lanes) {
  const double slowdown = shared_lanes > 0 ? std::max(1.0, num_ranks / shared_lanes) : 1.0;
  // A large round no slower than a small one measured no bandwidth limit: a tiny positive
  // difference keeps the model finite.
  const double per_byte = std::max(large_s - small_s, 1e-12) / large_bytes / slowdown;
  return LinkModel{.alpha_s = std::max(small_s, 1e-7),
                   .bandwidth_bytes_per_s = 1.0 / per_byte,
                   .shared_lanes = shared_lanes};
}

absl::StatusOr<LinkModel> ProbeLink(CommBackend& backend, int num_ranks,
                                    const LinkProbeSpec& spec) {
  absl::StatusOr<double> warm = backend.RingRoundSeconds(kProbeLargeBytes, 1);
  if (!warm.ok()) return warm.status();
  absl::StatusOr<double> small = backend.RingRoundSeconds(kProbeSmallBytes, spec.small_repeats);
  if (!small.ok()) return small.status();
  absl::StatusOr<double> large = backend.RingRoundSeconds(kProbeLargeBytes, spec.large_repeats);
  if (!large.ok()) return large.status();
  double measured[2] = {*small, *large};
  if (absl::Status status = backend.MaxOverRanks(measured); !status.ok()) return status;
  return LinkFromRingRounds(measured[0], measured[1], kProbeLargeBytes, num_ranks,
                            spec.shared_lanes);
}

std::string DescribeLink(const LinkModel& link) {
  return absl::StrCat("link: ", FormatSeconds(link.alpha_s), " + ",
                      absl::StrFormat("%.3g", link.bandwidth_bytes_per_s / 1e9),
                      " GB/s per message");
}

}  // namespace stragglar
