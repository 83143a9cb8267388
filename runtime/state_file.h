// What a job learned, kept across restarts (STRAGGLAR_STATE_FILE): the cost model's calibration
// per algorithm and size bucket, every rank's predicted lag, and the named straggler. A restarted
// job that loads it adapts from its first call instead of after its first epoch. The file is small
// JSON, written atomically (a temporary file, flushed to disk, renamed over the old one).
// Every rank must start from the same state or their decisions diverge: the communicator protocol
// (runtime/communicator.h) reads it on rank 0 and broadcasts it, for every backend.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/learned_state.h"

namespace stragglar {

// "<hostname>/<backend>", e.g. "node17/host-threads".
std::string MachineId(absl::string_view backend);

// Loads `path` for a job of `num_ranks` ranks on `machine`. NotFound when the file is missing,
// FailedPrecondition when it is stale (another world size or machine, or another format
// version), DataLoss when it is corrupt; the message says which and why. Never crashes.
absl::StatusOr<LearnedState> LoadState(const std::string& path, int num_ranks,
                                       absl::string_view machine);

// LoadState in two steps, for multi-process backends: one rank reads the text (NotFound when it
// cannot), broadcasts it, and every rank parses the same bytes (`path` only names the file in
// messages), so all of them start from the same state or all start fresh.
absl::StatusOr<std::string> ReadStateText(const std::string& path);
absl::StatusOr<LearnedState> ParseState(absl::string_view text, const std::string& path,
                                        int num_ranks, absl::string_view machine);

// Writes `state` to `path` atomically; the error names the path and the reason.
absl::Status SaveState(const std::string& path, const LearnedState& state);

}  // namespace stragglar
