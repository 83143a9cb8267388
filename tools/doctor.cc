#include "tools/doctor.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/agreed_settings.h"
#include "runtime/env_config.h"
#include "runtime/version.h"
#include "tools/system_probes.h"

extern char** environ;

namespace stragglar {
namespace {

// Set by the build: where the preloads are installed, relative to the prefix (e.g.
// "lib/stragglar"), and where the build tree puts them ("lib").
#ifndef STRAGGLAR_INSTALL_PRELOAD_DIR
#error "STRAGGLAR_INSTALL_PRELOAD_DIR must be defined by the build (tools/CMakeLists.txt)"
#endif

enum class Verdict { kOk, kWarn, kFail };

class Report {
 public:
  explicit Report(std::ostream& out) : out_(out) {}

  void Line(Verdict verdict, absl::string_view text) {
    static constexpr absl::string_view kTags[] = {"[ok]   ", "[warn] ", "[fail] "};
    out_ << kTags[static_cast<int>(verdict)] << text << '\n';
    if (verdict == Verdict::kFail) failed_ = true;
  }
  bool failed() const { return failed_; }

 private:
  std::ostream& out_;
  bool failed_ = false;
};

std::string SelfBinDir() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "." : self.parent_path().string();
}

// The preload `name` next to `bin_dir`: installed (prefix/lib/stragglar) or in a build tree
// (build/lib). Empty when neither exists.
std::string FindPreload(const std::string& bin_dir, absl::string_view name) {
  const std::filesystem::path prefix = std::filesystem::path(bin_dir).parent_path();
  const std::filesystem::path file(std::string{name});
  for (const std::filesystem::path& candidate :
       {prefix / STRAGGLAR_INSTALL_PRELOAD_DIR / file, prefix / "lib" / file}) {
    std::error_code error;
    if (std::filesystem::exists(candidate, error)) return candidate.lexically_normal().string();
  }
  return "";
}

// One preload: installed, and loadable with everything it links. Returns whether it loads.
bool CheckPreload(Report& report, const std::string& bin_dir, absl::string_view label,
                  absl::string_view file, bool asked) {
  const std::string path = FindPreload(bin_dir, file);
  const Verdict missing = asked ? Verdict::kFail : Verdict::kWarn;
  if (path.empty()) {
    report.Line(missing,
                absl::StrCat("preload ", label, ": ", file, " is not installed next to ", bin_dir));
    return false;
  }
  const LibraryFound loaded = ProbePreload(path);
  if (!loaded.found) {
    report.Line(missing,
                absl::StrCat("preload ", label, ": ", path, " cannot load: ", loaded.error));
    return false;
  }
  report.Line(Verdict::kOk, absl::StrCat("preload ", label, ": ", path, " loads"));
  return true;
}

// What the NCCL preload runs over. Returns whether a GPU is there to run on.
bool CheckGpuStack(Report& report, bool asked) {
  const Verdict missing = asked ? Verdict::kFail : Verdict::kWarn;
  const CudaDriverFound driver = ProbeCudaDriver();
  if (!driver.found) {
    report.Line(missing, absl::StrCat("cuda: no driver (", driver.error, ")"));
  } else if (driver.devices.empty()) {
    report.Line(missing,
                absl::StrCat("cuda: driver ", driver.version, ", no device (", driver.error, ")"));
  } else {
    report.Line(Verdict::kOk,
                absl::StrCat("cuda: driver ", driver.version, ", ", driver.devices.size(),
                             " device(s): ", absl::StrJoin(driver.devices, ", ")));
  }
  const LibraryFound nccl = ProbeNccl();
  if (nccl.found) {
    // The preload resolves newer entry points (ncclCommShrink, ncclCommRevoke) when present, but
    // it is built and tested against 2.28.
    std::vector<int> parts;
    for (absl::string_view part : absl::StrSplit(nccl.version, '.')) {
      int number = 0;
      parts.push_back(absl::SimpleAtoi(part, &number) ? number : 0);
    }
    const bool old = parts.size() >= 2 && (parts[0] < 2 || (parts[0] == 2 && parts[1] < 28));
    report.Line(old ? Verdict::kWarn : Verdict::kOk,
                absl::StrCat("nccl: NCCL ", nccl.version, " (", nccl.path, ")",
                             old ? "; older than 2.28, which stragglar is tested against" : ""));
  } else {
    // Not a failure: jobs often bring their own NCCL (PyTorch's wheel), which the preload finds.
    report.Line(Verdict::kWarn,
                absl::StrCat("nccl: libnccl.so.2 is not on the loader's path (", nccl.error,
                             "); fine for jobs that bring their own, e.g. PyTorch's"));
  }
  const LibraryFound cupti = ProbeCupti();
  if (cupti.found) {
    report.Line(Verdict::kOk, absl::StrCat("cupti: ", cupti.path));
  } else {
    report.Line(Verdict::kWarn, absl::StrCat("cupti: not found (", cupti.error,
                                             "); calls are timed with CUDA events instead"));
  }
  return driver.found && !driver.devices.empty();
}

bool CheckMpi(Report& report, bool asked) {
  const LibraryFound mpi = ProbeMpi();
  if (mpi.found) {
    report.Line(Verdict::kOk, absl::StrCat("mpi: ", mpi.version, " (", mpi.path, ")"));
  } else {
    report.Line(asked ? Verdict::kFail : Verdict::kWarn,
                absl::StrCat("mpi: libmpi.so.40 not found (", mpi.error, ")"));
  }
  return mpi.found;
}

// The settings as the preloads would read them: each bad value named, unknown STRAGGLAR_*
// variables named as likely typos, and the metrics ports checked. Returns the settings read.
PreloadConfig CheckSettings(Report& report, int local_ranks) {
  std::ostringstream invalid;
  const PreloadConfig config = PreloadConfigFromEnv(nullptr, &invalid);
  std::ostringstream metrics_log;
  const std::optional<MetricsEndpoint> endpoint = MetricsEndpointFromEnv(0, metrics_log);
  bool valid = true;
  for (absl::string_view line :
       absl::StrSplit(invalid.str() + metrics_log.str(), '\n', absl::SkipEmpty())) {
    report.Line(Verdict::kFail, absl::StrCat("setting ", line));
    valid = false;
  }
  const absl::flat_hash_set<absl::string_view> known(PreloadVariableNames().begin(),
                                                     PreloadVariableNames().end());
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const absl::string_view name =
        absl::string_view(*entry).substr(0, absl::string_view(*entry).find('='));
    if (absl::StartsWith(name, "STRAGGLAR_") && !known.contains(name)) {
      report.Line(Verdict::kWarn,
                  absl::StrCat("setting ", name, " is not a stragglar setting (a typo?)"));
    }
  }
  report.Line(valid ? Verdict::kOk : Verdict::kWarn,
              absl::StrCat("settings: ", DescribeConfig(config)));
  // The doctor sees one host: what it can give for the others is a digest to compare.
  report.Line(Verdict::kOk,
              absl::StrCat("agreed settings: fingerprint ", AgreedSettingsFingerprint(config),
                           " (compare it across the job's hosts: where it differs from rank 0's, "
                           "rank 0's values replace that host's, with a warning per variable)"));
  if (!endpoint.has_value()) {
    // Set but invalid: its [fail] line above says so, and that it serves no metrics.
    const char* port = std::getenv("STRAGGLAR_METRICS_PORT");
    if (port == nullptr || *port == '\0') {
      report.Line(Verdict::kOk, "metrics: STRAGGLAR_METRICS_PORT unset, no metrics endpoint");
    }
    return config;
  }
  if (endpoint->port == 0) {
    report.Line(Verdict::kOk, absl::StrCat("metrics: any free port on ", endpoint->address));
    return config;
  }
  const int last = endpoint->port + local_ranks - 1;
  const PortsInUse in_use = ProbePorts(endpoint->address, endpoint->port, local_ranks);
  const std::string range = absl::StrCat(endpoint->address, ":", endpoint->port, "-", last);
  if (!in_use.error.empty()) {
    report.Line(Verdict::kWarn, absl::StrCat("metrics: ", in_use.error));
  } else if (in_use.ports.empty()) {
    report.Line(Verdict::kOk, absl::StrCat("metrics: ports ", range, " are free (", local_ranks,
                                           " local ranks)"));
  } else {
    // The job still runs (a rank that cannot bind goes on without metrics), so not a failure.
    std::vector<std::string> busy;
    for (const auto& [port, why] : in_use.ports) busy.push_back(absl::StrCat(port, " (", why, ")"));
    report.Line(Verdict::kWarn,
                absl::StrCat("metrics: in ", range, " these ports cannot be bound: ",
                             absl::StrJoin(busy, ", "), "; those ranks would run without metrics"));
  }
  return config;
}

