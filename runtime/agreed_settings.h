// The settings that change what a rank calls, agreed with rank 0. Ranks with different ones
// would run different collectives in the same call (STRAGGLAR_MODE=off on one rank: the
// library's own AllReduce there, a plan elsewhere), switch in different calls
// (STRAGGLAR_EPOCH_CALLS), or cut messages differently (STRAGGLAR_MPI_SEGMENT): a hang, or a
// crash. So at a communicator's setup every rank takes rank 0's values in one exchange, and a
// rank whose own differ says so, one line per variable. Both preload libraries use this: the MPI
// library once at MPI_Init (every communicator's rank 0 has world rank 0's values then), the NCCL
// library at each communicator's creation.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/env_config.h"

namespace stragglar {

// The STRAGGLAR_* variables every rank takes from rank 0, with their values in `config` as the
// variable would be written (parsed back by PreloadConfigFromValues to the same settings); ""
// for unset.
std::vector<std::pair<absl::string_view, std::string>> AgreedValues(const PreloadConfig& config);

// AgreedValues as rank 0 sends them: one `NAME=value` line each, the value C-escaped.
std::string AgreedSettingsText(const PreloadConfig& config);
// A short digest of AgreedSettingsText (64-bit FNV-1a, 16 hex digits), the same on every machine
// for the same settings: `stragglar doctor` prints it, so that the hosts of a job can be compared
// before it runs (a host whose digest differs from rank 0's will take rank 0's values). Values
// a library resolves at its start are hashed as written: STRAGGLAR_MPI_NETWORK_MESSAGE=auto is
// "auto" here, while the MPI library agrees on the size it read from its MPI, so hosts with
// different MPI libraries can match here and still see that variable replaced.
std::string AgreedSettingsFingerprint(const PreloadConfig& config);

// The names of AgreedValues, and the rest of PreloadVariableNames(): each rank's own, since only
// the rank that uses them matters (STRAGGLAR_DEBUG, STRAGGLAR_PROFILER, the metrics endpoint,
// the trace, summary and advice files, which rank 0 writes, and STRAGGLAR_LINK_ADDR, which rank 0
// advertises).
std::vector<absl::string_view> AgreedVariableNames();
absl::Span<const absl::string_view> PerRankVariableNames();

// `mine` with every agreed setting replaced by rank 0's. `broadcast` replaces its argument with
// rank 0's text on every rank (collective: every rank of the communicator calls this at the same
// point). A variable whose value here differs from rank 0's gets one warning per process, e.g.
//   STRAGGLAR_MODE differs across ranks: rank 2 has off, rank 0 adapt; every rank uses rank 0's
// An error when the exchange fails or rank 0's text cannot be read.
absl::StatusOr<PreloadConfig> AgreeWithRankZero(
    const PreloadConfig& mine, int rank, absl::FunctionRef<absl::Status(std::string&)> broadcast);

}  // namespace stragglar
