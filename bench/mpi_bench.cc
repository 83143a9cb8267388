// stragglar-mpi-bench: native PMPI_Allreduce against MPI_Allreduce in one run, nccl-tests style.
// With LD_PRELOAD=libstragglar_mpi.so, MPI_Allreduce is the preload's (StragglAR or a pass-through
// to PMPI_Allreduce); without it both are OpenMPI's algorithm and the ratios are ~1, a control.
//
// Both see the same data and the same injected straggler delay, interleaved per iteration in
// alternating order so that machine drift hits both equally. Timestamps come from
// std::chrono::steady_clock, which on Linux is CLOCK_MONOTONIC: one clock for all processes of a
// kernel, so arrivals and completions of different ranks compare directly. That holds on one host
// and on an emulated cluster (scripts/cluster.sh: hosts that are network namespaces of one
// machine). Across real hosts the clocks are unrelated (timing there would need clock
// synchronization), so the bench refuses to run where the ranks do not share one kernel.

// The C API only: the target links MPI::MPI_C, not OpenMPI's deprecated C++ bindings.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/units.h"
#include "bench/common/bandwidth.h"
#include "kernels/reduce/exact_data.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(stragglar::ByteSize, min_bytes, stragglar::ByteSize{1 << 20},
          "smallest message size, e.g. 1MiB");
ABSL_FLAG(stragglar::ByteSize, max_bytes, stragglar::ByteSize{64 << 20},
          "largest message size, e.g. 64MiB");
ABSL_FLAG(int, step_factor, 2, "size multiplier from one row to the next (>= 2)");
ABSL_FLAG(int, iterations, 20, "timed native/preload pairs per row");
ABSL_FLAG(int, warmup, 48,
          "untimed pairs per row first; the preload's policy decides every STRAGGLAR_EPOCH_CALLS "
          "calls, so this should cover a few epochs");
ABSL_FLAG(std::vector<std::string>, delays, std::vector<std::string>({"0", "5ms", "20ms"}),
          "straggler delays, comma-separated, e.g. 0,5ms,20ms");
ABSL_FLAG(int, straggler, -1, "the late rank (-1: the last rank)");
ABSL_FLAG(std::vector<std::string>, also_late, {},
          "more late ranks, RANK:FRACTION each (comma-separated), each late by FRACTION of the "
          "row's delay, e.g. 1:0.5: the delays as a distribution, not one straggler");
ABSL_FLAG(std::string, dtype, "float32", "element type: float32, float64 or int32");
ABSL_FLAG(bool, check, false, "bit-compare the MPI_Allreduce result with PMPI_Allreduce's");
ABSL_FLAG(std::string, json, "", "also write every row with all numbers to this JSON file");