// Where the preloads write: each path set must be a regular file or not exist yet, in a
// directory this process can write (files are replaced through a temporary file there). A path
// that is not loses the run's output (and a FIFO as the state file would hang the job's start).
void CheckOutputPaths(Report& report, const PreloadConfig& config) {
  namespace fs = std::filesystem;
  for (const auto& [variable, path] :
       {std::pair<absl::string_view, const std::string&>{"STRAGGLAR_STATE_FILE", config.state_file},
        {"STRAGGLAR_TRACE_FILE", config.trace_file},
        {"STRAGGLAR_SUMMARY_FILE", config.summary_file},
        {"STRAGGLAR_PIPELINE_ADVICE_FILE", config.pipeline_advice_file}}) {
    if (path.empty()) continue;
    const std::string named = absl::StrCat("output: ", variable, "=", path);
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    fs::path directory = fs::path(path).parent_path();
    if (directory.empty()) directory = ".";
    if (fs::exists(status) && !fs::is_regular_file(status)) {
      report.Line(Verdict::kFail, absl::StrCat(named, " is not a regular file"));
    } else if (!fs::is_directory(directory, error)) {
      report.Line(Verdict::kFail,
                  absl::StrCat(named, ": its directory ", directory.string(), " does not exist"));
    } else if (access(directory.c_str(), W_OK | X_OK) != 0 ||
               (fs::exists(status) && access(path.c_str(), W_OK) != 0)) {
      report.Line(Verdict::kFail, absl::StrCat(named, " is not writable: ", std::strerror(errno)));
    } else {
      report.Line(Verdict::kOk, absl::StrCat(named, " is writable"));
    }
  }
}

}  // namespace

