// A value as the symbolic checkers track it (program_check.h, device_program_check.h): the ranks
// whose contributions it holds, one member each, plus a last member for "garbage" (memory that
// nothing was written to), so that reading garbage never matches a plan value.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace stragglar {

using SymbolicValue = std::vector<bool>;

// The value holding only `member` among `num_ranks` ranks (member == num_ranks: garbage).
inline SymbolicValue SingleValue(int num_ranks, int member) {
  SymbolicValue value(num_ranks + 1, false);
  value[member] = true;
  return value;
}

// "{0,2}", "{garbage}".
inline std::string DescribeValue(const SymbolicValue& value) {
  std::string out = "{";
  const int garbage = static_cast<int>(value.size()) - 1;
  for (int rank = 0; rank < garbage; ++rank) {
    if (value[rank]) absl::StrAppend(&out, out.size() > 1 ? "," : "", rank);
  }
  if (value[garbage]) absl::StrAppend(&out, out.size() > 1 ? "," : "", "garbage");
  return out + "}";
}

}  // namespace stragglar
