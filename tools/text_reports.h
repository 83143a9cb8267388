// The tables `stragglar replay` and `stragglar scenarios` print from their JSON reports.
#pragma once

#include <ostream>
#include <string>

#include "nlohmann/json.hpp"
#include "policy/simulator.h"
#include "runtime/scenarios.h"

namespace stragglar {

// ReplayTrace's report of the trace at `path`, priced with `link`.
void PrintReplayReport(const nlohmann::json& report, const std::string& path, const LinkModel& link,
                       std::ostream& out);

// ScenarioResultsJson's report of a suite run with `config`.
void PrintScenarioReport(const nlohmann::json& report, const SuiteConfig& config,
                         std::ostream& out);

}  // namespace stragglar
