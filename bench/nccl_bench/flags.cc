#include "bench/nccl_bench/flags.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/units.h"

ABSL_FLAG(stragglar::nccl_bench::BenchSize, minbytes, stragglar::nccl_bench::BenchSize{1 << 20},
          "-b: smallest message size in bytes");
ABSL_FLAG(stragglar::nccl_bench::BenchSize, maxbytes, stragglar::nccl_bench::BenchSize{64 << 20},
          "-e: largest message size in bytes");
ABSL_FLAG(int, stepfactor, 2, "-f: size multiplier from one row to the next");
ABSL_FLAG(int, iters, 20, "-n: timed iterations per size");
ABSL_FLAG(int, warmup_iters, 5, "-w: untimed iterations per size first");
ABSL_FLAG(std::string, datatype, "float", "-d: element type, a comma-separated list, or all");
ABSL_FLAG(std::string, op, "sum", "-o: reduction, a comma-separated list, or all");
ABSL_FLAG(int, check, 0, "-c: 1 checks every result bit for bit");
ABSL_FLAG(int, ranks, -1, "processes, one per rank (-1: one per GPU, 2 on a single GPU)");
ABSL_FLAG(int, straggler, -1, "the rank that spins --delay_us before each AllReduce (-1: last)");
ABSL_FLAG(double, delay_us, 0, "the straggler's spin before each AllReduce, in microseconds");
ABSL_FLAG(double, delay_us_per_mib, 0,
          "the straggler's spin grows by this many microseconds per MiB of the message");
ABSL_FLAG(std::vector<std::string>, sizes, {},
          "the message sizes, a comma-separated list (instead of -b, -e and -f)");
ABSL_FLAG(std::string, json, "", "also write every row and the metadata to this JSON file");
ABSL_FLAG(bool, one_gpu, false, "all ranks on device 0, one process and NCCL_HOSTID each");
ABSL_FLAG(double, timeout_s, 600, "kill every rank and fail after this many seconds");
ABSL_FLAG(
    std::string, executor, "",
    "with the preload: how its plans run, nccl or device (STRAGGLAR_EXECUTOR for every rank)");
// Set by the parent on the processes it starts; not for users.
ABSL_FLAG(int, internal_probe_fd, -1, "internal");
ABSL_FLAG(int, internal_rank, -1, "internal");
ABSL_FLAG(int, internal_device, -1, "internal");
ABSL_FLAG(int, internal_ctrl_fd, -1, "internal");
ABSL_FLAG(int, internal_result_fd, -1, "internal");

namespace stragglar::nccl_bench {
namespace {

const std::map<char, std::string>& ShortFlags() {
  static const auto* flags = new std::map<char, std::string>{
      {'b', "minbytes"},     {'e', "maxbytes"}, {'f', "stepfactor"}, {'n', "iters"},
      {'w', "warmup_iters"}, {'d', "datatype"}, {'o', "op"},         {'c', "check"}};
  return *flags;
}

bool IsKnownFlag(const std::string& name) {
  static const auto* names = new std::set<std::string>{"minbytes",
                                                       "maxbytes",
                                                       "stepfactor",
                                                       "iters",
                                                       "warmup_iters",
                                                       "datatype",
                                                       "op",
                                                       "check",
                                                       "ranks",
                                                       "straggler",
                                                       "delay_us",
                                                       "delay_us_per_mib",
                                                       "sizes",
                                                       "json",
                                                       "one_gpu",
                                                       "timeout_s",
                                                       "executor",
                                                       "internal_probe_fd",
                                                       "internal_rank",
                                                       "internal_device",
                                                       "internal_ctrl_fd",
                                                       "internal_result_fd"};
  return names->contains(name);
}

}  // namespace

bool AbslParseFlag(absl::string_view text, BenchSize* size, std::string* error) {
  std::string spelled(absl::StripAsciiWhitespace(text));
  if (!spelled.empty() && std::string_view("kKmMgGtT").find(spelled.back()) != std::string::npos) {
    spelled = absl::StrCat(spelled.substr(0, spelled.size() - 1),
                           std::string(1, absl::ascii_toupper(spelled.back())), "iB");
  }
  absl::StatusOr<int64_t> bytes = ParseByteSize(spelled);
  if (!bytes.ok()) {
    *error = absl::StrCat("malformed size \"", text,
                          "\"; expected bytes with an optional unit K, M, G (powers of 1024, as in "
                          "nccl-tests), KiB, MiB, GiB or KB, MB, GB (e.g. 1M, 64MiB)");
    return false;
  }
  size->bytes = *bytes;
  return true;
}

std::string AbslUnparseFlag(BenchSize size) { return absl::StrCat(size.bytes); }

const char kUsage[] =
    R"(stragglar-bench: nccl-tests-style AllReduce over NCCL, one process per rank.
With LD_PRELOAD=libstragglar.so the AllReduce is the preload's.

usage: stragglar-bench [-b 1M] [-e 64M] [-f 2] [-n 20] [-w 5] [-d float] [-o sum] [-c 0|1]
         [--sizes S,S...] [--ranks N] [--straggler R --delay_us D --delay_us_per_mib P]
         [--one_gpu] [--json FILE] [--timeout_s 600] [--executor nccl|device]

