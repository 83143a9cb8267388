// The tables `stragglar plan`, `stragglar replay` and `stragglar scenarios` print.
#pragma once

#include <ostream>
#include <string>

#include "absl/strings/string_view.h"
#include "kernels/plan.h"
#include "nlohmann/json.hpp"
#include "policy/simulator.h"
#include "runtime/scenarios.h"

namespace stragglar {

// A plan round by round (`a->b +cK` adds chunk K of rank a into rank b, `a->b cK` copies it).
// `topology` ("4x8"): a hierarchical StragglAR plan on that machine.
void PrintPlanTable(const Plan& plan, std::ostream& out, absl::string_view topology = "");

// ReplayTrace's report of the trace at `path`, priced with `link`.
void PrintReplayReport(const nlohmann::json& report, const std::string& path, const LinkModel& link,
                       std::ostream& out);

// ScenarioResultsJson's report of a suite run with `config`.
void PrintScenarioReport(const nlohmann::json& report, const SuiteConfig& config,
                         std::ostream& out);

}  // namespace stragglar