namespace stragglar {
namespace {

constexpr char kUsage[] = R"(stragglar-mpi-bench: native PMPI_Allreduce vs MPI_Allreduce (the
preload's when LD_PRELOAD=libstragglar_mpi.so), with one persistently late rank. One host, or the
emulated hosts of one machine (scripts/cluster.sh).

usage: mpirun -np N stragglar-mpi-bench [--min-bytes 1MiB] [--max-bytes 64MiB] [--step-factor 2]
         [--iterations 20] [--warmup 48] [--delays 0,5ms,20ms] [--straggler -1]
         [--also-late RANK:FRACTION,...]
         [--dtype float32|float64|int32] [--check] [--json FILE]
)";

constexpr absl::string_view kProgram = "stragglar-mpi-bench";
constexpr uint64_t kSeed = 1;  // of the inputs (kernels/reduce/exact_data.h)

struct ElementType {
  std::string name;
  MPI_Datatype mpi;
  int size;
  DataType data;  // the exact test data's type (kernels/reduce/exact_data.h)
};

struct Config {
  int64_t min_bytes = 0;
  int64_t max_bytes = 0;
  int step_factor = 2;
  int iterations = 0;
  int warmup = 0;
  std::vector<double> delays;
  int straggler = 0;
  std::map<int, double> also_late;  // rank -> its share of the row's delay
  ElementType dtype;
  bool check = false;
  std::string json;
};

enum Impl { kNative = 0, kPreload = 1 };

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The launcher's rank, known before MPI_Init (which must not run if the flags are bad).
int RankFromEnvironment() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

absl::StatusOr<Config> ConfigFromFlags(int ranks) {
  Config config;
  if (ranks < 2) {
    return absl::InvalidArgumentError(absl::StrCat("needs at least 2 MPI processes, got ", ranks,
                                                   "; run it as mpirun -np 4 ", kProgram));
  }
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "float32") {
    config.dtype = {dtype, MPI_FLOAT, 4, DataType::kFloat32};
  } else if (dtype == "float64") {
    config.dtype = {dtype, MPI_DOUBLE, 8, DataType::kFloat64};
  } else if (dtype == "int32") {
    config.dtype = {dtype, MPI_INT32_T, 4, DataType::kInt32};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype \"", dtype, "\" is not one of float32, float64, int32"));
  }
  config.min_bytes = absl::GetFlag(FLAGS_min_bytes).bytes;
  config.max_bytes = absl::GetFlag(FLAGS_max_bytes).bytes;
  if (config.min_bytes < config.dtype.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min-bytes must hold at least one ", dtype, " (", config.dtype.size, " B)"));
  }
  if (config.max_bytes < config.min_bytes) {
    return absl::InvalidArgumentError("--max-bytes is smaller than --min-bytes");
  }
  // MPI counts are ints.
  if (config.max_bytes / config.dtype.size > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--max-bytes is too large (at most ",
                                                   std::numeric_limits<int>::max(), " elements)"));
  }
  config.step_factor = absl::GetFlag(FLAGS_step_factor);
  if (config.step_factor < 2) return absl::InvalidArgumentError("--step-factor must be >= 2");
  config.iterations = absl::GetFlag(FLAGS_iterations);
  if (config.iterations < 1) return absl::InvalidArgumentError("--iterations must be >= 1");
  config.warmup = absl::GetFlag(FLAGS_warmup);
  if (config.warmup < 0) return absl::InvalidArgumentError("--warmup must be >= 0");
  for (const std::string& text : absl::GetFlag(FLAGS_delays)) {
    absl::StatusOr<double> delay = ParseSeconds(text);
    if (!delay.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--delays: ", delay.status().message()));
    }
    if (*delay < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--delays: \"", text, "\" is negative"));
    }
    config.delays.push_back(*delay);
  }
  if (config.delays.empty()) return absl::InvalidArgumentError("--delays is empty");
  config.straggler = absl::GetFlag(FLAGS_straggler);
  if (config.straggler == -1) config.straggler = ranks - 1;
  if (config.straggler < 0 || config.straggler >= ranks) {
    return absl::InvalidArgumentError(absl::StrCat("--straggler ", config.straggler,
                                                   " is not a rank of 0..", ranks - 1,
                                                   " (or -1 for the last)"));
  }
  for (const std::string& text : absl::GetFlag(FLAGS_also_late)) {
    const std::vector<std::string> parts = absl::StrSplit(text, ':');
    int rank = -1;
    double fraction = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &rank) ||
        !absl::SimpleAtod(parts[1], &fraction) || rank < 0 || rank >= ranks ||
        rank == config.straggler || !(fraction > 0 && fraction <= 1) ||
        config.also_late.contains(rank)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--also-late \"", text, "\": want RANK:FRACTION, a rank of 0..", ranks - 1,
                       " other than the straggler (", config.straggler,
                       ") and not given twice, and a fraction in (0, 1], e.g. 1:0.5"));
    }
    config.also_late[rank] = fraction;
  }
  config.check = absl::GetFlag(FLAGS_check);
  config.json = absl::GetFlag(FLAGS_json);
  return config;
}

std::vector<int64_t> Sizes(const Config& config) {
  return GeometricSizes(config.min_bytes, config.max_bytes, config.step_factor);
}

