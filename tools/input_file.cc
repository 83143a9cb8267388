#include "tools/input_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace stragglar {

absl::Status OpenInputFile(const std::string& path, std::ifstream& file) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::FailedPreconditionError(std::strerror(EISDIR));
  }
  file.open(path);
  if (!file) return absl::NotFoundError(std::strerror(errno));
  return absl::OkStatus();
}

}  // namespace stragglar
