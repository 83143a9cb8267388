// The command line as absl's flag parser should see it: flag names with '-' spelled '_'
// (NormalizeFlagName), and each repeatable flag's occurrences joined into one comma-separated
// value, since absl keeps only a flag's last value (`--link-delay 1-2:5ms --link-delay 3-4:30ms`
// becomes `--link_delay=1-2:5ms,3-4:30ms`, read as a list flag), and a flag followed by "-"
// (stdin) joined to it.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace stragglar {

// argv[first..argc) normalized; the joined repeatable flags come last.
std::vector<std::string> NormalizedArguments(int argc, char** argv, int first,
                                             const std::vector<absl::string_view>& repeatable);

}  // namespace stragglar
