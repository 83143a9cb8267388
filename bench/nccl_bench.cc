// stragglar-bench: an nccl-tests-style AllReduce benchmark for NCCL, one process per rank, on one
// or more GPUs, with an optional injected straggler. Linked against libnccl like any NCCL program,
// so `LD_PRELOAD=libstragglar.so stragglar-bench ...` runs the preload's ncclAllReduce.
//
// Processes. The parent never touches CUDA or NCCL (a CUDA context does not survive fork, and
// NCCL's bootstrap starts threads). It forks and execs itself: first a probe that counts the
// devices and reads the versions, then one process per rank. Rank 0 calls ncclGetUniqueId and
// sends the id to the parent, which hands it to the other ranks; each rank then joins with
// ncclCommInitRank on device rank % devices. With fewer devices than ranks (or --one_gpu) every
// rank gets its own NCCL_HOSTID and NCCL talks over loopback sockets, as if each rank were its own
// node (see ../shared/docs/nccl.md, "Several ranks on one GPU"). The ranks report over pipes; the
// parent prints the table, writes --json, and kills every rank as soon as one fails, or when
// --timeout_s runs out, so it never hangs.
//
// Timing, as nccl-tests: per size, out-of-place then in-place; --warmup_iters untimed calls, then
// --iters calls between two CUDA events on the rank's stream; time is the per-call average,
// averaged over the ranks. algbw = bytes / time, busbw = algbw * 2(n-1)/n. With --delay_us, the
// --straggler rank enqueues a spin kernel of that length before every AllReduce (warm-up and
// check calls included), and every rank also records events around each timed call: the shortest
// rank's call (the last to arrive) is the time after the straggler's arrival ("after").
//
// -c 1: inputs are small integers per rank and element whose reduction is exact in any order, for
// every type and operator; every rank computes the expected result with the project's CPU kernels
// (kernels/reduce.h, ranks reduced in rank order) and compares it byte for byte. The one
// exception: float averages over a rank count that is not a power of two, where NCCL multiplies
// each input by 1/n before summing; those may differ by up to n + 2 units in the last place.

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <nccl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "bench/spin_kernel.h"
#include "kernels/nccl_types.h"
#include "kernels/reduce.h"
#include "nlohmann/json.hpp"
#include "runtime/units.h"

extern char** environ;

namespace stragglar {
namespace {

// Sizes as nccl-tests writes them ("8", "1K", "64M", "1G": powers of 1024) or as the rest of the
// project does ("64MiB", "1MB").
struct BenchSize {
  int64_t bytes = 0;
};

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

}  // namespace
}  // namespace stragglar

ABSL_FLAG(stragglar::BenchSize, minbytes, stragglar::BenchSize{1 << 20},
          "-b: smallest message size in bytes");
ABSL_FLAG(stragglar::BenchSize, maxbytes, stragglar::BenchSize{64 << 20},
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
ABSL_FLAG(std::string, json, "", "also write every row and the metadata to this JSON file");
ABSL_FLAG(bool, one_gpu, false, "all ranks on device 0, one process and NCCL_HOSTID each");
ABSL_FLAG(double, timeout_s, 600, "kill every rank and fail after this many seconds");
// Set by the parent on the processes it starts; not for users.
ABSL_FLAG(int, internal_probe_fd, -1, "internal");
ABSL_FLAG(int, internal_rank, -1, "internal");
ABSL_FLAG(int, internal_device, -1, "internal");
ABSL_FLAG(int, internal_ctrl_fd, -1, "internal");
ABSL_FLAG(int, internal_result_fd, -1, "internal");

#define STRAGGLAR_RETURN_IF_ERROR(expr)                               \
  do {                                                                \
    if (absl::Status status_ = (expr); !status_.ok()) return status_; \
  } while (0)

namespace stragglar {
namespace {

constexpr absl::string_view kProgram = "stragglar-bench";

constexpr char kUsage[] =
    R"(stragglar-bench: nccl-tests-style AllReduce over NCCL, one process per rank.
With LD_PRELOAD=libstragglar.so the AllReduce is the preload's.

usage: stragglar-bench [-b 1M] [-e 64M] [-f 2] [-n 20] [-w 5] [-d float] [-o sum] [-c 0|1]
         [--ranks N] [--straggler R --delay_us D] [--one_gpu] [--json FILE] [--timeout_s 600]

  -b, --minbytes SIZE     smallest size (nccl-tests units: 8, 1K, 64M, 1G; also 64MiB, 1MB)  [1M]
  -e, --maxbytes SIZE     largest size                                                      [64M]
  -f, --stepfactor N      size multiplier between rows (>= 2)                                 [2]
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
  --one_gpu               every rank on device 0 (each its own NCCL_HOSTID, sockets over lo)
  --json FILE             also write all rows and the metadata as JSON
  --timeout_s S           kill every rank and fail after S seconds                          [600]

Short flags take their value separated (-b 1M), attached (-b1M) or after '=' (-b=1M); long ones
as --minbytes 1M or --minbytes=1M (dashes or underscores). With fewer GPUs than ranks, or
--one_gpu, each rank gets NCCL_HOSTID=stragglar-bench-<rank>, NCCL_NET=Socket,
NCCL_SOCKET_IFNAME=lo, NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 (unless already set): slow, for
testing on one GPU. Columns as nccl-tests: time in us (average over ranks), algbw = size / time,
busbw = algbw * 2(n-1)/n in GB/s; with --delay_us also "after": the time after the last rank's
arrival (per call, the shortest rank's call, averaged).

exit status: 0 ok; 1 wrong results or an NCCL/CUDA error; 2 bad flags; 77 no CUDA device (SKIP)
)";

// ------------------------------------------------------------------------------------------------
// Flags and configuration.

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
                                                       "json",
                                                       "one_gpu",
                                                       "timeout_s",
                                                       "internal_probe_fd",
                                                       "internal_rank",
                                                       "internal_device",
                                                       "internal_ctrl_fd",
                                                       "internal_result_fd"};
  return names->contains(name);
}

// getopt-style short flags on top of absl's flag registry (absl alone has no "-b1M" and exits
// with status 1 on a bad flag, where we promise 2). Sets `help` for -h/--help.
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

struct Config {
  int64_t min_bytes = 0;
  int64_t max_bytes = 0;
  int step_factor = 2;
  int iters = 0;
  int warmup = 0;
  std::vector<DataType> types;
  std::vector<ReduceOp> ops;
  bool check = false;
  int ranks = -1;  // -1: from the device count
  int straggler = -1;
  double delay_us = 0;
  std::string json;
  bool one_gpu = false;
  double timeout_s = 600;
};

// nccl-tests' names for the types.
absl::string_view TypeName(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return "half";
    case DataType::kFloat32:
      return "float";
    case DataType::kFloat64:
      return "double";
    default:
      return DataTypeName(type);
  }
}

