// Logging for the preload libraries, in the spirit of NCCL_DEBUG: one line per message,
//   <hostname>:<pid> [<rank>] stragglar <LEVEL> <message>
// ("[-]" until the rank is known), written with a single write so the lines of concurrent
// threads and processes sharing stderr do not interleave. Thread-safe. The level comes from
// STRAGGLAR_DEBUG (see runtime/env_config.h); the default is WARN.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace stragglar {

// Ordered: a message is written when its level is <= the current level. kNone silences all
// (except LogAlways).
enum class LogLevel { kNone, kWarn, kInfo, kTrace };

// "NONE", "WARN", "INFO", "TRACE".
absl::string_view LogLevelName(LogLevel level);
// The inverse of LogLevelName, case-insensitive; nullopt for anything else.
std::optional<LogLevel> ParseLogLevel(absl::string_view name);

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// This process's rank for the "[<rank>]" field; -1 (the default): unknown, printed as "[-]".
void SetLogRank(int rank);

// This host's name as every log line starts with it ("unknown-host" when it has none).
const std::string& HostName();
// Where lines go: nullptr (the default) is stderr, written with ::write(2); another stream (for
// tests) is written under a lock. The stream must outlive its use.
void SetLogSink(std::ostream* sink);

// Whether a message of `level` would be written now: lets callers skip building costly messages.
bool LogEnabled(LogLevel level);

// Writes one line when LogEnabled(level). Newlines inside `message` become spaces (a trailing one
// is dropped) so every call stays one line. errno is preserved: callers are often interposed
// library calls whose errno the application reads.
void Log(LogLevel level, absl::string_view message);
// Like Log, whatever the current level, even NONE: for configuration errors, which the user must
// see ("one clear log line").
void LogAlways(LogLevel level, absl::string_view message);
// Like Log, but only the first time a given `key` is written in this process (e.g. "CUPTI
// unavailable" once, not once per call). A call filtered out by the level does not use up the key.
void LogOnce(LogLevel level, absl::string_view key, absl::string_view message);

}  // namespace stragglar
