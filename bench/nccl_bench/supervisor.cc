#include "bench/nccl_bench/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/nccl_bench/child_process.h"
#include "bench/nccl_bench/device_probe.h"
#include "bench/nccl_bench/pipes.h"
#include "bench/nccl_bench/report.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace stragglar::nccl_bench {
namespace {

// How the ranks' run ended, before the verdict.
enum class Ending { kFinished, kFailed, kTimedOut };

class Supervisor {
 public:
  Supervisor(const Config& config, std::vector<std::string> argv)
      : config_(config), argv_(std::move(argv)) {}

  int Main() {
    signal(SIGPIPE, SIG_IGN);  // a rank that dies must not take the parent with it
    report_ = StartingReport(argv_);
    // Fails early on an unwritable --json path.
    if (absl::Status status = WriteJson(config_.json, report_); !status.ok()) {
      std::cerr << kProgram << ": " << status.message() << "\n";
      return 2;
    }
    // --executor is the preload's STRAGGLAR_EXECUTOR for every rank (and the header's record).
    if (!config_.executor.empty()) setenv("STRAGGLAR_EXECUTOR", config_.executor.c_str(), 1);
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
    if (std::optional<int> exit_status = ProbeDevices(env)) return *exit_status;
    if (std::optional<int> exit_status = SettleLayout(env)) return *exit_status;
    if (std::optional<int> exit_status = StartRanks(env)) return *exit_status;
    return Conclude(Watch());
  }

 private:
  std::vector<std::string> ChildArgs(std::vector<std::string> extra) const {
    std::vector<std::string> args = argv_;
    for (std::string& arg : extra) args.push_back(std::move(arg));
    return args;
  }

  int Fail(const std::string& message, bool printed = false) {
    if (!printed) std::cerr << kProgram << ": " << message << "\n";
    report_["status"] = "error";
    report_["error"] = message;
    (void)WriteJson(config_.json, report_);
    return 1;
  }

  int Skip(const std::string& reason) {
    std::cout << "SKIP: no CUDA device (" << reason << ")" << std::endl;
    report_["status"] = "skip";
    report_["skip_reason"] = reason;
    (void)WriteJson(config_.json, report_);
    return 77;
  }

  // The probe's versions and devices; an exit status when there is nothing to run on.
  std::optional<int> ProbeDevices(const std::vector<std::string>& env) {
    absl::StatusOr<Probe> probe = RunProbe(ChildArgs({}), env, config_.timeout_s);
    if (!probe.ok()) return Fail(absl::StrCat("device probe: ", probe.status().message()));
    probe_ = *probe;
    origin_ = NcclAllReduceOrigin();
    AddProbe(probe_, origin_, report_);
    if (probe_.skip.has_value()) return Skip(*probe_.skip);
    return std::nullopt;
  }

  // How many ranks on which devices, and the straggler; then the header.
  std::optional<int> SettleLayout(const std::vector<std::string>& env) {
    layout_.devices = static_cast<int>(probe_.devices.size());
    layout_.ranks =
        config_.ranks != -1 ? config_.ranks : (layout_.devices >= 2 ? layout_.devices : 2);
    layout_.straggler = config_.straggler == -1 ? layout_.ranks - 1 : config_.straggler;
    if (layout_.straggler >= layout_.ranks) {
      std::cerr << kProgram << ": --straggler " << layout_.straggler << " is not a rank of 0.."
                << layout_.ranks - 1 << " (or -1 for the last)\n";
      return 2;
    }
    layout_.shared_gpu = config_.one_gpu || layout_.devices < layout_.ranks;
    AddLayout(config_, layout_, probe_, env, report_);
    PrintHeader(config_, layout_, probe_, origin_);
    return std::nullopt;
  }