absl::StatusOr<std::vector<DataType>> ParseTypes(const std::string& text) {
  if (text == "all") return std::vector<DataType>(kAllDataTypes.begin(), kAllDataTypes.end());
  std::vector<DataType> types;
  for (absl::string_view name : absl::StrSplit(text, ',')) {
    absl::StatusOr<DataType> type = ParseDataType(absl::StripAsciiWhitespace(name));
    if (!type.ok()) {
      std::vector<std::string> names;
      for (DataType t : kAllDataTypes) names.emplace_back(TypeName(t));
      return absl::InvalidArgumentError(absl::StrCat("--datatype: unknown data type \"", name,
                                                     "\"; expected one of ",
                                                     absl::StrJoin(names, ", "), " or all"));
    }
    types.push_back(*type);
  }
  return types;
}

absl::StatusOr<std::vector<ReduceOp>> ParseOps(const std::string& text) {
  if (text == "all") return std::vector<ReduceOp>(kAllReduceOps.begin(), kAllReduceOps.end());
  std::vector<ReduceOp> ops;
  for (absl::string_view name : absl::StrSplit(text, ',')) {
    absl::StatusOr<ReduceOp> op = ParseReduceOp(absl::StripAsciiWhitespace(name));
    if (!op.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--op: unknown reduction \"", name,
                       "\"; expected one of sum, prod, max, min, avg or all"));
    }
    ops.push_back(*op);
  }
  return ops;
}

absl::StatusOr<Config> ConfigFromFlags() {
  Config config;
  absl::StatusOr<std::vector<DataType>> types = ParseTypes(absl::GetFlag(FLAGS_datatype));
  if (!types.ok()) return types.status();
  config.types = *types;
  absl::StatusOr<std::vector<ReduceOp>> ops = ParseOps(absl::GetFlag(FLAGS_op));
  if (!ops.ok()) return ops.status();
  config.ops = *ops;
  config.min_bytes = absl::GetFlag(FLAGS_minbytes).bytes;
  config.max_bytes = absl::GetFlag(FLAGS_maxbytes).bytes;
  for (DataType type : config.types) {
    if (config.min_bytes < DataTypeSize(type)) {
      return absl::InvalidArgumentError(absl::StrCat("--minbytes ", config.min_bytes,
                                                     " does not hold one ", TypeName(type), " (",
                                                     DataTypeSize(type), " bytes)"));
    }
  }
  if (config.max_bytes < config.min_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--maxbytes ", config.max_bytes, " is smaller than --minbytes ", config.min_bytes));
  }
  config.step_factor = absl::GetFlag(FLAGS_stepfactor);
  if (config.step_factor < 2) return absl::InvalidArgumentError("--stepfactor must be >= 2");
  config.iters = absl::GetFlag(FLAGS_iters);
  if (config.iters < 1) return absl::InvalidArgumentError("--iters must be >= 1");
  config.warmup = absl::GetFlag(FLAGS_warmup_iters);
  if (config.warmup < 0) return absl::InvalidArgumentError("--warmup_iters must be >= 0");
  const int check = absl::GetFlag(FLAGS_check);
  if (check != 0 && check != 1) return absl::InvalidArgumentError("--check must be 0 or 1");
  config.check = check == 1;
  config.ranks = absl::GetFlag(FLAGS_ranks);
  if (config.ranks != -1 && config.ranks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ranks ", config.ranks, " must be >= 1 (or -1: one per GPU, 2 with a single GPU)"));
  }
  config.straggler = absl::GetFlag(FLAGS_straggler);
  if (config.straggler < -1 || (config.ranks >= 1 && config.straggler >= config.ranks)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--straggler ", config.straggler, " is not a rank of 0..",
                     config.ranks >= 1 ? config.ranks - 1 : 0, " (or -1 for the last)"));
  }
  config.delay_us = absl::GetFlag(FLAGS_delay_us);
  if (!(config.delay_us >= 0 && config.delay_us <= 1e7)) {
    return absl::InvalidArgumentError("--delay_us must be between 0 and 1e7 (10 s)");
  }
  config.json = absl::GetFlag(FLAGS_json);
  config.one_gpu = absl::GetFlag(FLAGS_one_gpu);
  config.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (!(config.timeout_s > 0)) return absl::InvalidArgumentError("--timeout_s must be > 0");
  return config;
}

std::vector<int64_t> Sizes(const Config& config) {
  return GeometricSizes(config.min_bytes, config.max_bytes, config.step_factor);
}

// One row of the table: the order is the same in the parent and in every rank.
struct RowSpec {
  DataType type;
  ReduceOp op;
  int64_t count;
  int64_t bytes;
};

std::vector<RowSpec> RowSpecs(const Config& config) {
  std::vector<RowSpec> rows;
  for (DataType type : config.types) {
    for (ReduceOp op : config.ops) {
      for (int64_t size : Sizes(config)) {
        const int64_t count = size / DataTypeSize(type);
        rows.push_back({type, op, count, count * DataTypeSize(type)});
      }
    }
  }
  return rows;
}

// ------------------------------------------------------------------------------------------------
// Pipes between the parent and the processes it starts: one line per message.

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

// Blocking: the next line from `fd`, or nullopt at end of file.
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

// ------------------------------------------------------------------------------------------------
// -c 1: exact inputs and the CPU reference.

bool IsFloating(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kBfloat16;
}

bool IsUnsigned(DataType type) {
  return type == DataType::kUint8 || type == DataType::kUint32 || type == DataType::kUint64;
}

// How large a sum of |inputs| may get and stay exact: integers are exact in bf16 up to 256, in
// fp16 up to 2048; int8 and uint8 sums stay clear of wrapping (wrapping would be exact too, but
// an average divides the wrapped sum).
int64_t SumLimit(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return 127;
    case DataType::kUint8:
      return 255;
    case DataType::kFloat16:
      return 2048;
    case DataType::kBfloat16:
      return 256;
    default:
      return int64_t{1} << 20;
  }
}

