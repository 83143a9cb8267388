// Validates the Grafana dashboard (dashboards/stragglar-dashboard.json) against the exporter's
// metric contract and the recording rules of dashboards/stragglar-rules.yml.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace stragglar {
namespace {

using Json = nlohmann::json;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::IsSupersetOf;
using ::testing::Not;

const std::filesystem::path kDashboardsDir = STRAGGLAR_DASHBOARDS_DIR;

// The exporter's metric families (docs/architecture.md, "Prometheus metrics").
constexpr const char* kScalarMetrics[] = {
    "stragglar_collective_calls_total",
    "stragglar_straggler_rank",
    "stragglar_straggler_persistence_ratio",
    "stragglar_time_saved_seconds_total",
    "stragglar_time_lost_seconds_total",
    "stragglar_policy_switches_total",
    "stragglar_wait_seconds_total",
    "stragglar_slow_link_rank",
    "stragglar_link_bandwidth_bytes_per_second",
    // Pipeline links (pipeline/links/pipeline_metrics.h).
    "stragglar_link_delay_seconds",
    "stragglar_slow_link",
    "stragglar_pipeline_warmup_forwards",
};
constexpr const char* kHistogramMetrics[] = {
    "stragglar_collective_duration_seconds",
    "stragglar_arrival_lag_seconds",
    "stragglar_link_transfer_seconds",
};

// The only variables an expression may use (an integration test substitutes them).
const std::set<std::string> kAllowedVariables = {"comm", "datasource", "__rate_interval"};
constexpr std::string_view kCommFilter = R"(comm=~"$comm")";
constexpr int kGridColumns = 24;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream content;
  content << file.rdbuf();
  return content.str();
}

Json PrometheusDatasource() { return Json{{"type", "prometheus"}, {"uid", "${datasource}"}}; }

std::set<std::string> ContractSeriesNames() {
  std::set<std::string> names(std::begin(kScalarMetrics), std::end(kScalarMetrics));
  for (const char* histogram : kHistogramMetrics) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      names.insert(std::string(histogram) + suffix);
    }
  }
  return names;
}

std::string Trim(std::string_view text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  const auto end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

// Names of the recording rules: every `record: NAME` line (no YAML library here; the rules file
// keeps each name on its `record:` line).
std::vector<std::string> RecordingRuleNames(const std::string& yaml) {
  std::vector<std::string> names;
  std::istringstream lines(yaml);
  std::string line;
  while (std::getline(lines, line)) {
    std::string item = Trim(line);
    if (item.rfind("- ", 0) == 0) item = Trim(item.substr(2));
    if (item.rfind("record:", 0) != 0) continue;
    std::string name = Trim(item.substr(std::string_view("record:").size()));
    if (name.size() >= 2 && (name.front() == '"' || name.front() == '\'')) {
      name = name.substr(1, name.size() - 2);
    }
    names.push_back(name);
  }
  return names;
}

std::set<std::string> KnownMetricNames() {
  std::set<std::string> names = ContractSeriesNames();
  for (const std::string& rule :
       RecordingRuleNames(ReadFile(kDashboardsDir / "stragglar-rules.yml"))) {
    names.insert(rule);
  }
  return names;
}

// What one PromQL expression refers to.
struct ExprScan {
  std::vector<std::string> metrics;     // Metric names used as selectors.
  std::vector<std::string> unfiltered;  // Selectors without comm=~"$comm".
  std::vector<std::string> variables;   // Dashboard variables ($name or ${name}).
  bool anonymous_selector = false;      // A `{...}` selector with no metric name before it.
};

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}

// Index just past the bracket that closes the one at `open`, skipping quoted strings.
size_t SkipBracketed(std::string_view expr, size_t open) {
  const char opening = expr[open];
  const char closing = opening == '{' ? '}' : opening == '[' ? ']' : ')';
  int depth = 0;
  for (size_t i = open; i < expr.size(); ++i) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      for (++i; i < expr.size() && expr[i] != c; ++i) {
        if (expr[i] == '\\' && c != '`') ++i;
      }
    } else if (c == opening) {
      ++depth;
    } else if (c == closing && --depth == 0) {
      return i + 1;
    }
  }
  return expr.size();
}