  // A rank's environment: with a shared GPU, NCCL's settings for ranks that pretend to be nodes
  // of their own (unless the user set them).
  std::vector<std::string> RankEnvironment(const std::vector<std::string>& env, int rank) const {
    std::vector<std::string> rank_env = env;
    if (!layout_.shared_gpu) return rank_env;
    for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
             {"NCCL_HOSTID", absl::StrCat("stragglar-bench-", rank)},
             {"NCCL_NET", "Socket"},
             {"NCCL_SOCKET_IFNAME", "lo"},
             {"NCCL_P2P_DISABLE", "1"},
             {"NCCL_SHM_DISABLE", "1"}}) {
      if (std::getenv(name.c_str()) == nullptr) rank_env.push_back(name + "=" + value);
    }
    return rank_env;
  }

  std::optional<int> StartRanks(const std::vector<std::string>& env) {
    rows_ = RowSpecs(config_);
    collected_.assign(rows_.size(), {});
    for (auto& placements : collected_) {
      for (Collected& collected : placements) {
        collected.time_us.assign(layout_.ranks, 0);
        collected.wrong.assign(layout_.ranks, 0);
        collected.call_us.assign(layout_.ranks, {});
      }
    }
    hello_.assign(layout_.ranks, "");
    for (int rank = 0; rank < layout_.ranks; ++rank) {
      const int device = config_.one_gpu ? 0 : rank % layout_.devices;
      absl::StatusOr<Child> child =
          Spawn(ChildArgs({absl::StrCat("--ranks=", layout_.ranks),
                           absl::StrCat("--straggler=", layout_.straggler),
                           absl::StrCat("--internal_rank=", rank),
                           absl::StrCat("--internal_device=", device)}),
                RankEnvironment(env, rank), rank);
      if (!child.ok()) {
        KillAll(children_);
        return Fail(std::string(child.status().message()));
      }
      children_.push_back(*child);
    }
    return std::nullopt;
  }

  void HandleHello(int rank, const std::string& line) {
    // HELLO pid host device bus name...
    const std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 5));
    if (parts.size() == 6) {
      hello_[rank] = absl::StrFormat("#  Rank %2d Pid %6s on %10s device %2s [%s] %s", rank,
                                     parts[1], parts[2], parts[3], parts[4], parts[5]);
      report_["ranks"].push_back({{"rank", rank},
                                  {"pid", parts[1]},
                                  {"host", parts[2]},
                                  {"device", parts[3]},
                                  {"pci_bus_id", parts[4]},
                                  {"device_name", parts[5]}});
    }
    if (rank == 0) report_["device_name"] = parts.size() == 6 ? parts[5] : "?";
    if (++hellos_ == layout_.ranks) PrintTableHeader(config_, hello_);
  }

  // Records one rank's numbers for a row and placement, and prints every row now complete, in
  // order; false for a malformed line.
  bool HandleRow(int rank, const std::string& line) {
    const std::vector<std::string> parts = absl::StrSplit(line, ' ');
    size_t index = 0, placement = 0, calls = 0;
    double time_us = 0;
    int64_t wrong = 0;
    if (parts.size() < 6 || !absl::SimpleAtoi(parts[1], &index) ||
        !absl::SimpleAtoi(parts[2], &placement) || !absl::SimpleAtod(parts[3], &time_us) ||
        !absl::SimpleAtoi(parts[4], &wrong) || !absl::SimpleAtoi(parts[5], &calls) ||
        index >= rows_.size() || placement > 1 || parts.size() != 6 + calls) {
      std::cerr << kProgram << ": rank " << rank << ": malformed line \"" << line << "\"\n";
      return false;
    }
    Collected& collected = collected_[index][placement];
    collected.time_us[rank] = time_us;
    collected.wrong[rank] = wrong;
    for (size_t i = 0; i < calls; ++i) {
      double value = 0;
      (void)absl::SimpleAtod(parts[6 + i], &value);
      collected.call_us[rank].push_back(value);
    }
    ++collected.arrived;
    while (next_row_ < rows_.size() && collected_[next_row_][0].arrived == layout_.ranks &&
           collected_[next_row_][1].arrived == layout_.ranks) {
      PrintRow(config_, rows_[next_row_], collected_[next_row_], layout_.ranks, totals_, report_);
      (void)WriteJson(config_.json, report_);
      ++next_row_;
    }
    return true;
  }

  // Handles one line from a rank; false when that rank reported an error.
  bool Handle(Child& child, const std::string& line) {
    const int rank = child.rank;
    if (absl::StartsWith(line, "ID ") && rank == 0) {
      for (Child& other : children_) {
        if (other.rank != 0 && other.ctrl_fd >= 0) SendLine(other.ctrl_fd, line);
      }
    } else if (absl::StartsWith(line, "HELLO ")) {
      HandleHello(rank, line);
    } else if (absl::StartsWith(line, "ROW ")) {
      return HandleRow(rank, line);
    } else if (absl::StartsWith(line, "ERROR ")) {
      // Every rank's error is printed (the first is often the cause, the others its echo).
      std::cerr << kProgram << ": rank " << rank << ": " << line.substr(6) << "\n";
      if (!error_.has_value()) {
        error_ = absl::StrCat("rank ", rank, ": ", line.substr(6));
        error_printed_ = true;
      }
      return false;
    } else if (absl::StartsWith(line, "SKIP ")) {
      child.skip = line.substr(5);
    } else if (line == "DONE") {
      child.done = true;
    }
    return true;
  }

  // Reads what `child` has written; false when the run cannot go on. A rank that skipped starts
  // `skip_deadline`.
  bool ReadFrom(Child& child, double& skip_deadline) {
    bool ok = true;
    for (const std::string& line : ReadLines(child)) {
      if (!Handle(child, line)) ok = false;
    }
    if (!child.eof) return ok;
    if (child.skip.has_value()) {
      skip_deadline = std::min(skip_deadline, Now() + 10);
    } else if (!child.done) {
      // Gone without finishing: whatever it was, the others cannot complete without it.
      Reap(child, true);
      if (!error_.has_value()) {
        error_ = absl::StrCat("rank ", child.rank, " (pid ", child.pid, ") ",
                              DescribeExit(child.status), " before finishing");
      }
      return false;
    }
    return ok;
  }

  // Relays and collects the ranks' lines until every pipe is closed, one rank fails, or time
  // runs out.
  Ending Watch() {
    const double deadline = Now() + config_.timeout_s;
    double skip_deadline = std::numeric_limits<double>::infinity();
    while (true) {
      std::vector<pollfd> fds;
      std::vector<Child*> polled;
      for (Child& child : children_) {
        if (child.eof) continue;
        fds.push_back({child.result_fd, POLLIN, 0});
        polled.push_back(&child);
      }
      if (fds.empty()) return Ending::kFinished;
      const double now = Now();
      if (now >= deadline) return Ending::kTimedOut;
      // Once a rank has skipped, the others get a little while to do the same (a rank without a
      // device can only skip; the others would wait for it in ncclCommInitRank forever).
      if (now >= skip_deadline) return Ending::kFailed;
      const double until = std::min(deadline, skip_deadline);
      poll(fds.data(), fds.size(), static_cast<int>(std::clamp((until - now) * 1e3, 1.0, 1e3)));
      bool failed = false;
      for (size_t i = 0; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        if (!ReadFrom(*polled[i], skip_deadline)) failed = true;
      }
      if (failed) return Ending::kFailed;
    }
  }

  // Ends and reaps every rank, then the verdict: the exit status, the summary and the report.
  int Conclude(Ending ending) {
    if (ending != Ending::kFinished) KillAll(children_);
    for (Child& child : children_) Reap(child, true);

    bool all_skipped = true;
    for (const Child& child : children_) all_skipped = all_skipped && child.skip.has_value();
    if (all_skipped && !children_.empty()) return Skip(*children_[0].skip);
    if (ending == Ending::kTimedOut) {
      std::string running;
      for (const Child& child : children_) {
        if (!child.done) absl::StrAppend(&running, running.empty() ? "" : ", ", child.rank);
      }
      return Fail(absl::StrFormat(
          "timed out after %g s (--timeout_s) with %d of %d rows done; unfinished ranks: %s",
          config_.timeout_s, next_row_, rows_.size(), running));
    }
    if (ending == Ending::kFailed) {
      for (const Child& child : children_) {
        if (child.skip.has_value() && !error_.has_value()) {
          error_ = absl::StrCat("rank ", child.rank, " found no CUDA device (", *child.skip,
                                ") but the others did");
        }
      }
      return Fail(error_.value_or("a rank failed"), error_printed_);
    }
    for (const Child& child : children_) {
      if (!child.done || !WIFEXITED(child.status) || WEXITSTATUS(child.status) != 0) {
        return Fail(absl::StrCat("rank ", child.rank, " ", DescribeExit(child.status)));
      }
    }
    PrintSummary(config_, totals_, report_);
    if (absl::Status status = WriteJson(config_.json, report_); !status.ok()) {
      std::cerr << kProgram << ": " << status.message() << "\n";
      return 1;
    }
    if (totals_.wrong > 0) {
      std::cerr << kProgram << ": " << totals_.wrong << " wrong elements (see above)\n";
      return 1;
    }
    return 0;
  }

  const Config& config_;
  const std::vector<std::string> argv_;
  nlohmann::json report_;
  Probe probe_;
  std::string origin_;  // where ncclAllReduce comes from
  Layout layout_;
  std::vector<RowSpec> rows_;
  std::vector<std::array<Collected, 2>> collected_;
  std::vector<std::string> hello_;
  int hellos_ = 0;
  size_t next_row_ = 0;
  std::vector<Child> children_;
  std::optional<std::string> error_;
  bool error_printed_ = false;
  Totals totals_;
};

}  // namespace

int SupervisorMain(const Config& config, std::vector<std::string> argv) {
  return Supervisor(config, std::move(argv)).Main();
}

}  // namespace stragglar::nccl_bench