// Element `i` of `rank`'s input: small integers whose reduction is exact in any order.
// sum: |v| <= m with n * m within the type's exact range; prod: +-1 or +-2, at most one 2 per
// element across ranks; max/min: -8..8; avg: 1..m, positive, so that x/n summed over a
// power-of-two n is exact too.
int64_t CheckValue(DataType type, ReduceOp op, int rank, int ranks, int64_t i) {
  const bool is_signed = !IsUnsigned(type);
  const int64_t m = std::clamp<int64_t>(SumLimit(type) / ranks, 1, 8);
  switch (op) {
    case ReduceOp::kSum: {
      const int64_t k = (i * 7 + rank * 3) % (is_signed ? 2 * m + 1 : m + 1);
      return is_signed ? k - m : k;
    }
    case ReduceOp::kProd: {
      int64_t v = i % (ranks + 1) == rank ? 2 : 1;
      if (is_signed && (i + 2 * rank) % 3 == 0) v = -v;
      return v;
    }
    case ReduceOp::kMax:
    case ReduceOp::kMin: {
      const int64_t k = (i * 13 + rank * 7) % 17;
      return is_signed ? k - 8 : k;
    }
    case ReduceOp::kAvg:
      return 1 + (i * 5 + rank) % m;
  }
  return 0;
}

template <typename Stored, typename Encode>
void FillAs(void* data, int64_t count, Encode encode) {
  auto* out = static_cast<Stored*>(data);
  for (int64_t i = 0; i < count; ++i) out[i] = encode(i);
}

void FillInput(DataType type, ReduceOp op, int rank, int ranks, int64_t count, void* data) {
  auto v = [&](int64_t i) { return CheckValue(type, op, rank, ranks, i); };
  switch (type) {
    case DataType::kInt8:
      return FillAs<int8_t>(data, count, [&](int64_t i) { return static_cast<int8_t>(v(i)); });
    case DataType::kUint8:
      return FillAs<uint8_t>(data, count, [&](int64_t i) { return static_cast<uint8_t>(v(i)); });
    case DataType::kInt32:
      return FillAs<int32_t>(data, count, [&](int64_t i) { return static_cast<int32_t>(v(i)); });
    case DataType::kUint32:
      return FillAs<uint32_t>(data, count, [&](int64_t i) { return static_cast<uint32_t>(v(i)); });
    case DataType::kInt64:
      return FillAs<int64_t>(data, count, [&](int64_t i) { return v(i); });
    case DataType::kUint64:
      return FillAs<uint64_t>(data, count, [&](int64_t i) { return static_cast<uint64_t>(v(i)); });
    case DataType::kFloat16:
      return FillAs<uint16_t>(data, count,
                              [&](int64_t i) { return FloatToHalf(static_cast<float>(v(i))); });
    case DataType::kFloat32:
      return FillAs<float>(data, count, [&](int64_t i) { return static_cast<float>(v(i)); });
    case DataType::kFloat64:
      return FillAs<double>(data, count, [&](int64_t i) { return static_cast<double>(v(i)); });
    case DataType::kBfloat16:
      return FillAs<uint16_t>(data, count,
                              [&](int64_t i) { return FloatToBfloat16(static_cast<float>(v(i))); });
  }
}

// NCCL averages floats as sum(x * (1/n)): exact when n is a power of two (with these inputs),
// otherwise rounded once per rank. Units in the last place allowed; 0 means bit for bit.
int64_t UlpTolerance(DataType type, ReduceOp op, int ranks) {
  if (op != ReduceOp::kAvg || !IsFloating(type) || std::has_single_bit(unsigned(ranks))) return 0;
  return ranks + 2;
}

// Sign-magnitude bits as an ordered integer, so that neighbouring floats differ by one.
__int128 OrderedBits(const char* element, int size) {
  uint64_t bits = 0;
  std::memcpy(&bits, element, size);  // little-endian
  const uint64_t sign = uint64_t{1} << (8 * size - 1);
  const __int128 magnitude = bits & (sign - 1);
  return (bits & sign) != 0 ? -magnitude : magnitude;
}

struct Mismatches {
  int64_t count = 0;
  int64_t first = -1;
};

Mismatches Compare(DataType type, int64_t tolerance, const char* got, const char* want,
                   int64_t count) {
  const int size = DataTypeSize(type);
  Mismatches result;
  if (std::memcmp(got, want, count * size) == 0) return result;
  for (int64_t i = 0; i < count; ++i) {
    const char* a = got + i * size;
    const char* b = want + i * size;
    if (std::memcmp(a, b, size) == 0) continue;
    if (tolerance > 0) {
      const __int128 distance = OrderedBits(a, size) - OrderedBits(b, size);
      if (distance <= tolerance && -distance <= tolerance) continue;
    }
    if (result.first < 0) result.first = i;
    ++result.count;
  }
  return result;
}

std::string ElementHex(const char* data, int64_t i, int size) {
  std::string hex;
  for (int b = size - 1; b >= 0; --b) {
    absl::StrAppendFormat(&hex, "%02x", static_cast<unsigned char>(data[i * size + b]));
  }
  return absl::StrCat("0x", hex);
}

// ------------------------------------------------------------------------------------------------
// The probe: the device count and versions, in a process of its own.

int ProbeMain(int fd) {
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  SendLine(fd, absl::StrCat("VERSIONS ", nccl_version, " ", runtime, " ", driver));
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    SendLine(fd, absl::StrCat("SKIP cudaGetDeviceCount: ", cudaGetErrorString(error), " (",
                              cudaGetErrorName(error), ", error ", static_cast<int>(error), ")"));
    return 0;
  }
  if (count == 0) {
    SendLine(fd, "SKIP cudaGetDeviceCount found 0 devices");
    return 0;
  }
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp prop{};
    char bus[64] = "?";
    cudaGetDeviceProperties(&prop, device);
    cudaDeviceGetPCIBusId(bus, sizeof(bus), device);
    SendLine(fd, absl::StrCat("DEVICE ", device, " ", bus, " ", prop.name));
  }
  SendLine(fd, "DONE");
  return 0;
}

