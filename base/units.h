// Sizes, bandwidths and durations as people write and read them: "16MiB", "1GB", "450GiB/s",
// "3us", "20ms", "1.5s". The exporters' tables and the logs print them; the CLI flags and the
// STRAGGLAR_* settings parse them. Below every layer that talks to people, so in exporters/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stragglar {

// Accepts a non-negative number (decimals allowed) with an optional unit: B, KiB, MiB, GiB, TiB
// (powers of 1024) or KB, MB, GB, TB (powers of 1000); no unit means bytes. The result is rounded
// to whole bytes.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);
// "16 MiB", "1.5 GiB", "100 B": exact when possible, otherwise three significant digits.
std::string FormatBytes(double bytes);

// "<size>/s", e.g. "450GiB/s"; must be positive.
absl::StatusOr<double> ParseBandwidth(absl::string_view text);
std::string FormatBandwidth(double bytes_per_s);

// "3.00 us", "12.3 ms", "1.20 s".
std::string FormatSeconds(double seconds);

// Users write --min-bytes, absl flag names are identifiers (min_bytes): "--min-bytes=1MiB" ->
// "--min_bytes=1MiB". Anything not starting with "--" is returned unchanged.
std::string NormalizeFlagName(absl::string_view arg);

// A benchmark's message sizes, as nccl-tests sweeps them: min_bytes, then times step_factor while
// it stays <= max_bytes (without overflowing). Empty when min_bytes > max_bytes; step_factor must
// be >= 2.
std::vector<int64_t> GeometricSizes(int64_t min_bytes, int64_t max_bytes, int64_t step_factor);

// Flag types for absl::Flag, so `--bytes 16MiB` and `--bandwidth 450GiB/s` parse with a clear
// error.
struct ByteSize {
  int64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error);
std::string AbslUnparseFlag(ByteSize size);

struct Bandwidth {
  double bytes_per_s = 0;
};
bool AbslParseFlag(absl::string_view text, Bandwidth* bandwidth, std::string* error);
std::string AbslUnparseFlag(Bandwidth bandwidth);

// A duration flag with a message that says what is accepted: "20ms", "3us", "1.5s", "0".
struct Seconds {
  double value = 0;
};
absl::StatusOr<double> ParseSeconds(absl::string_view text);
// Positive durations separated by commas, e.g. "10ms" or "10ms, 12ms,9ms"; InvalidArgument naming
// the first that is not one.
absl::StatusOr<std::vector<double>> ParseDurationList(absl::string_view text);
bool AbslParseFlag(absl::string_view text, Seconds* seconds, std::string* error);
std::string AbslUnparseFlag(Seconds seconds);

}  // namespace stragglar
