#include "bench/nccl_bench/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar::nccl_bench {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

absl::StatusOr<Child> Spawn(std::vector<std::string> args, const std::vector<std::string>& env,
                            int rank) {
  int result[2];
  if (pipe2(result, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  int ctrl[2] = {-1, -1};
  if (rank >= 0 && pipe2(ctrl, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  if (rank < 0) {
    args.push_back(absl::StrCat("--internal_probe_fd=", result[1]));
  } else {
    args.push_back(absl::StrCat("--internal_result_fd=", result[1]));
    args.push_back(absl::StrCat("--internal_ctrl_fd=", ctrl[0]));
  }
  std::vector<char*> argv, envp;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  for (std::string& entry : env_copy) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork failed: ", std::strerror(errno)));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    signal(SIGPIPE, SIG_DFL);
    fcntl(result[1], F_SETFD, 0);
    if (ctrl[0] >= 0) fcntl(ctrl[0], F_SETFD, 0);
    execve("/proc/self/exe", argv.data(), envp.data());
    static const char kMessage[] = "stragglar-bench: cannot exec /proc/self/exe\n";
    (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    _exit(127);
  }
  close(result[1]);
  if (ctrl[0] >= 0) close(ctrl[0]);
  Child child;
  child.rank = rank;
  child.pid = pid;
  child.result_fd = result[0];
  child.ctrl_fd = ctrl[1];
  return child;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return "ended";
}

void Reap(Child& child, bool block) {
  if (child.reaped) return;
  const pid_t got = waitpid(child.pid, &child.status, block ? 0 : WNOHANG);
  if (got == child.pid || (got < 0 && errno == ECHILD)) child.reaped = true;
}

void KillAll(std::vector<Child>& children) {
  for (Child& child : children) {
    Reap(child, false);
    if (!child.reaped) kill(child.pid, SIGTERM);
  }
  const double deadline = Now() + 3;
  for (Child& child : children) {
    while (!child.reaped && Now() < deadline) {
      Reap(child, false);
      if (!child.reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!child.reaped) {
      kill(child.pid, SIGKILL);
      Reap(child, true);
    }
  }
}

std::vector<std::string> ReadLines(Child& child) {
  char buffer[65536];
  const ssize_t got = read(child.result_fd, buffer, sizeof(buffer));
  if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
    child.eof = true;
    close(child.result_fd);
    if (child.ctrl_fd >= 0) close(child.ctrl_fd);
    child.ctrl_fd = -1;
  } else if (got > 0) {
    child.buffer.append(buffer, static_cast<size_t>(got));
  }
  std::vector<std::string> lines;
  size_t newline;
  while ((newline = child.buffer.find('\n')) != std::string::npos) {
    lines.push_back(child.buffer.substr(0, newline));
    child.buffer.erase(0, newline + 1);
  }
  return lines;
}

}  // namespace stragglar::nccl_bench