  -b, --minbytes SIZE     smallest size (nccl-tests units: 8, 1K, 64M, 1G; also 64MiB, 1MB)  [1M]
  -e, --maxbytes SIZE     largest size                                                      [64M]
  -f, --stepfactor N      size multiplier between rows (>= 2)                                 [2]
  --sizes S,S...          these sizes instead of -b, -e and -f, e.g. 16M,25M,64M,256M
  -n, --iters N           timed iterations per size and placement                            [20]
  -w, --warmup_iters N    untimed iterations first (cover a few STRAGGLAR_EPOCH_CALLS with
                          the preload in adapt mode)                                          [5]
  -d, --datatype T        int8 uint8 int32 uint32 int64 uint64 half float double bfloat16,
                          a comma-separated list, or all                                  [float]
  -o, --op OP             sum prod max min avg, a comma-separated list, or all              [sum]
  -c, --check 0|1         compare every result with the CPU reference, bit for bit (#wrong) [0]
  --ranks N               processes to start, one rank each (-1: one per GPU, 2 with one GPU)
  --straggler R           the late rank (-1: the last)                                       [-1]
  --delay_us D            rank R spins D us on its stream before every AllReduce              [0]
  --delay_us_per_mib P    and P us more per MiB of the message: a delay that is the same
                          multiple of a bandwidth-bound phase at every size                   [0]
  --one_gpu               every rank on device 0 (each its own NCCL_HOSTID, sockets over lo)
  --json FILE             also write all rows and the metadata as JSON
  --timeout_s S           kill every rank and fail after S seconds                          [600]
  --executor E            with the preload: its plans as NCCL send/recv rounds (nccl) or one
                          kernel per call over peer memory (device); sets STRAGGLAR_EXECUTOR

Short flags take their value separated (-b 1M), attached (-b1M) or after '=' (-b=1M); long ones
as --minbytes 1M or --minbytes=1M (dashes or underscores). With fewer GPUs than ranks, or
--one_gpu, each rank gets NCCL_HOSTID=stragglar-bench-<rank>, NCCL_NET=Socket,
NCCL_SOCKET_IFNAME=lo, NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 (unless already set): slow, for
testing on one GPU. Columns as nccl-tests: time in us (average over ranks), algbw = size / time,
busbw = algbw * 2(n-1)/n in GB/s; with --delay_us also "after": the time after the last rank's
arrival (per call, the shortest rank's call, averaged).

exit status: 0 ok; 1 wrong results or an NCCL/CUDA error; 2 bad flags; 77 no CUDA device (SKIP)
)";

absl::Status ParseArguments(int argc, char** argv, bool* help) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "-help") {
      *help = true;
      return absl::OkStatus();
    }
    std::string name;
    std::optional<std::string> value;
    if (absl::StartsWith(arg, "--") && arg.size() > 2) {
      const std::string body = arg.substr(2);
      const size_t equals = body.find('=');
      name = body.substr(0, equals);
      if (equals != std::string::npos) value = body.substr(equals + 1);
      std::replace(name.begin(), name.end(), '-', '_');
    } else if (arg.size() >= 2 && arg[0] == '-' && ShortFlags().contains(arg[1])) {
      name = ShortFlags().at(arg[1]);
      const std::string rest = arg.substr(2);
      if (!rest.empty()) value = rest[0] == '=' ? rest.substr(1) : rest;
    } else if (arg.size() >= 2 && arg[0] == '-') {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag \"", arg, "\" (see --help)"));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg, "\" (see --help)"));
    }
    absl::CommandLineFlag* flag = IsKnownFlag(name) ? absl::FindCommandLineFlag(name) : nullptr;
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag \"", arg, "\" (see --help)"));
    }
    if (!value.has_value()) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(*value, &error)) {
      // absl says "Illegal value 'x' specified for flag 'y'", then "; " and our parser's reason
      // when there is one.
      std::string reason;
      if (const size_t semicolon = error.find("; "); semicolon != std::string::npos) {
        reason = error.substr(semicolon + 2);
      } else if (flag->IsOfType<int>()) {
        reason = "expected an integer";
      } else if (flag->IsOfType<double>()) {
        reason = "expected a number";
      } else if (flag->IsOfType<bool>()) {
        reason = "expected true or false";
      } else {
        reason = error;
      }
      return absl::InvalidArgumentError(
          absl::StrCat("bad value \"", *value, "\" for --", name, ": ", reason));
    }
  }
  return absl::OkStatus();
}

}  // namespace stragglar::nccl_bench
