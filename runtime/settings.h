// Every STRAGGLAR_* setting of the preload libraries, one row each: its name, whose value a rank
// uses, which library reads it, what it accepts, its default, and how it is read and written.
// The readers (PreloadConfigFromEnv), the list `stragglar doctor` knows (PreloadVariableNames),
// the agreement with rank 0 (AgreedValues) and the settings table of docs/architecture.md all
// come from these rows, so a setting is added in one place. In the manner of NCCL's NCCL_PARAM
// and MSCCL++'s Env: one declaration per setting.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/env_config.h"

namespace stragglar {

// Whose value a rank uses.
enum class SettingScope {
  // Rank 0's, on every rank (runtime/agreed_settings.h): it changes what a rank calls, and ranks
  // that disagree would run different collectives in one call.
  kAgreed,
  // Each rank's own: only the rank that uses it matters (its log level, a file rank 0 writes).
  kPerRank,
};

// Which preload library reads a setting.
enum class SettingReaders { kBoth, kMpi, kNccl };

struct Setting {
  std::string name;  // "STRAGGLAR_MODE"
  SettingScope scope = SettingScope::kAgreed;
  SettingReaders readers = SettingReaders::kBoth;
  // What the invalid-value line lists as accepted, and what it says is used instead: the default,
  // as a person reads it ("256 KiB", "the last rank"). Empty `accepted`: no value is invalid.
  std::string accepted;
  std::string fallback;
  // One line for the docs' table.
  std::string meaning;
  // Read as given (a path, where whitespace may be part of the name), or with the whitespace
  // around it stripped (a stray space in a job script is no error).
  bool verbatim = false;
  // Sets the setting in `config` from `value`; false, leaving `config` as it was, when the value
  // is invalid. nullptr: read elsewhere (the metrics endpoint: MetricsEndpointFromEnv, per local
  // rank).
  bool (*parse)(absl::string_view value, PreloadConfig& config) = nullptr;
  // The setting in `config` as it would be written, which `parse` reads back to the same setting;
  // "" when unset. What rank 0 sends of an agreed setting.
  std::string (*write)(const PreloadConfig& config) = nullptr;
};

// Every setting, in the order the readers take them (an invalid value's line comes in this
// order) and rank 0 sends them (the agreed settings' fingerprint hashes them in this order).
const std::vector<Setting>& Settings();

// The row named `name`; nullptr for none.
const Setting* FindSetting(absl::string_view name);

// The settings table of docs/architecture.md, as Markdown: a header and one row per setting.
std::string SettingsMarkdownTable();

}  // namespace stragglar
