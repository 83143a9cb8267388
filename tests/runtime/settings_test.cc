// The settings table (runtime/settings.h), checked as one table of cases: for every setting, values
// it accepts (with the value it writes back, which rank 0 sends) and values it refuses, at the
// edges of its range. The readers, the agreement and the docs come from the same rows.
#include "runtime/settings.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/agreed_settings.h"

namespace stragglar {
namespace {

// A refused value.
constexpr char kInvalid[] = "\x01invalid";

struct Case {
  std::string name;
  std::string value;
  std::string written;  // what the setting writes back once read; kInvalid: refused
};

// The policy's settings' cases. Every setting's first case is a valid value other than its
// default: all of them together make the environment that each case changes one variable of.
std::vector<Case> PolicyCases() {
  return {
      {"STRAGGLAR_MODE", "Observe", "observe"},
      {"STRAGGLAR_MODE", " off ", "off"},
      {"STRAGGLAR_MODE", "ADAPT", "adapt"},
      {"STRAGGLAR_MODE", "fast", kInvalid},
      {"STRAGGLAR_ALGORITHM", "stragglar", "stragglar"},
      {"STRAGGLAR_ALGORITHM", "NATIVE", "native"},
      {"STRAGGLAR_ALGORITHM", "Ring", "ring"},
      {"STRAGGLAR_ALGORITHM", "halving-doubling", "halving-doubling"},
      {"STRAGGLAR_ALGORITHM", "stragglar-log-depth", "stragglar-log-depth"},
      {"STRAGGLAR_ALGORITHM", "StragglAR-Hierarchical", "stragglar-hierarchical"},
      {"STRAGGLAR_ALGORITHM", "auto", "auto"},
      {"STRAGGLAR_ALGORITHM", "stragglar-tree", kInvalid},
      {"STRAGGLAR_STRAGGLER", "3", "3"},
      {"STRAGGLAR_STRAGGLER", "0", "0"},
      {"STRAGGLAR_STRAGGLER", "2147483647", "2147483647"},
      {"STRAGGLAR_STRAGGLER", "-1", kInvalid},
      {"STRAGGLAR_STRAGGLER", "2147483648", kInvalid},
      {"STRAGGLAR_STRAGGLER", "x", kInvalid},
      {"STRAGGLAR_EPOCH_CALLS", "128", "128"},
      {"STRAGGLAR_EPOCH_CALLS", "1", "1"},
      {"STRAGGLAR_EPOCH_CALLS", "1000000", "1000000"},
      {"STRAGGLAR_EPOCH_CALLS", "+7", "7"},
      {"STRAGGLAR_EPOCH_CALLS", "0", kInvalid},
      {"STRAGGLAR_EPOCH_CALLS", "1000001", kInvalid},
      {"STRAGGLAR_EPOCH_CALLS", "-3", kInvalid},
      {"STRAGGLAR_EPOCH_CALLS", "12x", kInvalid},
      {"STRAGGLAR_EPOCH_CALLS", "99999999999", kInvalid},
      {"STRAGGLAR_MIN_BYTES", "1MiB", "1048576"},
      {"STRAGGLAR_MIN_BYTES", "0", "0"},
      {"STRAGGLAR_MIN_BYTES", "1MB", "1000000"},
      {"STRAGGLAR_MIN_BYTES", "1.5KiB", "1536"},
      {"STRAGGLAR_MIN_BYTES", "2GiB", "2147483648"},
      {"STRAGGLAR_MIN_BYTES", "-1", kInvalid},
      {"STRAGGLAR_MIN_BYTES", "lots", kInvalid},
      {"STRAGGLAR_PIECES", "8", "8"},
      {"STRAGGLAR_PIECES", "AUTO", "auto"},
      {"STRAGGLAR_PIECES", "1", "1"},
      {"STRAGGLAR_PIECES", " 16 ", "16"},
      {"STRAGGLAR_PIECES", "0", kInvalid},
      {"STRAGGLAR_PIECES", "17", kInvalid},
      {"STRAGGLAR_PIECES", "many", kInvalid},
  };
}

// The rest of the settings' cases: plan shapes, the device executor, the watchdog, the pipeline
// and each rank's own.
std::vector<Case> MoreCases() {
  return {
      {"STRAGGLAR_TOPOLOGY", "2X4", "2x4"},
      {"STRAGGLAR_TOPOLOGY", "8", kInvalid},
      {"STRAGGLAR_TOPOLOGY", "0x8", kInvalid},
      {"STRAGGLAR_MPI_SEGMENT", "64KiB", "65536"},
      {"STRAGGLAR_MPI_SEGMENT", "0", "0"},  // one message per transfer
      {"STRAGGLAR_MPI_SEGMENT", "48", "48"},
      {"STRAGGLAR_MPI_SEGMENT", "1GiB", "1073741824"},
      {"STRAGGLAR_MPI_SEGMENT", "100", kInvalid},  // not a multiple of 16
      {"STRAGGLAR_MPI_SEGMENT", "1073741840", kInvalid},
      {"STRAGGLAR_MPI_SEGMENT", "-16", kInvalid},
      {"STRAGGLAR_MPI_SEGMENT", "big", kInvalid},
      {"STRAGGLAR_MPI_NETWORK_MESSAGE", "48", "48"},
      {"STRAGGLAR_MPI_NETWORK_MESSAGE", "0", "0"},  // whole messages
      {"STRAGGLAR_MPI_NETWORK_MESSAGE", " Auto ", "auto"},
      {"STRAGGLAR_MPI_NETWORK_MESSAGE", "100", kInvalid},
      {"STRAGGLAR_MPI_NETWORK_MESSAGE", "2GiB", kInvalid},
      {"STRAGGLAR_MPI_NETWORK_MESSAGE", "-16", kInvalid},
      {"STRAGGLAR_MPI_NETWORK_MESSAGE", "fast", kInvalid},
      {"STRAGGLAR_QUEUES", "per-class", "per-class"},
      {"STRAGGLAR_QUEUES", " Rounds ", "rounds"},
      {"STRAGGLAR_QUEUES", "PER-CLASS", "per-class"},
      {"STRAGGLAR_QUEUES", "per_class", kInvalid},
      {"STRAGGLAR_PRE_ARRIVAL", "NCCL", "nccl"},
      {"STRAGGLAR_PRE_ARRIVAL", " Rounds ", "rounds"},
      {"STRAGGLAR_PRE_ARRIVAL", "subcomm", kInvalid},
      {"STRAGGLAR_EXECUTOR", " Device ", "device"},
      {"STRAGGLAR_EXECUTOR", "nccl", "nccl"},
      {"STRAGGLAR_EXECUTOR", "gpu", kInvalid},
      {"STRAGGLAR_IPC_BYTES", "64MiB", "67108864"},
      {"STRAGGLAR_IPC_BYTES", "1MiB", "1048576"},
      {"STRAGGLAR_IPC_BYTES", "4GiB", "4294967296"},
      {"STRAGGLAR_IPC_BYTES", "1048575", kInvalid},
      {"STRAGGLAR_IPC_BYTES", "4294967297", kInvalid},
      {"STRAGGLAR_IPC_BYTES", "512KiB", kInvalid},
      {"STRAGGLAR_IPC_TIMEOUT", "90s", "1m30s"},
      {"STRAGGLAR_IPC_TIMEOUT", "0", "0"},
      {"STRAGGLAR_IPC_TIMEOUT", "86400s", "24h"},
      {"STRAGGLAR_IPC_TIMEOUT", "86401s", kInvalid},
      {"STRAGGLAR_IPC_TIMEOUT", "-1s", kInvalid},
      {"STRAGGLAR_IPC_BLOCKS", "16", "16"},
      {"STRAGGLAR_IPC_BLOCKS", "1", "1"},
      {"STRAGGLAR_IPC_BLOCKS", "64", "64"},
      {"STRAGGLAR_IPC_BLOCKS", "0", kInvalid},
      {"STRAGGLAR_IPC_BLOCKS", "65", kInvalid},
      {"STRAGGLAR_DEVICE_SCOPE", " System ", "system"},
      {"STRAGGLAR_DEVICE_SCOPE", "AUTO", "auto"},
      {"STRAGGLAR_DEVICE_SCOPE", "gpu", kInvalid},
      {"STRAGGLAR_WARN_AFTER", "5m", "5m"},
      {"STRAGGLAR_WARN_AFTER", "0", "0"},
      {"STRAGGLAR_WARN_AFTER", "1500ms", "1.5s"},
      {"STRAGGLAR_WARN_AFTER", "86400s", "24h"},
      {"STRAGGLAR_WARN_AFTER", "86401s", kInvalid},
      {"STRAGGLAR_WARN_AFTER", "soon", kInvalid},
      {"STRAGGLAR_TIMEOUT", "10m", "10m"},
      {"STRAGGLAR_TIMEOUT", "0", "0"},
      {"STRAGGLAR_TIMEOUT", "-5s", kInvalid},
      {"STRAGGLAR_STATE_FILE", "/tmp/state.json", "/tmp/state.json"},
      {"STRAGGLAR_STATE_FILE", " my state.json ", " my state.json "},  // a path, verbatim
      {"STRAGGLAR_LINK_PROFILING", " ON ", "on"},
      {"STRAGGLAR_LINK_PROFILING", "off", "off"},
      {"STRAGGLAR_LINK_PROFILING", "yes", kInvalid},
      {"STRAGGLAR_PIPELINE_MICROBATCHES", "32", "32"},
      {"STRAGGLAR_PIPELINE_MICROBATCHES", "1", "1"},
      {"STRAGGLAR_PIPELINE_MICROBATCHES", "1000000", "1000000"},
      {"STRAGGLAR_PIPELINE_MICROBATCHES", "0", kInvalid},
      {"STRAGGLAR_PIPELINE_MICROBATCHES", "1000001", kInvalid},
      {"STRAGGLAR_PIPELINE_FORWARD", "10ms", "10ms"},
      {"STRAGGLAR_PIPELINE_FORWARD", "20ms, 21ms,19ms", "20ms,21ms,19ms"},
      {"STRAGGLAR_PIPELINE_FORWARD", "10ms,0ms", kInvalid},
      {"STRAGGLAR_PIPELINE_FORWARD", "20", kInvalid},
      {"STRAGGLAR_PIPELINE_BACKWARD", "20ms", "20ms"},
      {"STRAGGLAR_PIPELINE_BACKWARD", "x", kInvalid},
      {"STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", "16", "16"},
      {"STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", "0", "0"},
      {"STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", "1000000", "1000000"},
      {"STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", "-1", kInvalid},
      {"STRAGGLAR_PIPELINE_MEMORY_MICROBATCHES", "1000001", kInvalid},
      {"STRAGGLAR_DEBUG", "trace", "TRACE"},
      {"STRAGGLAR_DEBUG", "none", "NONE"},
      {"STRAGGLAR_DEBUG", "Warn", "WARN"},
      {"STRAGGLAR_DEBUG", "INFO", "INFO"},
      {"STRAGGLAR_DEBUG", "loud", kInvalid},
      {"STRAGGLAR_PROFILER", " Events ", "events"},
      {"STRAGGLAR_PROFILER", "CUPTI", "cupti"},
      {"STRAGGLAR_PROFILER", "nsight", kInvalid},
      {"STRAGGLAR_TRACE_FILE", "/tmp/trace.json", "/tmp/trace.json"},
      {"STRAGGLAR_SUMMARY_FILE", "/tmp/summary.json", "/tmp/summary.json"},
      {"STRAGGLAR_LINK_ADDR", "10.1.2.3", "10.1.2.3"},
      {"STRAGGLAR_LINK_ADDR", "node7", kInvalid},
      {"STRAGGLAR_LINK_ADDR", "::1", kInvalid},
      {"STRAGGLAR_PIPELINE_ADVICE_FILE", "/tmp/advice.json", "/tmp/advice.json"},
      {"STRAGGLAR_DEVICE_STAMPS", " /tmp/run/stamps ", "/tmp/run/stamps"},
  };
}

std::vector<Case> Cases() {
  std::vector<Case> cases = PolicyCases();
  for (Case& each : MoreCases()) cases.push_back(std::move(each));
  return cases;
}

// What each setting writes of `config`, by name.
std::map<std::string, std::string> Written(const PreloadConfig& config) {
  std::map<std::string, std::string> written;
  for (const Setting& setting : Settings()) {
    if (setting.write != nullptr) written[setting.name] = setting.write(config);
  }
  return written;
}

// Every setting's first case: one environment where every setting is set.
std::map<std::string, std::string> EverySettingSet() {
  std::map<std::string, std::string> values;
  for (const Case& each : Cases()) values.try_emplace(each.name, each.value);
  return values;
}

PreloadConfig Read(const std::map<std::string, std::string>& values, std::string* log) {
  std::ostringstream lines;
  PreloadConfig config = PreloadConfigFromValues(values, &lines);
  *log = lines.str();
  return config;
}

// One case at a time, in an environment where every other setting is set too: a valid value is
// read, written back as expected, and read again from what was written to the same settings (what
// rank 0 sends); a refused one is the row's one line and keeps that setting's default only.
TEST(SettingsTest, EveryCaseReadsAsTheTableSays) {
  const std::map<std::string, std::string> every = EverySettingSet();
  for (const Case& each : Cases()) {
    SCOPED_TRACE(absl::StrCat(each.name, "=\"", each.value, "\""));
    const Setting* setting = FindSetting(each.name);
    ASSERT_NE(setting, nullptr) << "not a setting";
    std::map<std::string, std::string> values = every;
    values[each.name] = each.value;
    std::map<std::string, std::string> without = every;
    without.erase(each.name);
    std::string log, unused;
    const PreloadConfig config = Read(values, &log);
    std::map<std::string, std::string> expected = Written(Read(without, &unused));
    if (each.written == kInvalid) {
      EXPECT_EQ(log, absl::StrCat(each.name, "=\"", each.value, "\" is invalid (accepted: ",
                                  setting->accepted, "); using ", setting->fallback, "\n"));
    } else {
      EXPECT_EQ(log, "");
      expected[each.name] = each.written;
      std::map<std::string, std::string> sent = every;
      sent[each.name] = each.written;
      EXPECT_EQ(Read(sent, &unused), config) << "read back from what was written";
    }
    EXPECT_EQ(Written(config), expected);
  }
}

// Each setting is in the table of cases, with a refused value where it can refuse any.
TEST(SettingsTest, EverySettingHasItsCases) {
  std::set<std::string> valid, invalid;
  for (const Case& each : Cases()) (each.written == kInvalid ? invalid : valid).insert(each.name);
  for (const Setting& setting : Settings()) {
    if (setting.parse == nullptr) continue;  // the metrics endpoint, read per local rank
    EXPECT_TRUE(valid.contains(setting.name)) << setting.name << ": no valid value";
    EXPECT_EQ(invalid.contains(setting.name), !setting.accepted.empty())
        << setting.name << ": a refused value, exactly where the row says what is accepted";
  }
}

// Nothing set is the defaults, and each default is what its row writes and reads back.
TEST(SettingsTest, TheDefaultsAreWhatTheRowsWrite) {
  std::string log;
  EXPECT_EQ(Read({}, &log), PreloadConfig());
  EXPECT_EQ(log, "");
  for (const Setting& setting : Settings()) {
    if (setting.write == nullptr) continue;
    const std::string written = setting.write(PreloadConfig());
    if (written.empty()) continue;  // unset
    EXPECT_EQ(Read({{setting.name, written}}, &log), PreloadConfig()) << setting.name;
    EXPECT_EQ(log, "") << setting.name;
  }
}

TEST(SettingsTest, NamesAreUniqueAndEveryOneIsAStragglarVariable) {
  std::set<std::string> names;
  for (const Setting& setting : Settings()) {
    EXPECT_TRUE(names.insert(setting.name).second) << setting.name << " twice";
    EXPECT_TRUE(setting.name.starts_with("STRAGGLAR_")) << setting.name;
    EXPECT_FALSE(setting.meaning.empty()) << setting.name;
    EXPECT_EQ(setting.parse == nullptr, setting.write == nullptr) << setting.name;
  }
  EXPECT_EQ(FindSetting("STRAGGLAR_MODE")->name, "STRAGGLAR_MODE");
  EXPECT_EQ(FindSetting("STRAGGLAR_NOPE"), nullptr);
}

// docs/architecture.md holds the table the rows make, between two markers: a setting added, or a
// range changed, without the docs fails here.
TEST(SettingsTest, TheDocsTableIsTheRows) {
  std::ifstream docs(STRAGGLAR_SOURCE_DIR "/docs/architecture.md");
  ASSERT_TRUE(docs) << "cannot read docs/architecture.md";
  std::stringstream text;
  text << docs.rdbuf();
  const std::string begin = "<!-- settings table: runtime/settings.cc -->\n";
  const std::string end = "<!-- end of settings table -->";
  const size_t from = text.str().find(begin);
  const size_t to = text.str().find(end);
  ASSERT_NE(from, std::string::npos) << "no begin marker";
  ASSERT_NE(to, std::string::npos) << "no end marker";
  const std::string table = text.str().substr(from + begin.size(), to - from - begin.size());
  EXPECT_EQ(table, SettingsMarkdownTable()) << "docs/architecture.md's settings table should be:\n"
                                            << SettingsMarkdownTable();
}

}  // namespace
}  // namespace stragglar
