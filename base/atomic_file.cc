#include "base/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stragglar {

absl::Status WriteFileAtomically(const std::string& path, absl::string_view text,
                                 absl::string_view what) {
  // The counter keeps two writers in one process apart.
  static std::atomic<int64_t> writes{0};
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid(), ".", writes++);
  FILE* file = std::fopen(temporary.c_str(), "w");
  bool written = file != nullptr && std::fwrite(text.data(), 1, text.size(), file) == text.size();
  written = file != nullptr && std::fflush(file) == 0 && fsync(fileno(file)) == 0 && written;
  const std::string reason = std::strerror(errno);
  if (file != nullptr && std::fclose(file) != 0) written = false;
  if (!written) {
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write the ", what, " ", path, ": ", reason));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot replace the ", what, " ", path, ": ", reason));
  }
  return absl::OkStatus();
}

}  // namespace stragglar
