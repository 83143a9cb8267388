// `stragglar doctor`: whether the preload libraries can work on this machine, one line per
// finding, in the spirit of `flutter doctor`: each line starts with [ok], [warn] or [fail], and
// the exit status is non-zero when a [fail] line is printed.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/statusor.h"

namespace stragglar {

struct DoctorOptions {
  // Which preload the verdict is about: "nccl", "mpi" or "any" (at least one of them works).
  std::string preload = "any";
  // How many ranks a node runs: the metrics ports checked are base .. base + local_ranks - 1.
  int local_ranks = 8;
  // The directory holding `stragglar` (the preloads are found relative to it); empty: this
  // process's own.
  std::string bin_dir;
};

// Prints the report to `out`. Returns the exit status: 0 when the preload asked for can work here
// and every STRAGGLAR_* setting is valid, 1 otherwise; an error for bad options.
absl::StatusOr<int> RunDoctor(const DoctorOptions& options, std::ostream& out);

}  // namespace stragglar
