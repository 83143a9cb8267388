#include "runtime/agreed_settings.h"

#include <map>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "runtime/settings.h"

namespace stragglar {
std::vector<std::pair<absl::string_view, std::string>> AgreedValues(const PreloadConfig& config) {
  std::vector<std::pair<absl::string_view, std::string>> values;
  for (const Setting& setting : Settings()) {
    if (setting.scope == SettingScope::kAgreed)
      values.emplace_back(setting.name, setting.write(config));
  }
  return values;
}

std::vector<absl::string_view> AgreedVariableNames() {
  std::vector<absl::string_view> names;
  for (const auto& [name, value] : AgreedValues(PreloadConfig())) names.push_back(name);
  return names;
}

absl::Span<const absl::string_view> PerRankVariableNames() {
  static const std::vector<absl::string_view>* const names = [] {
    auto* names = new std::vector<absl::string_view>();
    for (const Setting& setting : Settings()) {
      if (setting.scope == SettingScope::kPerRank) names->push_back(setting.name);
    }
    return names;
  }();
  return *names;
}

std::string AgreedSettingsText(const PreloadConfig& config) {
  std::string text;
  for (const auto& [name, value] : AgreedValues(config)) {
    absl::StrAppend(&text, name, "=", absl::CEscape(value), "\n");
  }
  return text;
}

std::string AgreedSettingsFingerprint(const PreloadConfig& config) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits: the same everywhere
  for (unsigned char byte : AgreedSettingsText(config)) {
    hash = (hash ^ byte) * 0x100000001b3ULL;
  }
  return absl::StrFormat("%016x", hash);
}

absl::StatusOr<PreloadConfig> AgreeWithRankZero(
    const PreloadConfig& mine, int rank, absl::FunctionRef<absl::Status(std::string&)> broadcast) {
  const std::vector<std::pair<absl::string_view, std::string>> my_values = AgreedValues(mine);
  std::string text = AgreedSettingsText(mine);
  if (absl::Status status = broadcast(text); !status.ok()) return status;

  std::map<std::string, std::string> rank_zero;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(line, '=');
    std::string value;
    if (!absl::CUnescape(parts.second, &value)) {
      return absl::InternalError(absl::StrCat("rank 0's settings are unreadable: ", line));
    }
    rank_zero[std::string(parts.first)] = std::move(value);
  }
  for (const auto& [name, value] : my_values) {
    auto theirs = rank_zero.find(std::string(name));
    if (theirs == rank_zero.end()) {
      return absl::InternalError(absl::StrCat("rank 0 sent no ", name, " (another version?)"));
    }
    if (theirs->second == value) continue;
    // Escaped, so that a path with a line break keeps the warning on one line.
    const auto shown = [](const std::string& text) {
      return text.empty() ? std::string("unset") : absl::CEscape(text);
    };
    LogOnce(LogLevel::kWarn, absl::StrCat("differs-", name),
            absl::StrCat(name, " differs across ranks: rank ", rank, " has ", shown(value),
                         ", rank 0 ", shown(theirs->second), "; every rank uses rank 0's"));
  }
  // Rank 0 wrote each value as the variable reads; one that fails here is a bug, said as one.
  std::ostringstream invalid;
  PreloadConfig agreed = PreloadConfigFromValues(rank_zero, &invalid);
  if (!invalid.str().empty()) {
    return absl::InternalError(absl::StrCat("rank 0's settings do not parse: ", invalid.str()));
  }
  agreed.debug = mine.debug;
  agreed.prefer_cupti = mine.prefer_cupti;
  agreed.trace_file = mine.trace_file;
  agreed.summary_file = mine.summary_file;
  agreed.link_host = mine.link_host;
  agreed.pipeline_advice_file = mine.pipeline_advice_file;
  agreed.device_stamps = mine.device_stamps;
  return agreed;
}

}  // namespace stragglar