size_t SkipSpace(std::string_view expr, size_t i) {
  while (i < expr.size() && std::isspace(static_cast<unsigned char>(expr[i]))) ++i;
  return i;
}

// Names of the dashboard variables in `text` ($name or ${name}); an empty name for a bare `$`.
std::vector<std::string> Variables(std::string_view text) {
  std::vector<std::string> names;
  for (size_t at = text.find('$'); at != std::string_view::npos; at = text.find('$', at + 1)) {
    size_t begin = at + 1;
    if (begin < text.size() && text[begin] == '{') ++begin;
    size_t end = begin;
    while (end < text.size() && IsIdentChar(text[end]) && text[end] != ':') ++end;
    names.emplace_back(text.substr(begin, end - begin));
  }
  return names;
}

// A small PromQL lexer: enough to tell metric names from functions, aggregations, keywords,
// label lists, label matchers, durations and numbers.
ExprScan ScanExpr(std::string_view expr) {
  static const std::set<std::string, std::less<>> kLabelListKeywords = {
      "by", "without", "on", "ignoring", "group_left", "group_right"};
  static const std::set<std::string, std::less<>> kKeywords = {
      "and",     "or",   "unless",   "bool",   "offset", "sum",   "min",
      "max",     "avg",  "group",    "stddev", "stdvar", "count", "count_values",
      "bottomk", "topk", "quantile", "inf",    "nan",    "Inf",   "NaN"};
  ExprScan scan;
  scan.variables = Variables(expr);
  for (size_t i = 0; i < expr.size(); ++i) {
    const char c = expr[i];
    if (c == '$') {
      while (i + 1 < expr.size() && (IsIdentChar(expr[i + 1]) || expr[i + 1] == '{')) ++i;
    } else if (c == '"' || c == '\'' || c == '`') {
      // A string argument (label_replace() and the like).
      const size_t close = expr.find(c, i + 1);
      if (close == std::string_view::npos) break;
      i = close;
    } else if (c == '{' || c == '[') {
      // A named selector consumes its own braces, so these are a range or an unnamed selector.
      if (c == '{') scan.anonymous_selector = true;
      i = SkipBracketed(expr, i) - 1;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t end = i;
      while (end < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[end])) || expr[end] == '.' ||
              ((expr[end] == '+' || expr[end] == '-') && (expr[end - 1] | 0x20) == 'e'))) {
        ++end;
      }
      i = end - 1;
    } else if (IsIdentStart(c)) {
      size_t end = i;
      while (end < expr.size() && IsIdentChar(expr[end])) ++end;
      const std::string ident(expr.substr(i, end - i));
      const size_t next = SkipSpace(expr, end);
      const bool call = next < expr.size() && expr[next] == '(';
      if (kLabelListKeywords.contains(ident)) {
        i = call ? SkipBracketed(expr, next) - 1 : end - 1;
      } else if (kKeywords.contains(ident) || call) {
        i = end - 1;
      } else {
        scan.metrics.push_back(ident);
        if (next < expr.size() && expr[next] == '{') {
          const size_t close = SkipBracketed(expr, next);
          const std::string_view matchers = expr.substr(next, close - next);
          if (matchers.find(kCommFilter) == std::string_view::npos) {
            scan.unfiltered.push_back(ident);
          }
          i = close - 1;
        } else {
          scan.unfiltered.push_back(ident);
          i = end - 1;
        }
      }
    }
  }
  return scan;
}

// Every panel, the panels of rows included.
void CollectPanels(const Json& panels, std::vector<const Json*>& out) {
  if (!panels.is_array()) return;
  for (const Json& panel : panels) {
    out.push_back(&panel);
    if (panel.contains("panels")) CollectPanels(panel["panels"], out);
  }
}

std::vector<const Json*> AllPanels(const Json& dashboard) {
  std::vector<const Json*> panels;
  if (dashboard.contains("panels")) CollectPanels(dashboard["panels"], panels);
  return panels;
}

std::vector<std::string> Exprs(const Json& panel) {
  std::vector<std::string> exprs;
  if (!panel.contains("targets") || !panel["targets"].is_array()) return exprs;
  for (const Json& target : panel["targets"]) {
    if (target.contains("expr") && target["expr"].is_string()) {
      exprs.push_back(target["expr"].get<std::string>());
    }
  }
  return exprs;
}

