#include "kernels/exec/library_code.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace stragglar {
namespace {

constexpr char kLibraryCodeUrl[] = "stragglar/library-code";

}  // namespace

absl::Status WithLibraryCode(absl::Status status, int code) {
  status.SetPayload(kLibraryCodeUrl, absl::Cord(std::to_string(code)));
  return status;
}

std::optional<int> LibraryCode(const absl::Status& status) {
  const auto payload = status.GetPayload(kLibraryCodeUrl);  // absl::optional in Debian's Abseil
  int code = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &code)) return std::nullopt;
  return code;
}

}  // namespace stragglar
