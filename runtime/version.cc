#include "runtime/version.h"

// Defined by runtime/CMakeLists.txt for this file only, so that a new version rebuilds one file.
#ifndef STRAGGLAR_VERSION
#error "STRAGGLAR_VERSION must be defined by the build (CMakeLists.txt project(VERSION))"
#endif

namespace stragglar {

absl::string_view StragglarVersion() { return STRAGGLAR_VERSION; }

}  // namespace stragglar
