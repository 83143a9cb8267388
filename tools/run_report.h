// What `stragglar run` reports once both phases ran: the summary JSON (the contract's shape) and
// the table it prints.
#pragma once

#include <ostream>

#include "exporters/run_summary.h"
#include "nlohmann/json.hpp"
#include "policy/model/simulator.h"
#include "tools/run_job.h"
#include "tools/run_phases.h"

namespace stragglar {

// The summary: the contract's {"ranks", "injected_straggler", "detected_straggler", "iterations",
// "bytes", "correct", "algorithm_counts", "adaptive", "baseline", "speedup"} and the rest that
// `stragglar run --summary-json` has always written.
nlohmann::json RunSummaryJson(const RunOptions& options, const LinkModel& link,
                              const Phase& baseline, const Phase& adaptive, const LagSummary& lags);

// The adaptive phase's lag summary and the latency table, then the one-line verdict.
void PrintRunSummary(const RunOptions& options, const Phase& baseline, const Phase& adaptive,
                     const LagSummary& lags, const nlohmann::json& summary, std::ostream& progress);

}  // namespace stragglar
