// The tables `stragglar plan`, `stragglar replay` and `stragglar scenarios` print.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "absl/strings/string_view.h"
#include "kernels/plan/plan.h"
#include "nlohmann/json.hpp"
#include "policy/model/simulator.h"
#include "runtime/replay/scenarios.h"

namespace stragglar {

// What the header says about a StragglAR plan of one of the scale families.
struct PlanTableNote {
  std::string family;  // e.g. "hierarchical on 4x8"; empty: the flat plan
  // The family's lower bound on post-arrival rounds, if it has one (the flat plan's is known).
  std::optional<int> post_arrival_bound;
};
// A plan round by round (`a->b +cK` adds chunk K of rank a into rank b, `a->b cK` copies it).
void PrintPlanTable(const Plan& plan, std::ostream& out, const PlanTableNote& note = {});

// ReplayTrace's report of the trace at `path`, priced with `link`.
void PrintReplayReport(const nlohmann::json& report, const std::string& path, const LinkModel& link,
                       std::ostream& out);

// ScenarioResultsJson's report of a suite run with `config`.
void PrintScenarioReport(const nlohmann::json& report, const SuiteConfig& config,
                         std::ostream& out);

}  // namespace stragglar
