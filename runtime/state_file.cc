#include "runtime/state_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "nlohmann/json.hpp"

namespace stragglar {
namespace {

// 2 added the calibration's "<algorithm>/phase-hidden" entries; version 1 files read as they
// are (every entry then is kPhaseExposed).
constexpr int kFormatVersion = 2;
constexpr int kOldestReadableVersion = 1;

absl::Status Corrupt(const std::string& path, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("state file ", path, " is corrupt: ", why));
}

}  // namespace

std::string MachineId(absl::string_view backend) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown-host");
  return absl::StrCat(host, "/", backend);
}

absl::StatusOr<std::string> ReadStateText(const std::string& path) {
  // Opening a FIFO waits for a writer, and reading a device may never end: the job would hang at
  // its first call. Only a regular file is read.
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("state file ", path,
                                                      " is not a regular file (",
                                                      S_ISDIR(info.st_mode)    ? "a directory"
                                                      : S_ISFIFO(info.st_mode) ? "a FIFO"
                                                                               : "a device",
                                                      ")"));
  }
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat("state file ", path, " cannot be read: ", std::strerror(errno)));
  }
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

absl::StatusOr<LearnedState> LoadState(const std::string& path, int num_ranks,
                                       absl::string_view machine) {
  absl::StatusOr<std::string> text = ReadStateText(path);
  if (!text.ok()) return text.status();
  return ParseState(*text, path, num_ranks, machine);
}

absl::StatusOr<LearnedState> ParseState(absl::string_view text, const std::string& path,
                                        int num_ranks, absl::string_view machine) {
  // No exceptions: a parse error is a discarded value, checked below.
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Corrupt(path, "not valid JSON");
  if (!json.is_object()) return Corrupt(path, "not a JSON object");
  auto integer = [&](const char* key) -> std::optional<int64_t> {
    if (!json.contains(key) || !json[key].is_number_integer()) return std::nullopt;
    return json[key].get<int64_t>();
  };
  const std::optional<int64_t> version = integer("version");
  if (!version.has_value()) return Corrupt(path, "no \"version\"");
  if (*version < kOldestReadableVersion || *version > kFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("state file ", path, " has format version ", *version, ", this build reads ",
                     kOldestReadableVersion, " to ", kFormatVersion));
  }
  const std::optional<int64_t> ranks = integer("ranks");
  if (!ranks.has_value()) return Corrupt(path, "no \"ranks\"");
  if (!json.contains("machine") || !json["machine"].is_string()) {
    return Corrupt(path, "no \"machine\"");
  }
  if (*ranks != num_ranks) {
    return absl::FailedPreconditionError(absl::StrCat("state file ", path, " is for world size ",
                                                      *ranks, ", this job has ", num_ranks));
  }
  if (json["machine"].get<std::string>() != machine) {
    return absl::FailedPreconditionError(absl::StrCat("state file ", path, " was learned on ",
                                                      json["machine"].get<std::string>(),
                                                      ", this is ", machine));
  }
  LearnedState state{.num_ranks = num_ranks, .machine = std::string(machine)};
  if (!json.contains("predicted_lag_s") || !json["predicted_lag_s"].is_array() ||
      json["predicted_lag_s"].size() != static_cast<size_t>(num_ranks)) {
    return Corrupt(path, absl::StrCat("\"predicted_lag_s\" must list ", num_ranks, " lags"));
  }
  for (const nlohmann::json& lag : json["predicted_lag_s"]) {
    if (!lag.is_number() || !std::isfinite(lag.get<double>()) || lag.get<double>() < 0) {
      return Corrupt(path, "a predicted lag is not a non-negative number");
    }
    state.predicted_lag_s.push_back(lag.get<double>());
  }
  if (json.contains("straggler") && !json["straggler"].is_null()) {
    if (!json["straggler"].is_number_integer() || json["straggler"].get<int64_t>() < 0 ||
        json["straggler"].get<int64_t>() >= num_ranks) {
      return Corrupt(path, "\"straggler\" is not a rank of this job");
    }
    state.straggler = json["straggler"].get<int>();
  }
  if (!json.contains("calibration")) return Corrupt(path, "no \"calibration\"");
  if (absl::Status status = state.calibration.FromJson(json["calibration"]); !status.ok()) {
    return Corrupt(path, status.message());
  }
  return state;
}

absl::Status SaveState(const std::string& path, const LearnedState& state) {
  const nlohmann::json json = {
      {"version", kFormatVersion},
      {"ranks", state.num_ranks},
      {"machine", state.machine},
      {"predicted_lag_s", state.predicted_lag_s},
      {"straggler",
       state.straggler.has_value() ? nlohmann::json(*state.straggler) : nlohmann::json(nullptr)},
      {"calibration", state.calibration.ToJson()},
  };
  // Replace bytes that are not UTF-8 (a strange hostname) instead of throwing.
  const std::string text =
      json.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return WriteFileAtomically(path, text, "state file");
}

}  // namespace stragglar