// The text that names this process's CLOCK_MONOTONIC: the kernel's boot id, and the offsets of
// its time namespace (none: the kernel's own clock). Processes with the same text read one clock:
// the ranks of one host, and the hosts of an emulated cluster (network namespaces of one kernel,
// scripts/cluster.sh).
std::string ClockId() {
  std::string id;
  for (const char* path : {"/proc/sys/kernel/random/boot_id", "/proc/self/timens_offsets"}) {
    std::ifstream file(path);
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    absl::StrAppend(&id, text, "|");
  }
  return id;
}

// The timestamps are only comparable on one clock (see the top of the file).
absl::Status CheckOneClock(int ranks) {
  constexpr int kLength = 256;
  char mine[kLength] = {};
  const std::string id = ClockId();
  std::strncpy(mine, id.c_str(), kLength - 1);
  std::vector<char> ids(static_cast<size_t>(ranks) * kLength);
  PMPI_Allgather(mine, kLength, MPI_CHAR, ids.data(), kLength, MPI_CHAR, MPI_COMM_WORLD);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  for (int r = 1; r < ranks; ++r) {
    if (std::strncmp(ids.data(), ids.data() + r * kLength, kLength) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", r, " runs on another machine than rank 0 (", name,
          "); the bench compares steady_clock timestamps across ranks, which needs one clock "
          "(one host, or the emulated hosts of one machine)"));
    }
  }
  return absl::OkStatus();
}

struct Summary {
  double mean = 0;
  double median = 0;
  double min = 0;
  double max = 0;
};

Summary Summarize(std::vector<double> values) {
  Summary summary;
  std::sort(values.begin(), values.end());
  for (double value : values) summary.mean += value;
  summary.mean /= values.size();
  const size_t mid = values.size() / 2;
  summary.median = values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  summary.min = values.front();
  summary.max = values.back();
  return summary;
}

nlohmann::json SummaryJson(const Summary& summary) {
  return {{"mean", summary.mean},
          {"median", summary.median},
          {"min", summary.min},
          {"max", summary.max}};
}

// One row's measurements on rank 0: per timed call, seconds.
struct Samples {
  std::vector<double> time[2];
  std::vector<double> latency[2];
};

class Bench {
 public:
  Bench(const Config& config, int rank, int ranks) : config_(config), rank_(rank), ranks_(ranks) {
    const int64_t elements = config.max_bytes / config.dtype.size;
    send_.resize(elements * config.dtype.size);
    out_.resize(elements * config.dtype.size);
    if (config.check) {
      for (std::vector<char>& result : results_) result.resize(elements * config.dtype.size);
    }
  }