// ------------------------------------------------------------------------------------------------
// One rank.

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": CUDA error ", static_cast<int>(error), " (",
                                          cudaGetErrorName(error),
                                          "): ", cudaGetErrorString(error)));
}

absl::Status NcclStatus(ncclResult_t result, absl::string_view what, ncclComm_t comm) {
  if (result == ncclSuccess) return absl::OkStatus();
  const char* last = ncclGetLastError(comm);
  return absl::InternalError(absl::StrCat(
      what, ": NCCL error ", static_cast<int>(result), " (", ncclGetErrorString(result), ")",
      last != nullptr && *last != '\0' ? ": " : "", last != nullptr ? last : ""));
}

struct PlacementResult {
  double time_us = 0;
  int64_t wrong = 0;
  std::vector<double> call_us;  // with --delay_us: each timed call's duration on this rank
};

class Rank {
 public:
  Rank(const Config& config, int rank, int device, int ctrl_fd, int result_fd)
      : config_(config), rank_(rank), device_(device), ctrl_fd_(ctrl_fd), result_fd_(result_fd) {}

  ~Rank() {
    for (cudaEvent_t event : call_events_) cudaEventDestroy(event);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (send_ != nullptr) cudaFree(send_);
    if (recv_ != nullptr) cudaFree(recv_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  // 0 done, 77 no device, 1 error (reported on the pipe).
  int Main() {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
      SendLine(result_fd_,
               absl::StrCat("SKIP cudaGetDeviceCount: ",
                            error != cudaSuccess ? cudaGetErrorString(error) : "found 0 devices"));
      return 77;
    }
    if (absl::Status status = Run(count); !status.ok()) {
      SendLine(result_fd_, absl::StrCat("ERROR ", status.message()));
      // No cleanup: with a peer gone, ncclCommDestroy could wait forever. The parent ends the
      // other ranks.
      std::cerr.flush();
      _exit(1);
    }
    SendLine(result_fd_, "DONE");
    return 0;
  }

 private:
  absl::Status Run(int device_count) {
    const int ranks = config_.ranks;
    ncclUniqueId id;
    if (rank_ == 0) {
      STRAGGLAR_RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr));
      SendLine(result_fd_, absl::StrCat("ID ", Hex(&id, sizeof(id))));
    } else {
      std::optional<std::string> line = ReadLine(ctrl_fd_);
      if (!line.has_value() || !absl::StartsWith(*line, "ID ") ||
          !Unhex(absl::string_view(*line).substr(3), &id, sizeof(id))) {
        return absl::UnavailableError("no NCCL unique id from the parent");
      }
    }
    if (device_ >= device_count) {
      return absl::FailedPreconditionError(
          absl::StrCat("device ", device_, " does not exist (", device_count, " devices)"));
    }
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    cudaDeviceProp prop{};
    STRAGGLAR_RETURN_IF_ERROR(
        CudaStatus(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties"));
    char bus[64] = "?";
    cudaDeviceGetPCIBusId(bus, sizeof(bus), device_);
    STRAGGLAR_RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    STRAGGLAR_RETURN_IF_ERROR(
        NcclStatus(ncclCommInitRank(&comm_, ranks, id, rank_), "ncclCommInitRank", nullptr));
    char host[256] = "?";
    gethostname(host, sizeof(host) - 1);
    SendLine(result_fd_,
             absl::StrCat("HELLO ", getpid(), " ", host, " ", device_, " ", bus, " ", prop.name));

    // Plain device memory, the largest size for every row; in place uses recv_.
    const size_t bytes = static_cast<size_t>(config_.max_bytes);
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&send_, bytes), "cudaMalloc"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&recv_, bytes), "cudaMalloc"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaMemset(send_, 0, bytes), "cudaMemset"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaMemset(recv_, 0, bytes), "cudaMemset"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&start_), "cudaEventCreate"));
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&stop_), "cudaEventCreate"));
    if (config_.delay_us > 0) {
      call_events_.resize(2 * config_.iters);
      for (cudaEvent_t& event : call_events_) {
        STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&event), "cudaEventCreate"));
      }
    }
    if (config_.check) {
      input_.resize(bytes);
      expected_.resize(bytes);
      scratch_.resize(bytes);
    }

    const std::vector<RowSpec> rows = RowSpecs(config_);
    for (size_t index = 0; index < rows.size(); ++index) {
      const RowSpec& row = rows[index];
      if (config_.check) Reference(row);
      for (const bool in_place : {false, true}) {
        absl::StatusOr<PlacementResult> result = RunPlacement(row, in_place);
        if (!result.ok()) {
          return absl::Status(result.status().code(),
                              absl::StrCat(TypeName(row.type), " ", ReduceOpName(row.op), " ",
                                           row.bytes, " B ", in_place ? "in place" : "out of place",
                                           ": ", result.status().message()));
        }
        std::string line = absl::StrFormat("ROW %d %d %.4f %d %d", index, in_place ? 1 : 0,
                                           result->time_us, result->wrong, result->call_us.size());
        for (double call : result->call_us) absl::StrAppendFormat(&line, " %.4f", call);
        if (!SendLine(result_fd_, line)) return absl::UnavailableError("the parent is gone");
      }
    }
    STRAGGLAR_RETURN_IF_ERROR(NcclStatus(ncclCommDestroy(comm_), "ncclCommDestroy", nullptr));
    comm_ = nullptr;
    return absl::OkStatus();
  }

  // input_ = this rank's input; expected_ = the reduction over all ranks' inputs, in rank order.
  void Reference(const RowSpec& row) {
    const int ranks = config_.ranks;
    FillInput(row.type, row.op, 0, ranks, row.count, expected_.data());
    for (int r = 1; r < ranks; ++r) {
      FillInput(row.type, row.op, r, ranks, row.count, scratch_.data());
      ReduceInto(row.type, row.op, expected_.data(), scratch_.data(), row.count);
    }
    FinalizeReduction(row.type, row.op, expected_.data(), row.count, ranks);
    FillInput(row.type, row.op, rank_, ranks, row.count, input_.data());
  }

  // One AllReduce as the benchmark issues it: the straggler's spin first.
  absl::Status Call(const RowSpec& row, const void* send, void* recv, cudaEvent_t before,
                    cudaEvent_t after) {
    if (rank_ == config_.straggler && config_.delay_us > 0) {
      STRAGGLAR_RETURN_IF_ERROR(CudaStatus(
          LaunchSpinKernel(std::llround(config_.delay_us * 1e3), stream_), "spin kernel launch"));
    }
    if (before != nullptr) {
      STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(before, stream_), "cudaEventRecord"));
    }
    STRAGGLAR_RETURN_IF_ERROR(
        NcclStatus(ncclAllReduce(send, recv, row.count, NcclDataType(row.type), NcclRedOp(row.op),
                                 comm_, stream_),
                   "ncclAllReduce", comm_));
    if (after != nullptr) {
      STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(after, stream_), "cudaEventRecord"));
    }
    return absl::OkStatus();
  }

  absl::Status Synchronize() {
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  absl::Status Upload(void* device, int64_t bytes) {
    return CudaStatus(
        cudaMemcpyAsync(device, input_.data(), bytes, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpy to the device");
  }

  absl::Status Download(const void* device, int64_t bytes) {
    STRAGGLAR_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(scratch_.data(), device, bytes, cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpy from the device"));
    return Synchronize();
  }

  // Counts the wrong elements in scratch_ (the downloaded result) and says where on stderr.
  int64_t CheckResult(const RowSpec& row, bool in_place) {
    const Mismatches result = Compare(row.type, UlpTolerance(row.type, row.op, config_.ranks),
                                      scratch_.data(), expected_.data(), row.count);
    if (result.count > 0) {
      const int size = DataTypeSize(row.type);
      std::cerr << absl::StrFormat(
          "%s: rank %d: %s %s %d B %s: %d wrong elements; first at index %d: got %s, expected "
          "%s\n",
          kProgram, rank_, TypeName(row.type), ReduceOpName(row.op), row.bytes,
          in_place ? "in place" : "out of place", result.count, result.first,
          ElementHex(scratch_.data(), result.first, size),
          ElementHex(expected_.data(), result.first, size));
    }
    return result.count;
  }

  absl::StatusOr<PlacementResult> RunPlacement(const RowSpec& row, bool in_place) {
    PlacementResult result;
    void* send = in_place ? recv_ : send_;
    if (config_.check) {
      STRAGGLAR_RETURN_IF_ERROR(Upload(send, row.bytes));
      // A result left over from an earlier row must not pass the check.
      if (!in_place) {
        STRAGGLAR_RETURN_IF_ERROR(
            CudaStatus(cudaMemsetAsync(recv_, 0xff, row.bytes, stream_), "cudaMemset"));
      }
    }
    for (int i = 0; i < config_.warmup; ++i) {
      STRAGGLAR_RETURN_IF_ERROR(Call(row, send, recv_, nullptr, nullptr));
    }
    STRAGGLAR_RETURN_IF_ERROR(Synchronize());
    const bool per_call = !call_events_.empty();
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(start_, stream_), "cudaEventRecord"));
    for (int i = 0; i < config_.iters; ++i) {
      STRAGGLAR_RETURN_IF_ERROR(Call(row, send, recv_, per_call ? call_events_[2 * i] : nullptr,
                                     per_call ? call_events_[2 * i + 1] : nullptr));
    }
    STRAGGLAR_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(stop_, stream_), "cudaEventRecord"));
    STRAGGLAR_RETURN_IF_ERROR(Synchronize());
    float ms = 0;
    STRAGGLAR_RETURN_IF_ERROR(
        CudaStatus(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime"));
    result.time_us = ms * 1e3 / config_.iters;
    if (per_call) {
      for (int i = 0; i < config_.iters; ++i) {
        STRAGGLAR_RETURN_IF_ERROR(
            CudaStatus(cudaEventElapsedTime(&ms, call_events_[2 * i], call_events_[2 * i + 1]),
                       "cudaEventElapsedTime"));
        result.call_us.push_back(ms * 1e3);
      }
    }
    if (!config_.check) return result;
    if (!in_place) {
      // The last timed call's result, then the input, which must be untouched.
      STRAGGLAR_RETURN_IF_ERROR(Download(recv_, row.bytes));
      result.wrong = CheckResult(row, in_place);
      STRAGGLAR_RETURN_IF_ERROR(Download(send_, row.bytes));
      const Mismatches changed = Compare(row.type, 0, scratch_.data(), input_.data(), row.count);
      if (changed.count > 0) {
        std::cerr << absl::StrFormat(
            "%s: rank %d: %s %s %d B out of place: the input buffer changed at %d elements "
            "(first at index %d)\n",
            kProgram, rank_, TypeName(row.type), ReduceOpName(row.op), row.bytes, changed.count,
            changed.first);
      }
      result.wrong += changed.count;
    } else {
      // The timed calls reduced the buffer into itself over and over: one more call on the
      // input, as the benchmark issues it.
      STRAGGLAR_RETURN_IF_ERROR(Upload(recv_, row.bytes));
      STRAGGLAR_RETURN_IF_ERROR(Call(row, recv_, recv_, nullptr, nullptr));
      STRAGGLAR_RETURN_IF_ERROR(Download(recv_, row.bytes));
      result.wrong = CheckResult(row, in_place);
    }
    return result;
  }

  const Config& config_;
  const int rank_;
  const int device_;
  const int ctrl_fd_;
  const int result_fd_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  std::vector<cudaEvent_t> call_events_;
  std::vector<char> input_;
  std::vector<char> expected_;
  std::vector<char> scratch_;
};

// ------------------------------------------------------------------------------------------------
// The parent: starts the processes, collects their lines, prints, kills.

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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

// SIGTERM, a grace period, then SIGKILL; every one reaped.
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

// Reads what is there; returns the complete lines. Sets eof at end of file.
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

struct Probe {
  int nccl_version = 0;
  int cuda_runtime = 0;
  int cuda_driver = 0;
  std::optional<std::string> skip;
  std::vector<std::string> devices;  // "<bus id> <name>"
};

absl::StatusOr<Probe> RunProbe(const std::vector<std::string>& args,
                               const std::vector<std::string>& env, double timeout_s) {
  absl::StatusOr<Child> spawned = Spawn(args, env, -1);
  if (!spawned.ok()) return spawned.status();
  Child& child = *spawned;
  Probe probe;
  bool done = false;
  const double deadline = Now() + timeout_s;
  while (!child.eof) {
    pollfd fd{child.result_fd, POLLIN, 0};
    const int wait_ms = static_cast<int>(std::max(0.0, deadline - Now()) * 1e3);
    const int ready = poll(&fd, 1, std::min(wait_ms, 1000));
    if (ready <= 0) {
      if (Now() < deadline) continue;
      std::vector<Child> children = {child};
      KillAll(children);
      return absl::DeadlineExceededError("the device probe did not finish (--timeout_s)");
    }
    for (const std::string& line : ReadLines(child)) {
      if (absl::StartsWith(line, "VERSIONS ")) {
        std::sscanf(line.c_str(), "VERSIONS %d %d %d", &probe.nccl_version, &probe.cuda_runtime,
                    &probe.cuda_driver);
      } else if (absl::StartsWith(line, "SKIP ")) {
        probe.skip = line.substr(5);
      } else if (absl::StartsWith(line, "DEVICE ")) {
        const std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 2));
        probe.devices.push_back(parts.size() > 2 ? parts[2] : "?");
      } else if (line == "DONE") {
        done = true;
      }
    }
  }
  Reap(child, true);
  if (probe.skip.has_value()) return probe;
  if (!done) {
    return absl::InternalError(
        absl::StrCat("the device probe ", DescribeExit(child.status), " without an answer"));
  }
  return probe;
}