absl::StatusOr<int> RunDoctor(const DoctorOptions& options, std::ostream& out) {
  if (options.preload != "nccl" && options.preload != "mpi" && options.preload != "any") {
    return absl::InvalidArgumentError(
        absl::StrCat("--preload must be nccl, mpi or any, got \"", options.preload, "\""));
  }
  if (options.local_ranks < 1 || options.local_ranks > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--local-ranks must be in [1, 1024], got ", options.local_ranks));
  }
  const std::string bin_dir = options.bin_dir.empty() ? SelfBinDir() : options.bin_dir;
  out << "stragglar " << StragglarVersion() << " doctor (" << bin_dir << ")\n";
  Report report(out);
  const bool want_nccl = options.preload == "nccl";
  const bool want_mpi = options.preload == "mpi";
  const bool nccl_preload = CheckPreload(report, bin_dir, "nccl", "libstragglar.so", want_nccl);
  const bool mpi_preload = CheckPreload(report, bin_dir, "mpi", "libstragglar_mpi.so", want_mpi);
  const bool gpu = CheckGpuStack(report, want_nccl);
  const bool mpi = CheckMpi(report, want_mpi);
  CheckOutputPaths(report, CheckSettings(report, options.local_ranks));

  const bool nccl_works = nccl_preload && gpu;
  const bool mpi_works = mpi_preload && mpi;
  const auto state = [](bool works) { return works ? "can work here" : "cannot work here"; };
  const std::string summary =
      absl::StrCat("the NCCL preload ", state(nccl_works), "; the MPI preload ", state(mpi_works));
  const bool asked_works = want_nccl ? nccl_works : want_mpi ? mpi_works : nccl_works || mpi_works;
  report.Line(asked_works ? Verdict::kOk : Verdict::kFail, absl::StrCat("verdict: ", summary));
  return report.failed() ? 1 : 0;
}

}  // namespace stragglar