const Json* FindVariable(const Json& dashboard, std::string_view name) {
  if (!dashboard.contains("templating") || !dashboard["templating"].contains("list")) {
    return nullptr;
  }
  for (const Json& variable : dashboard["templating"]["list"]) {
    if (variable.value("name", "") == name) return &variable;
  }
  return nullptr;
}

std::string VariableQuery(const Json& variable) {
  std::string text = variable.value("definition", "");
  if (variable.contains("query")) {
    const Json& query = variable["query"];
    text += " " + (query.is_string() ? query.get<std::string>() : query.value("query", ""));
  }
  return text;
}

void ValidateTemplating(const Json& dashboard, std::vector<std::string>& problems) {
  const Json* datasource = FindVariable(dashboard, "datasource");
  if (datasource == nullptr || datasource->value("type", "") != "datasource" ||
      datasource->value("query", "") != "prometheus") {
    problems.push_back("no variable `datasource` of type datasource, query prometheus");
  }
  const Json* comm = FindVariable(dashboard, "comm");
  if (comm == nullptr || comm->value("type", "") != "query" || !comm->value("multi", false) ||
      !comm->value("includeAll", false) || comm->value("allValue", "") != ".*" ||
      !comm->contains("datasource") || (*comm)["datasource"] != PrometheusDatasource() ||
      VariableQuery(*comm).find("label_values(stragglar_collective_calls_total, comm)") ==
          std::string::npos) {
    problems.push_back(
        "no multi/includeAll (allValue .*) query variable `comm` from "
        "label_values(stragglar_collective_calls_total, comm)");
  }
}

bool ValidGridPos(const Json& panel) {
  if (!panel.contains("gridPos") || !panel["gridPos"].is_object()) return false;
  const Json& pos = panel["gridPos"];
  for (const char* key : {"x", "y", "w", "h"}) {
    if (!pos.contains(key) || !pos[key].is_number_integer()) return false;
  }
  const int x = pos["x"], y = pos["y"], w = pos["w"], h = pos["h"];
  return x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= kGridColumns;
}

bool Overlap(const Json& a, const Json& b) {
  const Json& p = a["gridPos"];
  const Json& q = b["gridPos"];
  const int px = p["x"], py = p["y"], pw = p["w"], ph = p["h"];
  const int qx = q["x"], qy = q["y"], qw = q["w"], qh = q["h"];
  return px < qx + qw && qx < px + pw && py < qy + qh && qy < py + ph;
}

void ValidateExpr(const std::string& where, const std::string& expr,
                  const std::set<std::string>& known_metrics, std::vector<std::string>& problems) {
  const ExprScan scan = ScanExpr(expr);
  if (scan.metrics.empty()) problems.push_back(where + ": no metric in `" + expr + "`");
  if (scan.anonymous_selector) problems.push_back(where + ": selector without metric name");
  for (const std::string& metric : scan.metrics) {
    if (!known_metrics.contains(metric)) problems.push_back(where + ": unknown metric " + metric);
  }
  for (const std::string& metric : scan.unfiltered) {
    problems.push_back(where + ": " + metric + " without " + std::string(kCommFilter));
  }
  for (const std::string& variable : scan.variables) {
    if (!kAllowedVariables.contains(variable)) {
      problems.push_back(where + ": variable $" + variable + " not allowed");
    }
  }
}