std::string NcclVersionString(int code) {
  // 2.9 and later: major * 10000 + minor * 100 + patch.
  if (code >= 10000) return absl::StrFormat("%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
  return absl::StrFormat("%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
}

// Where ncclAllReduce resolves in this process: libnccl's, or an interposer's.
std::string NcclAllReduceOrigin() {
  void* symbol = dlsym(RTLD_DEFAULT, "ncclAllReduce");
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

bool PreloadActive(const std::string& origin) { return absl::StrContains(origin, "libstragglar"); }

std::string ShellQuote(absl::string_view arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_=./:,+@%") == absl::string_view::npos) {
    return std::string(arg);
  }
  std::string quoted = "'";
  for (char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

absl::Status WriteJson(const std::string& path, const nlohmann::json& report) {
  if (path.empty()) return absl::OkStatus();
  const std::string temporary = path + ".tmp";
  std::ofstream file(temporary);
  file << report.dump(2) << "\n";
  file.close();
  if (!file || std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write --json file ", path));
  }
  return absl::OkStatus();
}

// The rows as they come in: per row and placement, every rank's numbers.
struct Collected {
  std::vector<double> time_us;
  std::vector<int64_t> wrong;
  std::vector<std::vector<double>> call_us;
  int arrived = 0;
};

struct PlacementSummary {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  int64_t wrong = 0;
  std::optional<double> after_us;
};

PlacementSummary Summarize(const Collected& collected, int64_t bytes, int ranks) {
  PlacementSummary summary;
  for (double t : collected.time_us) summary.time_us += t / ranks;
  for (int64_t w : collected.wrong) summary.wrong += w;
  summary.algbw = summary.time_us > 0 ? bytes / summary.time_us / 1e3 : 0;  // GB/s
  summary.busbw = summary.algbw * 2.0 * (ranks - 1) / ranks;
  if (!collected.call_us.empty() && !collected.call_us[0].empty()) {
    const size_t calls = collected.call_us[0].size();
    double total = 0;
    for (size_t i = 0; i < calls; ++i) {
      double shortest = std::numeric_limits<double>::infinity();
      for (const std::vector<double>& rank_calls : collected.call_us) {
        if (i < rank_calls.size()) shortest = std::min(shortest, rank_calls[i]);
      }
      total += shortest;
    }
    summary.after_us = total / calls;
  }
  return summary;
}

class Parent {
 public:
  Parent(const Config& config, std::vector<std::string> argv) : config_(config), argv_(argv) {}

  int Main() {
    signal(SIGPIPE, SIG_IGN);  // a rank that dies must not take the parent with it
    std::string command_line;
    for (const std::string& arg : argv_) {
      absl::StrAppend(&command_line, command_line.empty() ? "" : " ", ShellQuote(arg));
    }
    report_ = {
        {"program", kProgram},
        {"command_line", command_line},
        {"status", "starting"},
        {"units",
         {{"size", "bytes"}, {"time_us", "microseconds"}, {"algbw", "GB/s"}, {"busbw", "GB/s"}}},
        {"rows", nlohmann::json::array()}};
    // Fails early on an unwritable --json path.
    if (absl::Status status = WriteJson(config_.json, report_); !status.ok()) {
      std::cerr << kProgram << ": " << status.message() << "\n";
      return 2;
    }

    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
    absl::StatusOr<Probe> probe = RunProbe(ChildArgs({}), env, config_.timeout_s);
    if (!probe.ok()) return Fail(absl::StrCat("device probe: ", probe.status().message()));
    probe_ = *probe;
    report_["nccl_version_code"] = probe_.nccl_version;
    report_["nccl_version"] = NcclVersionString(probe_.nccl_version);
    report_["cuda_runtime_version"] = probe_.cuda_runtime;
    report_["cuda_driver_version"] = probe_.cuda_driver;
    const std::string origin = NcclAllReduceOrigin();
    report_["preload"] = {{"active", PreloadActive(origin)}, {"ncclAllReduce_from", origin}};
    const char* ld_preload = std::getenv("LD_PRELOAD");
    report_["ld_preload"] = ld_preload != nullptr ? nlohmann::json(ld_preload) : nullptr;
    if (probe_.skip.has_value()) return Skip(*probe_.skip);

    const int devices = static_cast<int>(probe_.devices.size());
    ranks_ = config_.ranks != -1 ? config_.ranks : (devices >= 2 ? devices : 2);
    straggler_ = config_.straggler == -1 ? ranks_ - 1 : config_.straggler;
    if (straggler_ >= ranks_) {
      std::cerr << kProgram << ": --straggler " << straggler_ << " is not a rank of 0.."
                << ranks_ - 1 << " (or -1 for the last)\n";
      return 2;
    }
    shared_gpu_ = config_.one_gpu || devices < ranks_;
    report_["nranks"] = ranks_;
    report_["device_count"] = devices;
    report_["devices"] = probe_.devices;
    report_["one_gpu_mode"] = shared_gpu_;
    report_["straggler"] = config_.delay_us > 0 ? nlohmann::json(straggler_) : nullptr;
    report_["delay_us"] = config_.delay_us;
    report_["iters"] = config_.iters;
    report_["warmup_iters"] = config_.warmup;
    report_["check"] = config_.check;
    report_["minbytes"] = config_.min_bytes;
    report_["maxbytes"] = config_.max_bytes;
    report_["stepfactor"] = config_.step_factor;
    nlohmann::json environment = nlohmann::json::object();
    for (const std::string& entry : env) {
      if (!absl::StartsWith(entry, "STRAGGLAR_") && !absl::StartsWith(entry, "NCCL_")) continue;
      const size_t equals = entry.find('=');
      environment[entry.substr(0, equals)] = entry.substr(equals + 1);
    }
    report_["environment"] = environment;
    report_["ranks"] = nlohmann::json::array();
    PrintHeader(origin);

    rows_ = RowSpecs(config_);
    collected_.assign(rows_.size(), {});
    for (auto& placements : collected_) {
      for (Collected& collected : placements) {
        collected.time_us.assign(ranks_, 0);
        collected.wrong.assign(ranks_, 0);
        collected.call_us.assign(ranks_, {});
      }
    }
    hello_.assign(ranks_, "");
    for (int rank = 0; rank < ranks_; ++rank) {
      std::vector<std::string> rank_env = env;
      if (shared_gpu_) {
        for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
                 {"NCCL_HOSTID", absl::StrCat("stragglar-bench-", rank)},
                 {"NCCL_NET", "Socket"},
                 {"NCCL_SOCKET_IFNAME", "lo"},
                 {"NCCL_P2P_DISABLE", "1"},
                 {"NCCL_SHM_DISABLE", "1"}}) {
          if (std::getenv(name.c_str()) == nullptr) rank_env.push_back(name + "=" + value);
        }
      }
      const int device = config_.one_gpu ? 0 : rank % devices;
      absl::StatusOr<Child> child = Spawn(
          ChildArgs({absl::StrCat("--ranks=", ranks_), absl::StrCat("--straggler=", straggler_),
                     absl::StrCat("--internal_rank=", rank),
                     absl::StrCat("--internal_device=", device)}),
          rank_env, rank);
      if (!child.ok()) {
        KillAll(children_);
        return Fail(std::string(child.status().message()));
      }
      children_.push_back(*child);
    }
    return Supervise();
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

  void PrintHeader(const std::string& origin) {
    const int devices = static_cast<int>(probe_.devices.size());
    std::string mode;
    if (shared_gpu_) {
      mode = absl::StrCat(config_.one_gpu ? "--one_gpu" : "fewer GPUs than ranks",
                          ": one process and NCCL_HOSTID per rank, NCCL sockets over lo");
    } else {
      mode = "one GPU per rank";
    }
    std::cout << absl::StrFormat(
        "# %s: nccl-tests-style AllReduce, one process per rank\n"
        "# nranks %d, devices %d (%s)\n"
        "# NCCL %s, CUDA runtime %d, driver %d\n"
        "# preload active: %s (ncclAllReduce from %s)\n",
        kProgram, ranks_, devices, mode, NcclVersionString(probe_.nccl_version),
        probe_.cuda_runtime, probe_.cuda_driver, PreloadActive(origin) ? "yes" : "no", origin);
    std::string env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (absl::StartsWith(*entry, "STRAGGLAR_") || absl::StartsWith(*entry, "NCCL_")) {
        absl::StrAppend(&env, env.empty() ? "" : " ", *entry);
      }
    }
    std::cout << "# environment: " << (env.empty() ? "-" : env) << "\n";
    std::cout << absl::StrFormat(
        "# minBytes %d maxBytes %d step: %d(factor) warmup iters: %d iters: %d validation: %d\n",
        config_.min_bytes, config_.max_bytes, config_.step_factor, config_.warmup, config_.iters,
        config_.check ? 1 : 0);
    if (config_.delay_us > 0) {
      std::cout << absl::StrFormat(
          "# straggler: rank %d spins %g us on its stream before every AllReduce; \"after\" is the "
          "time after its arrival\n",
          straggler_, config_.delay_us);
    }
    std::cout << "#\n# Using devices" << std::endl;
  }

  void PrintTableHeader() {
    for (int rank = 0; rank < ranks_; ++rank) std::cout << hello_[rank] << "\n";
    const bool after = config_.delay_us > 0;
    std::string line1 = absl::StrFormat("#\n#%51s  %-34s  %-34s", "", "out-of-place", "in-place");
    std::string line2 =
        absl::StrFormat("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    std::string line3 =
        absl::StrFormat("#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    for (int placement = 0; placement < 2; ++placement) {
      absl::StrAppendFormat(&line2, "  %8s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
      absl::StrAppendFormat(&line3, "  %8s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
    }
    if (after) {
      absl::StrAppend(&line1, "  after (us)");
      absl::StrAppendFormat(&line2, "  %9s  %9s", "oop", "ip");
    }
    for (std::string* line : {&line1, &line3}) {
      line->erase(line->find_last_not_of(' ') + 1);
    }
    std::cout << line1 << "\n" << line2 << "\n" << line3 << std::endl;
  }

  void PrintRow(size_t index) {
    const RowSpec& row = rows_[index];
    std::string line = absl::StrFormat("%12d  %12d  %8s  %6s  %6d", row.bytes, row.count,
                                       TypeName(row.type), ReduceOpName(row.op), -1);
    nlohmann::json json = {{"size", row.bytes},
                           {"count", row.count},
                           {"type", TypeName(row.type)},
                           {"op", ReduceOpName(row.op)}};
    std::string after;
    for (int placement = 0; placement < 2; ++placement) {
      const Collected& collected = collected_[index][placement];
      const PlacementSummary summary = Summarize(collected, row.bytes, ranks_);
      absl::StrAppendFormat(&line, "  %8.2f  %6.2f  %6.2f  %6s", summary.time_us, summary.algbw,
                            summary.busbw,
                            config_.check ? absl::StrCat(summary.wrong) : std::string("N/A"));
      nlohmann::json entry = {{"time_us", summary.time_us},
                              {"algbw", summary.algbw},
                              {"busbw", summary.busbw},
                              {"wrong", config_.check ? nlohmann::json(summary.wrong) : nullptr},
                              {"rank_time_us", collected.time_us}};
      if (summary.after_us.has_value()) {
        entry["after_arrival_us"] = *summary.after_us;
        absl::StrAppendFormat(&after, "  %9.2f", *summary.after_us);
      }
      json[placement == 0 ? "oop" : "ip"] = entry;
      busbw_total_ += summary.busbw;
      ++busbw_count_;
      wrong_total_ += summary.wrong;
    }
    std::cout << line << after << std::endl;
    report_["rows"].push_back(json);
    (void)WriteJson(config_.json, report_);
  }

  // Handles one line from a rank; false when that rank reported an error.
  bool Handle(Child& child, const std::string& line) {
    const int rank = child.rank;
    if (absl::StartsWith(line, "ID ") && rank == 0) {
      for (Child& other : children_) {
        if (other.rank != 0 && other.ctrl_fd >= 0) SendLine(other.ctrl_fd, line);
      }
    } else if (absl::StartsWith(line, "HELLO ")) {
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
      if (++hellos_ == ranks_) PrintTableHeader();
    } else if (absl::StartsWith(line, "ROW ")) {
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
      while (next_row_ < rows_.size() && collected_[next_row_][0].arrived == ranks_ &&
             collected_[next_row_][1].arrived == ranks_) {
        PrintRow(next_row_++);
      }
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

  int Supervise() {
    const double deadline = Now() + config_.timeout_s;
    double skip_deadline = std::numeric_limits<double>::infinity();
    bool failed = false, timed_out = false;
    while (!failed) {
      std::vector<pollfd> fds;
      std::vector<Child*> polled;
      for (Child& child : children_) {
        if (child.eof) continue;
        fds.push_back({child.result_fd, POLLIN, 0});
        polled.push_back(&child);
      }
      if (fds.empty()) break;
      const double now = Now();
      if (now >= deadline) {
        timed_out = true;
        break;
      }
      // Once a rank has skipped, the others get a little while to do the same (a rank without a
      // device can only skip; the others would wait for it in ncclCommInitRank forever).
      if (now >= skip_deadline) {
        failed = true;
        break;
      }
      const double until = std::min(deadline, skip_deadline);
      poll(fds.data(), fds.size(), static_cast<int>(std::clamp((until - now) * 1e3, 1.0, 1e3)));
      for (size_t i = 0; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        Child& child = *polled[i];
        for (const std::string& line : ReadLines(child)) {
          if (!Handle(child, line)) failed = true;
        }
        if (!child.eof) continue;
        if (child.skip.has_value()) {
          skip_deadline = std::min(skip_deadline, Now() + 10);
        } else if (!child.done) {
          // Gone without finishing: whatever it was, the others cannot complete without it.
          Reap(child, true);
          if (!error_.has_value()) {
            error_ = absl::StrCat("rank ", child.rank, " (pid ", child.pid, ") ",
                                  DescribeExit(child.status), " before finishing");
          }
          failed = true;
        }
      }
    }
    if (failed || timed_out) KillAll(children_);
    for (Child& child : children_) Reap(child, true);

    bool all_skipped = true;
    for (const Child& child : children_) all_skipped = all_skipped && child.skip.has_value();
    if (all_skipped && !children_.empty()) return Skip(*children_[0].skip);
    if (timed_out) {
      std::string running;
      for (const Child& child : children_) {
        if (!child.done) absl::StrAppend(&running, running.empty() ? "" : ", ", child.rank);
      }
      return Fail(absl::StrFormat(
          "timed out after %g s (--timeout_s) with %d of %d rows done; unfinished ranks: %s",
          config_.timeout_s, next_row_, rows_.size(), running));
    }
    if (failed) {
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
    const double avg_busbw = busbw_count_ > 0 ? busbw_total_ / busbw_count_ : 0;
    if (config_.check) {
      std::cout << absl::StrFormat("# Out of bounds values : %d %s\n", wrong_total_,
                                   wrong_total_ == 0 ? "OK" : "FAILED");
    }
    std::cout << absl::StrFormat("# Avg bus bandwidth    : %g\n#", avg_busbw) << std::endl;
    report_["avg_busbw"] = avg_busbw;
    report_["wrong_total"] = config_.check ? nlohmann::json(wrong_total_) : nullptr;
    report_["status"] = wrong_total_ == 0 ? "ok" : "wrong";
    if (absl::Status status = WriteJson(config_.json, report_); !status.ok()) {
      std::cerr << kProgram << ": " << status.message() << "\n";
      return 1;
    }
    if (wrong_total_ > 0) {
      std::cerr << kProgram << ": " << wrong_total_ << " wrong elements (see above)\n";
      return 1;
    }
    return 0;
  }

  const Config& config_;
  const std::vector<std::string> argv_;
  nlohmann::json report_;
  Probe probe_;
  int ranks_ = 0;
  int straggler_ = 0;
  bool shared_gpu_ = false;
  std::vector<RowSpec> rows_;
  std::vector<std::array<Collected, 2>> collected_;
  std::vector<std::string> hello_;
  int hellos_ = 0;
  size_t next_row_ = 0;
  std::vector<Child> children_;
  std::optional<std::string> error_;
  bool error_printed_ = false;
  double busbw_total_ = 0;
  int busbw_count_ = 0;
  int64_t wrong_total_ = 0;
};

int Main(int argc, char** argv) {
  bool help = false;
  if (absl::Status status = ParseArguments(argc, argv, &help); !status.ok()) {
    std::cerr << kProgram << ": " << status.message() << "\n";
    return 2;
  }
  if (help) {
    std::cout << kUsage;
    return 0;
  }
  absl::StatusOr<Config> config = ConfigFromFlags();
  if (!config.ok()) {
    std::cerr << kProgram << ": " << config.status().message() << "\n";
    return 2;
  }
  if (const int fd = absl::GetFlag(FLAGS_internal_probe_fd); fd >= 0) return ProbeMain(fd);
  if (const int rank = absl::GetFlag(FLAGS_internal_rank); rank >= 0) {
    Rank process(*config, rank, absl::GetFlag(FLAGS_internal_device),
                 absl::GetFlag(FLAGS_internal_ctrl_fd), absl::GetFlag(FLAGS_internal_result_fd));
    return process.Main();
  }
  return Parent(*config, std::vector<std::string>(argv, argv + argc)).Main();
}

}  // namespace
}  // namespace stragglar

int main(int argc, char** argv) { return stragglar::Main(argc, argv); }
