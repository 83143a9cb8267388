// The processes the parent starts (the probe and the ranks: this same program, see main.cc): how
// they are started, read from, reaped and killed.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stragglar::nccl_bench {

// Seconds on a monotonic clock.
double Now();

struct Child {
  int rank = -1;  // -1: the probe
  pid_t pid = -1;
  int ctrl_fd = -1;    // parent -> child
  int result_fd = -1;  // child -> parent
  std::string buffer;
  bool eof = false;
  bool reaped = false;
  int status = 0;
  bool done = false;
  std::optional<std::string> skip;
};

// Forks and execs this program with `args` and `env`; the child gets a result pipe (and a control
// pipe for ranks) and dies with the parent.
absl::StatusOr<Child> Spawn(std::vector<std::string> args, const std::vector<std::string>& env,
                            int rank);

// "exited with status 1", "was killed by signal 9 (Killed)".
std::string DescribeExit(int status);

void Reap(Child& child, bool block);

// SIGTERM, a grace period, then SIGKILL; every one reaped.
void KillAll(std::vector<Child>& children);

// Reads what is there; returns the complete lines. Sets eof at end of file.
std::vector<std::string> ReadLines(Child& child);

}  // namespace stragglar::nccl_bench