  // Runs one (delay, size) row; returns the mismatch count over all ranks (rank 0's samples are
  // filled, the others' stay empty).
  int64_t RunRow(double delay, int64_t count, Samples& samples) {
    // Exact in every reduction order, so --check can compare the two results bit for bit.
    const exact_data::Spec spec{
        .type = config_.dtype.data, .op = ReduceOp::kSum, .ranks = ranks_, .seed = kSeed};
    exact_data::FillInput(spec, rank_, 0, count, send_.data());
    int64_t wrong = 0;
    for (int i = 0; i < config_.warmup + config_.iterations; ++i) {
      double stamps[4];  // native arrival, completion, preload arrival, completion
      // Alternating order so that neither always runs right after the other.
      const Impl first = i % 2 == 0 ? kNative : kPreload;
      for (Impl impl : {first, first == kNative ? kPreload : kNative}) {
        Call(impl, delay, count, &stamps[2 * impl], &stamps[2 * impl + 1]);
      }
      if (config_.check) {
        wrong += exact_data::Compare(config_.dtype.data, results_[kNative].data(),
                                     results_[kPreload].data(), count)
                     .count;
      }
      // Outside the timed calls, and in warmup too, so every pair has the same call pattern.
      std::vector<double> all(rank_ == 0 ? 4 * ranks_ : 0);
      PMPI_Gather(stamps, 4, MPI_DOUBLE, all.data(), 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      if (rank_ != 0 || i < config_.warmup) continue;
      for (Impl impl : {kNative, kPreload}) {
        double min_arrival = std::numeric_limits<double>::infinity();
        double max_arrival = -min_arrival, max_completion = -min_arrival;
        for (int r = 0; r < ranks_; ++r) {
          min_arrival = std::min(min_arrival, all[4 * r + 2 * impl]);
          max_arrival = std::max(max_arrival, all[4 * r + 2 * impl]);
          max_completion = std::max(max_completion, all[4 * r + 2 * impl + 1]);
        }
        samples.latency[impl].push_back(max_completion - max_arrival);
        samples.time[impl].push_back(max_completion - min_arrival);
      }
    }
    int64_t total_wrong = 0;
    PMPI_Allreduce(&wrong, &total_wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return total_wrong;
  }

 private:
  void Call(Impl impl, double delay, int64_t count, double* arrival, double* completion) {
    // Both write the same buffer, so neither gains from where its memory happens to lie (two
    // buffers measured a steady 5% apart with the same MPI_Allreduce in both slots).
    void* out = out_.data();
    // A result left over from the previous call must not pass the check.
    if (config_.check) std::memset(out, impl == kNative ? 0x5a : 0xa5, count * config_.dtype.size);
    PMPI_Barrier(MPI_COMM_WORLD);
    // The straggler models a rank that computes longer before the collective; --also-late ranks
    // less long.
    const auto also = config_.also_late.find(rank_);
    const double late_s = rank_ == config_.straggler        ? delay
                          : also != config_.also_late.end() ? also->second * delay
                                                            : 0;
    if (late_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
    *arrival = Now();
    if (impl == kNative) {
      PMPI_Allreduce(send_.data(), out, static_cast<int>(count), config_.dtype.mpi, MPI_SUM,
                     MPI_COMM_WORLD);
    } else {
      MPI_Allreduce(send_.data(), out, static_cast<int>(count), config_.dtype.mpi, MPI_SUM,
                    MPI_COMM_WORLD);
    }
    *completion = Now();
    if (config_.check) {
      // Only once every rank is done: a rank that finishes early would otherwise copy and fill
      // 16 MiB while the others still run the collective, and on a node with fewer cores than
      // ranks that costs the algorithm whose ranks finish at different times (StragglAR) most.
      PMPI_Barrier(MPI_COMM_WORLD);
      std::memcpy(results_[impl].data(), out, count * config_.dtype.size);
    }
  }

  const Config& config_;
  const int rank_;
  const int ranks_;
  std::vector<char> send_;
  std::vector<char> out_;
  std::vector<char> results_[2];  // --check: each implementation's result, copied after its call
};

// nccl-tests' convention (bench/common/bandwidth.h), from the latency.
double BusBandwidth(int64_t bytes, double latency, int ranks) {
  return bench::AllReduceBandwidthOf(bytes, latency, ranks).busbw_gbps;
}

// ", also late: rank 1 by 0.5 of the delay", or "" for none.
std::string AlsoLateText(const Config& config) {
  if (config.also_late.empty()) return "";
  std::vector<std::string> parts;
  for (const auto& [rank, fraction] : config.also_late) {
    parts.push_back(absl::StrFormat("rank %d by %g", rank, fraction));
  }
  return absl::StrCat(", also late: ", absl::StrJoin(parts, ", "), " of the delay");
}

void PrintHeader(const Config& config, int ranks, const std::vector<int64_t>& sizes) {
  const char* preload = std::getenv("LD_PRELOAD");
  std::vector<std::string> delays;
  for (double delay : config.delays) delays.push_back(FormatSeconds(delay));
  std::string env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (absl::StartsWith(*entry, "STRAGGLAR_"))
      absl::StrAppend(&env, env.empty() ? "" : " ", *entry);
  }
  std::cout << absl::StrFormat(
      "# %s: native PMPI_Allreduce vs MPI_Allreduce, sum\n"
      "# ranks %d, straggler rank %d%s, dtype %s\n"
      "# LD_PRELOAD %s\n"
      "# environment %s\n"
      "# sizes %s .. %s (x%d), delays %s\n"
      "# iterations %d, warmup %d, check %s\n"
      "# clock steady_clock (CLOCK_MONOTONIC: one clock per kernel; checked across the ranks)\n"
      "# time = max completion - min arrival; latency = max completion - max arrival;\n"
      "# busbw from latency; ratios are native/preload (> 1: MPI_Allreduce is faster)\n"
      "#\n",
      kProgram, ranks, config.straggler, AlsoLateText(config), config.dtype.name,
      preload != nullptr && *preload != '\0' ? preload : "none", env.empty() ? "-" : env,
      FormatBytes(sizes.front()), FormatBytes(sizes.back()), config.step_factor,
      absl::StrJoin(delays, ", "), config.iterations, config.warmup, config.check ? "on" : "off");
  std::cout << absl::StrFormat("#%50s %-27s %-27s %-13s\n", "", "native", "preload",
                               "native/preload")
            << absl::StrFormat("#%11s %11s %7s %9s  %9s %9s %7s  %9s %9s %7s  %6s %6s %7s\n",
                               "size", "count", "type", "delay", "time", "latency", "busbw", "time",
                               "latency", "busbw", "time", "lat", "#wrong")
            << absl::StrFormat("#%11s %11s %7s %9s  %9s %9s %7s  %9s %9s %7s  %6s %6s %7s\n", "(B)",
                               "(elements)", "", "(ms)", "(us)", "(us)", "(GB/s)", "(us)", "(us)",
                               "(GB/s)", "", "", "")
            << std::flush;
}

nlohmann::json ReportRow(const Config& config, int ranks, double delay, int64_t count,
                         const Samples& samples, int64_t wrong) {
  const int64_t bytes = count * config.dtype.size;
  Summary time[2], latency[2];
  for (Impl impl : {kNative, kPreload}) {
    time[impl] = Summarize(samples.time[impl]);
    latency[impl] = Summarize(samples.latency[impl]);
  }
  const double time_ratio = time[kNative].mean / time[kPreload].mean;
  const double latency_ratio = latency[kNative].mean / latency[kPreload].mean;
  std::cout << absl::StrFormat(
                   " %11d %11d %7s %9.1f  %9.1f %9.1f %7.2f  %9.1f %9.1f %7.2f  %6.3f %6.3f %7s\n",
                   bytes, count, config.dtype.name, delay * 1e3, time[kNative].mean * 1e6,
                   latency[kNative].mean * 1e6, BusBandwidth(bytes, latency[kNative].mean, ranks),
                   time[kPreload].mean * 1e6, latency[kPreload].mean * 1e6,
                   BusBandwidth(bytes, latency[kPreload].mean, ranks), time_ratio, latency_ratio,
                   config.check ? absl::StrCat(wrong) : "N/A")
            << std::flush;
  nlohmann::json row = {
      {"bytes", bytes},   {"count", count},           {"dtype", config.dtype.name},
      {"delay_s", delay}, {"time_ratio", time_ratio}, {"latency_ratio", latency_ratio}};
  for (Impl impl : {kNative, kPreload}) {
    row[impl == kNative ? "native" : "preload"] = {
        {"time_s", SummaryJson(time[impl])},
        {"latency_s", SummaryJson(latency[impl])},
        {"busbw_gbps", BusBandwidth(bytes, latency[impl].mean, ranks)},
        {"algbw_gbps", bench::AllReduceBandwidthOf(bytes, latency[impl].mean, ranks).algbw_gbps},
        {"samples_time_s", samples.time[impl]},
        {"samples_latency_s", samples.latency[impl]}};
  }
  row["wrong"] = config.check ? nlohmann::json(wrong) : nlohmann::json(nullptr);
  return row;
}

absl::Status WriteJson(const std::string& path, const nlohmann::json& report) {
  std::ofstream file(path);
  file << report.dump(2) << "\n";
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write --json file ", path));
  return absl::OkStatus();
}

// Every rank reaches the same verdict, so every rank returns the same exit code; only rank 0
// prints.
int Fail(int rank, const absl::Status& status) {
  if (rank == 0) std::cerr << kProgram << ": " << status.message() << "\n";
  MPI_Finalize();
  return 1;
}

// Agrees on rank 0's status (it alone touches the --json file).
absl::Status Broadcast(int rank, absl::Status status) {
  int ok = status.ok();
  PMPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (ok) return absl::OkStatus();
  return rank == 0 ? status : absl::UnknownError("rank 0 failed");
}

int Main(int argc, char** argv) {
  const int env_rank = RankFromEnvironment();
  for (int i = 1; i < argc; ++i) {
    if (absl::string_view(argv[i]) == "--help" || absl::string_view(argv[i]) == "-h") {
      if (env_rank == 0) std::cout << kUsage;
      return 0;
    }
  }
  absl::SetProgramUsageMessage(kUsage);
  std::vector<std::string> storage;
  for (int i = 0; i < argc; ++i) storage.push_back(i == 0 ? argv[i] : NormalizeFlagName(argv[i]));
  std::vector<char*> args;
  for (std::string& arg : storage) args.push_back(arg.data());
  // absl prints one line and exits on a malformed value or an unknown flag; one copy is enough,
  // so the other ranks parse with stderr muted. This happens before MPI_Init, so exiting is clean.
  const int saved_stderr = env_rank != 0 ? dup(STDERR_FILENO) : -1;
  if (saved_stderr >= 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDERR_FILENO);
    close(null);
  }
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (saved_stderr >= 0) {
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
  }

  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (positional.size() > 1) {
    return Fail(rank, absl::InvalidArgumentError(
                          absl::StrCat("unexpected argument \"", positional[1], "\"")));
  }
  absl::StatusOr<Config> config = ConfigFromFlags(ranks);
  if (!config.ok()) return Fail(rank, config.status());
  if (absl::Status status = CheckOneClock(ranks); !status.ok()) return Fail(rank, status);
  const std::vector<int64_t> sizes = Sizes(*config);

  nlohmann::json report = {{"ranks", ranks},
                           {"straggler", config->straggler},
                           {"also_late", config->also_late},
                           {"dtype", config->dtype.name},
                           {"ld_preload", nullptr},
                           {"iterations", config->iterations},
                           {"warmup", config->warmup},
                           {"check", config->check},
                           {"clock", "steady_clock (one kernel)"},
                           {"rows", nlohmann::json::array()}};
  if (const char* preload = std::getenv("LD_PRELOAD"); preload != nullptr && *preload != '\0') {
    report["ld_preload"] = preload;
  }
  nlohmann::json env = nlohmann::json::object();
  for (char** entry = environ; *entry != nullptr; ++entry) {
    absl::string_view text = *entry;
    if (!absl::StartsWith(text, "STRAGGLAR_")) continue;
    const size_t equals = text.find('=');
    env[std::string(text.substr(0, equals))] = std::string(text.substr(equals + 1));
  }
  report["environment"] = env;
  // Fails early on an unwritable --json path, not after minutes of measuring.
  absl::Status status;
  if (rank == 0 && !config->json.empty()) status = WriteJson(config->json, report);
  if (status = Broadcast(rank, status); !status.ok()) return Fail(rank, status);

  if (rank == 0) PrintHeader(*config, ranks, sizes);
  Bench bench(*config, rank, ranks);
  int64_t total_wrong = 0;
  for (double delay : config->delays) {
    for (int64_t bytes : sizes) {
      const int64_t count = bytes / config->dtype.size;
      Samples samples;
      const int64_t wrong = bench.RunRow(delay, count, samples);
      total_wrong += wrong;
      if (rank != 0) continue;
      report["rows"].push_back(ReportRow(*config, ranks, delay, count, samples, wrong));
      // Rewritten per row so a long run that is cut short still leaves its rows.
      if (!config->json.empty() && status.ok()) status = WriteJson(config->json, report);
    }
  }
  if (status = Broadcast(rank, status); !status.ok()) return Fail(rank, status);
  if (total_wrong > 0) {
    return Fail(rank, absl::DataLossError(absl::StrCat(
                          total_wrong, " elements of MPI_Allreduce differ from PMPI_Allreduce")));
  }
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace stragglar

int main(int argc, char** argv) { return stragglar::Main(argc, argv); }
