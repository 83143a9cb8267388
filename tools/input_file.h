// A command's input file (a plan, a trace), opened for reading: a directory is refused before it is
// opened, since reading one throws from inside the stream (`stragglar verify --plan /tmp` ended in
// an uncaught std::ios_base::failure).
#pragma once

#include <fstream>
#include <string>

#include "absl/status/status.h"

namespace stragglar {

// Opens `path` into `file`. NotFound or FailedPrecondition otherwise, the message only the reason
// ("Is a directory", or the system's for the failed open), for the caller to name the file.
absl::Status OpenInputFile(const std::string& path, std::ifstream& file);

}  // namespace stragglar