// Everything the dashboard must satisfy; returns one line per problem (empty: valid).
std::vector<std::string> ValidateDashboard(const Json& dashboard,
                                           const std::set<std::string>& known_metrics) {
  std::vector<std::string> problems;
  if (!dashboard.is_object() || !dashboard.contains("panels") || !dashboard["panels"].is_array() ||
      dashboard["panels"].empty()) {
    return {"no panels"};
  }
  if (!dashboard.contains("schemaVersion") || !dashboard["schemaVersion"].is_number_integer()) {
    problems.push_back("no schemaVersion");
  }
  ValidateTemplating(dashboard, problems);
  std::map<int64_t, std::string> ids;
  for (const Json* panel_ptr : AllPanels(dashboard)) {
    const Json& panel = *panel_ptr;
    const std::string title = panel.value("title", "");
    const std::string where = "panel '" + title + "'";
    if (title.empty()) problems.push_back("panel without title");
    if (!panel.contains("id") || !panel["id"].is_number_integer()) {
      problems.push_back(where + ": no integer id");
    } else if (auto [it, inserted] = ids.emplace(panel["id"].get<int64_t>(), title); !inserted) {
      problems.push_back(where + ": duplicate panel id " + std::to_string(it->first) + " (also '" +
                         it->second + "')");
    }
    if (!ValidGridPos(panel)) problems.push_back(where + ": no valid gridPos");
    if (!panel.contains("datasource") || panel["datasource"] != PrometheusDatasource()) {
      problems.push_back(where + ": datasource is not ${datasource}");
    }
    if (panel.value("type", "") == "row") continue;
    if (!panel.contains("targets") || !panel["targets"].is_array() || panel["targets"].empty()) {
      problems.push_back(where + ": no targets");
      continue;
    }
    bool has_expr = false;
    for (const Json& target : panel["targets"]) {
      if (!target.contains("datasource") || target["datasource"] != PrometheusDatasource()) {
        problems.push_back(where + ": target datasource is not ${datasource}");
      }
      const std::string expr = target.value("expr", "");
      if (Trim(expr).empty()) continue;
      has_expr = true;
      ValidateExpr(where, expr, known_metrics, problems);
    }
    if (!has_expr) problems.push_back(where + ": no target with an expr");
  }
  const Json& top = dashboard["panels"];
  for (size_t a = 0; a < top.size(); ++a) {
    for (size_t b = a + 1; b < top.size(); ++b) {
      if (ValidGridPos(top[a]) && ValidGridPos(top[b]) && Overlap(top[a], top[b])) {
        problems.push_back("panels '" + top[a].value("title", "") + "' and '" +
                           top[b].value("title", "") + "' overlap");
      }
    }
  }
  return problems;
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string text = ReadFile(kDashboardsDir / "stragglar-dashboard.json");
    ASSERT_FALSE(text.empty()) << kDashboardsDir / "stragglar-dashboard.json";
    dashboard_ = Json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(dashboard_.is_discarded()) << "dashboard JSON does not parse";
    known_metrics_ = KnownMetricNames();
  }

  // The index (in dashboard_["panels"]) of the first panel that is not a row.
  size_t FirstGraphPanel() const {
    for (size_t i = 0; i < dashboard_["panels"].size(); ++i) {
      if (dashboard_["panels"][i].value("type", "") != "row") return i;
    }
    return dashboard_["panels"].size();
  }

  Json dashboard_;
  std::set<std::string> known_metrics_;
};

TEST_F(DashboardTest, IsValid) {
  EXPECT_THAT(ValidateDashboard(dashboard_, known_metrics_), IsEmpty());
  EXPECT_GE(dashboard_.value("schemaVersion", 0), 36);
  EXPECT_FALSE(dashboard_.value("uid", "").empty());
}

TEST_F(DashboardTest, HasDatasourceAndCommVariables) {
  const Json* datasource = FindVariable(dashboard_, "datasource");
  ASSERT_NE(datasource, nullptr);
  EXPECT_EQ(datasource->value("type", ""), "datasource");
  EXPECT_EQ(datasource->value("query", ""), "prometheus");
  const Json* comm = FindVariable(dashboard_, "comm");
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->value("type", ""), "query");
  EXPECT_TRUE(comm->value("multi", false));
  EXPECT_TRUE(comm->value("includeAll", false));
  EXPECT_EQ(comm->value("allValue", ""), ".*");
  EXPECT_THAT(VariableQuery(*comm),
              HasSubstr("label_values(stragglar_collective_calls_total, comm)"));
}

TEST_F(DashboardTest, EveryExprFiltersByComm) {
  for (const Json* panel : AllPanels(dashboard_)) {
    for (const std::string& expr : Exprs(*panel)) {
      EXPECT_THAT(expr, HasSubstr(kCommFilter)) << panel->value("title", "");
    }
  }
}

