#include "tools/progress.h"

#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "base/units.h"

namespace stragglar {

Progress::Progress(std::string command, int64_t total, std::string units, bool forced)
    : command_(std::move(command)),
      total_(total),
      units_(std::move(units)),
      shown_(forced || isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::Done(int64_t done) {
  if (!shown_ || done >= total_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::seconds(2)) return;
  last_ = now;
  std::cerr << absl::StrCat(command_, ": ", done, " of ", total_, " ", units_, ", ",
                            FormatSeconds(std::chrono::duration<double>(now - start_).count()),
                            " so far\n");
}

}  // namespace stragglar
