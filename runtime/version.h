// The version of stragglar, from one place: CMakeLists.txt's project(VERSION). The CLI prints it
// (`stragglar --version`), the preloads' INFO banner shows it, and the stragglar_build_info metric
// carries it.
#pragma once

#include "absl/strings/string_view.h"

namespace stragglar {

// "MAJOR.MINOR.PATCH", e.g. "0.1.0".
absl::string_view StragglarVersion();

}  // namespace stragglar
