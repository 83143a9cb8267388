#include "base/units.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace stragglar {
namespace {

constexpr std::array<std::pair<absl::string_view, double>, 9> kByteUnits = {{
    {"TiB", 1024.0 * 1024 * 1024 * 1024},
    {"GiB", 1024.0 * 1024 * 1024},
    {"MiB", 1024.0 * 1024},
    {"KiB", 1024.0},
    {"TB", 1e12},
    {"GB", 1e9},
    {"MB", 1e6},
    {"KB", 1e3},
    {"B", 1.0},
}};

absl::StatusOr<double> ParseScaledBytes(absl::string_view text) {
  const absl::string_view original = text;
  text = absl::StripAsciiWhitespace(text);
  double scale = 1.0;
  for (const auto& [unit, unit_scale] : kByteUnits) {
    if (absl::EndsWith(text, unit)) {
      text.remove_suffix(unit.size());
      scale = unit_scale;
      break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(text), &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed size \"", original,
                     "\"; expected a number with an optional unit B, KiB, MiB, GiB, TiB, KB, MB, "
                     "GB or TB (e.g. 16MiB)"));
  }
  if (value < 0) {
    return absl::InvalidArgumentError(absl::StrCat("size \"", original, "\" is negative"));
  }
  return value * scale;
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  absl::StatusOr<double> bytes = ParseScaledBytes(text);
  if (!bytes.ok()) return bytes.status();
  if (*bytes >= 9.2e18) {
    return absl::InvalidArgumentError(absl::StrCat("size \"", text, "\" is too large"));
  }
  return static_cast<int64_t>(std::llround(*bytes));
}

std::string FormatBytes(double bytes) {
  for (const auto& [unit, scale] : kByteUnits) {
    if (unit.size() == 2) continue;  // decimal units parse, binary ones print
    if (bytes >= scale || unit == "B") {
      const double value = bytes / scale;
      if (value == std::floor(value)) return absl::StrFormat("%.0f %s", value, unit);
      return absl::StrFormat("%.3g %s", value, unit);
    }
  }
  return absl::StrCat(bytes, " B");
}

absl::StatusOr<double> ParseBandwidth(absl::string_view text) {
  absl::string_view stripped = absl::StripAsciiWhitespace(text);
  if (!absl::ConsumeSuffix(&stripped, "/s")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed bandwidth \"", text, "\"; expected a size per second, e.g. 450GiB/s"));
  }
  absl::StatusOr<double> bytes = ParseScaledBytes(stripped);
  if (!bytes.ok()) return bytes.status();
  if (*bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("bandwidth \"", text, "\" must be positive"));
  }
  return *bytes;
}

std::string FormatBandwidth(double bytes_per_s) { return FormatBytes(bytes_per_s) + "/s"; }

std::string FormatSeconds(double seconds) {
  if (std::isinf(seconds)) return "never";
  const double magnitude = std::abs(seconds);
  if (magnitude == 0) return "0 s";
  if (magnitude < 1e-6) return absl::StrFormat("%.3g ns", seconds * 1e9);
  if (magnitude < 1e-3) return absl::StrFormat("%.3g us", seconds * 1e6);
  if (magnitude < 1) return absl::StrFormat("%.3g ms", seconds * 1e3);
  return absl::StrFormat("%.3g s", seconds);
}

namespace {

// absl's flag-parsing convention on top of a StatusOr parser.
template <typename Value>
bool StoreParsed(absl::StatusOr<Value> parsed, Value& out, std::string* error) {
  if (!parsed.ok()) {
    *error = std::string(parsed.status().message());
    return false;
  }
  out = *parsed;
  return true;
}

}  // namespace

bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error) {
  return StoreParsed(ParseByteSize(text), size->bytes, error);
}

std::string AbslUnparseFlag(ByteSize size) { return absl::StrCat(size.bytes, "B"); }

bool AbslParseFlag(absl::string_view text, Bandwidth* bandwidth, std::string* error) {
  return StoreParsed(ParseBandwidth(text), bandwidth->bytes_per_s, error);
}

std::string AbslUnparseFlag(Bandwidth bandwidth) {
  return absl::StrCat(bandwidth.bytes_per_s, "B/s");
}

absl::StatusOr<double> ParseSeconds(absl::string_view text) {
  absl::Duration duration;
  if (!absl::ParseDuration(absl::StripAsciiWhitespace(text), &duration) ||
      duration == absl::InfiniteDuration() || duration == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed time \"", text,
                     "\"; expected a number with a unit ns, us, ms or s (e.g. 20ms)"));
  }
  return absl::ToDoubleSeconds(duration);
}

absl::StatusOr<std::vector<double>> ParseDurationList(absl::string_view text) {
  std::vector<double> times;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    absl::StatusOr<double> seconds = ParseSeconds(part);
    if (!seconds.ok()) return seconds.status();
    if (*seconds <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("times must be positive, got ", absl::StripAsciiWhitespace(part)));
    }
    times.push_back(*seconds);
  }
  return times;
}

bool AbslParseFlag(absl::string_view text, Seconds* seconds, std::string* error) {
  return StoreParsed(ParseSeconds(text), seconds->value, error);
}

std::string AbslUnparseFlag(Seconds seconds) {
  return absl::FormatDuration(absl::Seconds(seconds.value));
}

std::string NormalizeFlagName(absl::string_view arg) {
  std::string normalized(arg);
  if (!absl::StartsWith(arg, "--")) return normalized;
  const size_t name_end = std::min(normalized.find('='), normalized.size());
  for (size_t i = 2; i < name_end; ++i) {
    if (normalized[i] == '-') normalized[i] = '_';
  }
  return normalized;
}

std::vector<int64_t> GeometricSizes(int64_t min_bytes, int64_t max_bytes, int64_t step_factor) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = min_bytes; bytes <= max_bytes;) {
    sizes.push_back(bytes);
    if (bytes > max_bytes / step_factor) break;
    bytes *= step_factor;
  }
  return sizes;
}

}  // namespace stragglar