TEST_F(DashboardTest, RequiredPanelsExist) {
  using Predicate = std::function<bool(const Json&)>;
  // True when one expr of the panel contains every fragment.
  const auto expr_has = [](std::vector<std::string> fragments) -> Predicate {
    return [fragments](const Json& panel) {
      for (const std::string& expr : Exprs(panel)) {
        if (std::all_of(fragments.begin(), fragments.end(), [&](const std::string& fragment) {
              return expr.find(fragment) != std::string::npos;
            })) {
          return true;
        }
      }
      return false;
    };
  };
  const auto unit_is = [](const std::string& unit) -> Predicate {
    return [unit](const Json& panel) {
      return panel.contains("fieldConfig") && panel["fieldConfig"].contains("defaults") &&
             panel["fieldConfig"]["defaults"].value("unit", "") == unit;
    };
  };
  const auto type_is = [](const std::string& type) -> Predicate {
    return [type](const Json& panel) { return panel.value("type", "") == type; };
  };
  const auto all = [](std::vector<Predicate> predicates) -> Predicate {
    return [predicates](const Json& panel) {
      return std::all_of(predicates.begin(), predicates.end(),
                         [&](const Predicate& predicate) { return predicate(panel); });
    };
  };
  const struct {
    const char* what;
    Predicate matches;
  } kRequired[] = {
      {"arrival lag heatmap (rate of buckets by le)",
       all({type_is("heatmap"),
            expr_has({"rate(stragglar_arrival_lag_seconds_bucket", "by (le)"})})},
      {"arrival lag per rank",
       all({expr_has({"histogram_quantile(", "stragglar_arrival_lag_seconds_bucket", "rank"}),
            unit_is("s")})},
      {"straggler rank over time", expr_has({"stragglar_straggler_rank{"})},
      {"persistence per rank",
       all({expr_has({"stragglar_straggler_persistence_ratio", "rank"}), unit_is("percentunit")})},
      {"algorithm mix per size bucket",
       all({expr_has(
                {"rate(stragglar_collective_duration_seconds_count", "algorithm", "size_bucket"}),
            unit_is("ops")})},
      {"duration p50",
       all({expr_has({"histogram_quantile(0.5,", "stragglar_collective_duration_seconds_bucket",
                      "algorithm", "size_bucket"}),
            unit_is("s")})},
      {"duration p99",
       all({expr_has({"histogram_quantile(0.99,", "stragglar_collective_duration_seconds_bucket",
                      "algorithm", "size_bucket"}),
            unit_is("s")})},
      {"time saved", expr_has({"stragglar_time_saved_seconds_total"})},
      {"time lost", expr_has({"stragglar_time_lost_seconds_total"})},
      {"calls per rank",
       all({expr_has({"rate(stragglar_collective_calls_total", "rank"}), unit_is("ops")})},
      {"time waited per rank",
       all({expr_has({"rate(stragglar_wait_seconds_total", "rank"}), unit_is("percentunit")})},
      // The pipeline links row.
      {"slow link now", expr_has({"stragglar_slow_link{", "src", "dst"})},
      {"link delay per link",
       all({expr_has({"stragglar_link_delay_seconds{", "src", "dst"}), unit_is("s")})},
      {"link transfer time p90",
       all({expr_has({"histogram_quantile(0.9,", "stragglar_link_transfer_seconds_bucket", "src",
                      "dst"}),
            unit_is("s")})},
      {"advised warm-up per stage", expr_has({"stragglar_pipeline_warmup_forwards{", "stage"})},
  };
  const std::vector<const Json*> panels = AllPanels(dashboard_);
  for (const auto& required : kRequired) {
    EXPECT_TRUE(std::any_of(panels.begin(), panels.end(),
                            [&](const Json* panel) { return required.matches(*panel); }))
        << "no panel for: " << required.what;
  }
}

TEST_F(DashboardTest, UsesEveryContractMetric) {
  std::set<std::string> used;
  for (const Json* panel : AllPanels(dashboard_)) {
    for (const std::string& expr : Exprs(*panel)) {
      for (const std::string& metric : ScanExpr(expr).metrics) used.insert(metric);
    }
  }
  std::vector<std::string> families(std::begin(kScalarMetrics), std::end(kScalarMetrics));
  families.push_back("stragglar_collective_duration_seconds_bucket");
  families.push_back("stragglar_arrival_lag_seconds_bucket");
  EXPECT_THAT(used, IsSupersetOf(families));
}

