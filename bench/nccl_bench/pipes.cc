#include "bench/nccl_bench/pipes.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stragglar::nccl_bench {

bool WriteAll(int fd, absl::string_view text) {
  while (!text.empty()) {
    const ssize_t written = write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    text.remove_prefix(static_cast<size_t>(written));
  }
  return true;
}

bool SendLine(int fd, absl::string_view line) { return WriteAll(fd, absl::StrCat(line, "\n")); }

std::optional<std::string> ReadLine(int fd) {
  std::string line;
  char c = 0;
  while (true) {
    const ssize_t got = read(fd, &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::nullopt;
    if (c == '\n') return line;
    line.push_back(c);
  }
}

std::string Hex(const void* data, size_t size) {
  std::string hex;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) absl::StrAppendFormat(&hex, "%02x", bytes[i]);
  return hex;
}

bool Unhex(absl::string_view hex, void* data, size_t size) {
  if (hex.size() != 2 * size) return false;
  auto* bytes = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    int value = 0;
    if (std::sscanf(std::string(hex.substr(2 * i, 2)).c_str(), "%2x", &value) != 1) return false;
    bytes[i] = static_cast<unsigned char>(value);
  }
  return true;
}

}  // namespace stragglar::nccl_bench
