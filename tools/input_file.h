// A command's input file (a plan, a trace), opened for reading: a directory is refused before it is
// opened, since reading one throws from inside the stream (`stragglar verify --plan /tmp` ended in
// an uncaught std::ios_base::failure).
#pragma once

#include <fstream>
#include <iostream>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stragglar {

// Opens `path` into `file`. NotFound or FailedPrecondition otherwise, the message only the reason
// ("Is a directory", or the system's for the failed open), for the caller to name the file.
absl::Status OpenInputFile(const std::string& path, std::ifstream& file);

// Reads `path` ("-": standard input) with `read`. A file that cannot be opened is one error,
// "<cannot> <path>: <reason>", with the open's code; what `read` returns is returned as it is.
template <typename T>
absl::StatusOr<T> ReadInput(const std::string& path, absl::string_view cannot,
                            absl::FunctionRef<absl::StatusOr<T>(std::istream&)> read) {
  if (path == "-") return read(std::cin);
  std::ifstream file;
  if (absl::Status opened = OpenInputFile(path, file); !opened.ok()) {
    return absl::Status(opened.code(), absl::StrCat(cannot, " ", path, ": ", opened.message()));
  }
  return read(file);
}

}  // namespace stragglar