// The negative cases: the same validator rejects broken copies.
TEST_F(DashboardTest, RejectsDuplicatePanelId) {
  Json broken = dashboard_;
  const size_t first = FirstGraphPanel();
  ASSERT_LT(first + 1, broken["panels"].size());
  broken["panels"][first + 1]["id"] = broken["panels"][first]["id"];
  EXPECT_THAT(ValidateDashboard(broken, known_metrics_), Contains(HasSubstr("duplicate panel id")));
}

TEST_F(DashboardTest, RejectsUnknownMetricMissingFilterAndForeignVariable) {
  Json broken = dashboard_;
  Json& target = broken["panels"][FirstGraphPanel()]["targets"][0];
  target["expr"] = "sum(rate(up[$__rate_interval])) + on() stragglar_straggler_rank{job=~\"$job\"}";
  const std::vector<std::string> problems = ValidateDashboard(broken, known_metrics_);
  EXPECT_THAT(problems, Contains(HasSubstr("unknown metric up")));
  EXPECT_THAT(problems, Contains(HasSubstr("stragglar_straggler_rank without")));
  EXPECT_THAT(problems, Contains(HasSubstr("variable $job not allowed")));
}

TEST_F(DashboardTest, RejectsPanelWithoutTargetsDatasourceOrGridPos) {
  Json broken = dashboard_;
  Json& panel = broken["panels"][FirstGraphPanel()];
  panel["targets"] = Json::array();
  panel.erase("datasource");
  panel.erase("gridPos");
  const std::vector<std::string> problems = ValidateDashboard(broken, known_metrics_);
  EXPECT_THAT(problems, Contains(HasSubstr("no targets")));
  EXPECT_THAT(problems, Contains(HasSubstr("datasource is not")));
  EXPECT_THAT(problems, Contains(HasSubstr("no valid gridPos")));
}

TEST(ScanExprTest, TellsMetricsFromFunctionsLabelsAndKeywords) {
  const ExprScan scan = ScanExpr(
      R"(histogram_quantile(0.99, sum by (comm, le) )"
      R"((rate(a_bucket{comm=~"$comm"}[$__rate_interval]))))"
      R"( - on (comm) group_left max by (comm) (b:c:rate1m{comm=~"$comm",rank="1"}) > 1e-9)"
      R"( and count(c) without (rank) unless topk(1, d{comm=~"$comm"} offset 5m))");
  EXPECT_THAT(scan.metrics, ElementsAre("a_bucket", "b:c:rate1m", "c", "d"));
  EXPECT_THAT(scan.unfiltered, ElementsAre("c"));
  EXPECT_THAT(scan.variables, ElementsAre("comm", "__rate_interval", "comm", "comm"));
  EXPECT_FALSE(scan.anonymous_selector);
  EXPECT_TRUE(ScanExpr(R"({__name__=~"stragglar_.*"})").anonymous_selector);
  EXPECT_THAT(ScanExpr("x{comm=~\"${comm}\"}").variables, ElementsAre("comm"));
}

TEST(RulesTest, RecordingRulesFollowNamingConvention) {
  const std::vector<std::string> names =
      RecordingRuleNames(ReadFile(kDashboardsDir / "stragglar-rules.yml"));
  EXPECT_THAT(names,
              IsSupersetOf({"comm_rank:stragglar_collective_calls:rate1m",
                            "comm_rank:stragglar_arrival_lag_seconds:p90_1m",
                            "comm_algorithm_size:stragglar_collective_duration_seconds:p99_1m",
                            "comm:stragglar_time_saved_seconds:rate1m"}));
  for (const std::string& name : names) {
    // level:metric:operations, metric from the contract without _total.
    EXPECT_EQ(std::count(name.begin(), name.end(), ':'), 2) << name;
    EXPECT_THAT(name, HasSubstr(":stragglar_")) << name;
    EXPECT_THAT(name, Not(HasSubstr("_total:"))) << name;
  }
  std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
}

}  // namespace
}  // namespace stragglar
