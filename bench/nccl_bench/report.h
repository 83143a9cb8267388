// What the parent prints and writes: nccl-tests' header, table and summary on stdout, and the
// same numbers with the run's metadata as JSON (--json), rewritten after every row.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bench/nccl_bench/config.h"
#include "bench/nccl_bench/device_probe.h"
#include "nlohmann/json.hpp"

namespace stragglar::nccl_bench {

// The shape of the run, settled by the parent after the probe.
struct Layout {
  int ranks = 0;
  int straggler = 0;
  int devices = 0;
  bool shared_gpu = false;  // fewer devices than ranks, or --one_gpu
};

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

// nccl-tests' columns from every rank's numbers; `after_us` from the per-call times, if any.
PlacementSummary Summarize(const Collected& collected, int64_t bytes, int ranks);

// Over the rows printed so far.
struct Totals {
  double busbw = 0;
  int busbw_count = 0;
  int64_t wrong = 0;
};

// "2.21.5" from NCCL's version code.
std::string NcclVersionString(int code);
// Where ncclAllReduce resolves in this process: libnccl's, or an interposer's.
std::string NcclAllReduceOrigin();
bool PreloadActive(const std::string& origin);

// The report before anything ran: the program, its command line, status "starting".
nlohmann::json StartingReport(const std::vector<std::string>& argv);
// Adds the versions and where ncclAllReduce comes from.
void AddProbe(const Probe& probe, const std::string& origin, nlohmann::json& report);
// Adds the run's shape, settings and STRAGGLAR_/NCCL_ environment (`env`: NAME=VALUE entries).
void AddLayout(const Config& config, const Layout& layout, const Probe& probe,
               const std::vector<std::string>& env, nlohmann::json& report);
// Writes `report` to `path` (nothing when empty) through a temporary file, so that a reader
// never sees half a report.
absl::Status WriteJson(const std::string& path, const nlohmann::json& report);

// The lines above the table: versions, ranks and devices, environment, settings.
void PrintHeader(const Config& config, const Layout& layout, const Probe& probe,
                 const std::string& origin);
// Every rank's line (`hello`, by rank) and the column headers.
void PrintTableHeader(const Config& config, const std::vector<std::string>& hello);
// Prints one row (both placements), appends it to report["rows"] and counts it in `totals`.
void PrintRow(const Config& config, const RowSpec& row, const std::array<Collected, 2>& collected,
              int ranks, Totals& totals, nlohmann::json& report);
// The lines below the table, and the report's totals and final status.
void PrintSummary(const Config& config, const Totals& totals, nlohmann::json& report);

}  // namespace stragglar::nccl_bench
