// Progress of a long command on stderr, so that a run of minutes is not silent: at most one line
// every 2 seconds, and only where stderr is a terminal (a log or a pipe keeps just the errors) or
// the command was given --progress. e.g.
//   stragglar rounds: 1200 of 4095 rank counts, 41 s so far
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace stragglar {

class Progress {
 public:
  // `what` names the command and the units ("stragglar rounds", "rank counts").
  Progress(std::string command, int64_t total, std::string units, bool forced);

  // `done` of the total are done; says so when 2 s have passed since the last line (never for
  // the last unit: the command's own output follows).
  void Done(int64_t done);

 private:
  const std::string command_;
  const int64_t total_;
  const std::string units_;
  const bool shown_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace stragglar
