// Replacing a file that others read while it changes (the learned state, the pipeline advice):
// written beside the target, flushed to disk and renamed over it, so a reader (or a crash) sees
// the old file or the new one, never half of one.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stragglar {

// Unavailable, naming `what` (e.g. "state file") and `path`, when it cannot be written or
// replaced; the old file is then untouched and no temporary is left behind.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view text,
                                 absl::string_view what);

}  // namespace stragglar
