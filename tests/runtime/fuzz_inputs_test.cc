// A seeded random mutator over the readers of files a user hands in: plan JSON (`stragglar
// verify`, then the verifier), traces (`stragglar replay`) and the learned state
// (STRAGGLAR_STATE_FILE). Each mutated input must end in a result or one short error line, never
// a crash, an exception or a hang; the sanitizer trees run it too (scripts/sanitize.sh). The
// number of inputs is fixed, so a run is repeatable: a failure names the seed and writes the input
// to a file, to keep under tests/fuzz/ (every file there is read again on every run).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/plan/plan.h"
#include "kernels/plan/verifier.h"
#include "kernels/synth/synthesizers.h"
#include "nlohmann/json.hpp"
#include "runtime/replay/trace_reader.h"
#include "runtime/state_file.h"

namespace stragglar {
namespace {

constexpr int kInputsPerReader = 50000;  // about a second each on the 2-core VM

// Replacements that reach the readers' edges: signs, bounds, 32-bit overflow, non-numbers,
// truncated numbers, structure and bytes no text has.
const std::vector<std::string>& Tokens() {
  static const auto* tokens = new std::vector<std::string>{
      "-1",       "0",           "1",          "2",           "3",     "7",
      "65537",    "100000000",   "4294967300", "-2147483649", "1e308", "nan",
      "inf",      "0.",          "1.5",        "\"x\"",       "null",  "true",
      "[]",       "{}",          "[",          "]",           "{",     "}",
      ",",        ":",           "\"",         "\n",          "\r\n",  std::string(1, '\0'),
      "\xff\xfe", "\xef\xbb\xbf"};
  return *tokens;
}

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : random_(seed) {}

  std::string Mutate(std::string text) {
    const int edits = 1 + Below(4);
    for (int i = 0; i < edits; ++i) {
      const size_t at = text.empty() ? 0 : Below(static_cast<int>(text.size()));
      switch (Below(6)) {
        case 0:  // flip a byte
          if (!text.empty()) text[at] = static_cast<char>(text[at] ^ (1 << Below(8)));
          break;
        case 1:  // cut the file here
          text.resize(at);
          break;
        case 2:  // drop a stretch
          text.erase(at, Below(16));
          break;
        case 3:  // repeat a stretch
          text.insert(at, text.substr(at, Below(32)));
          break;
        case 4:  // insert a token
          text.insert(at, Tokens()[Below(static_cast<int>(Tokens().size()))]);
          break;
        default:  // replace the number starting at or after `at` with a token
          ReplaceNumber(text, at);
      }
    }
    return text;
  }

 private:
  int Below(int bound) { return static_cast<int>(random_() % static_cast<uint32_t>(bound)); }
  void ReplaceNumber(std::string& text, size_t from) {
    const size_t begin = text.find_first_of("0123456789", from);
    if (begin == std::string::npos) return;
    const size_t end = text.find_first_not_of("0123456789.", begin);
    text.replace(begin, (end == std::string::npos ? text.size() : end) - begin,
                 Tokens()[Below(static_cast<int>(Tokens().size()))]);
  }

  std::mt19937 random_;
};

// What a reader made of an input: OK, or its error.
using Reader = std::function<absl::Status(const std::string&)>;

absl::Status ReadAndVerifyPlan(const std::string& text) {
  std::istringstream in(text);
  absl::StatusOr<Plan> plan = ReadPlanJson(in);
  if (!plan.ok()) return plan.status();
  return VerifyPlan(*plan);
}

absl::Status ReadTrace(const std::string& text) {
  std::istringstream in(text);
  return ParseTrace(in, "fuzz.csv").status();
}

absl::Status ReadState(const std::string& text) {
  return ParseState(text, "fuzz.json", 4, "node1/host-threads").status();
}

// An error is one line of reasonable length.
void ExpectOneLine(const absl::Status& status, const std::string& input, const std::string& name) {
  if (status.ok()) return;
  const bool one_line = !absl::StrContains(status.message(), '\n') && status.message().size() < 400;
  if (one_line) return;
  const std::string kept =
      (std::filesystem::path(::testing::TempDir()) / absl::StrCat("fuzz-", name)).string();
  std::ofstream(kept, std::ios::binary) << input;
  ADD_FAILURE() << name << ": not one short line (input kept in " << kept
                << "): " << absl::CHexEscape(status.message());
}

void Fuzz(const std::string& reader_name, const Reader& reader,
          const std::vector<std::string>& seeds, uint32_t seed) {
  Mutator mutator(seed);
  for (const std::string& input : seeds) ASSERT_TRUE(reader(input).ok()) << "a seed must read";
  int accepted = 0;
  for (int i = 0; i < kInputsPerReader; ++i) {
    const std::string input = mutator.Mutate(seeds[i % seeds.size()]);
    const absl::Status status = reader(input);
    accepted += status.ok();
    ExpectOneLine(status, input, absl::StrCat(reader_name, "-seed", seed, "-input", i));
  }
  // How deep the inputs went: some mutations leave an input that reads (a changed number, say).
  std::cout << reader_name << ": " << kInputsPerReader << " inputs, " << accepted << " accepted\n";
}

std::string PlanText(absl::StatusOr<Plan> plan) { return PlanToJson(*plan).dump(); }

TEST(FuzzInputsTest, PlanJsonAndTheVerifier) {
  Fuzz("plan", ReadAndVerifyPlan,
       {PlanText(SynthesizeRing(4)), PlanText(SynthesizeHalvingDoubling(6)),
        PlanText(SynthesizeStragglar(5, 2, 2)), PlanText(SynthesizeHierarchicalStragglar(2, 3, 5)),
        PlanText(SynthesizeLogDepthStragglar(8, 7, 2))},
       /*seed=*/1);
}

TEST(FuzzInputsTest, Traces) {
  Fuzz("trace", ReadTrace,
       {"call,rank,arrival_s,duration_s,bytes,algorithm\n0,0,0.001,0.002,4096,ring\n"
        "0,1,0.0015,0.0015,4096,ring\n1,0,0.01,0.003,4096,stragglar\n1,1,0.012,0.001,4096,"
        "stragglar\n",
        "call,rank,arrival_s\n0,0,0.5\n0,1,0.6\n0,2,0.55\n"},
       /*seed=*/2);
}

TEST(FuzzInputsTest, LearnedState) {
  LearnedState state{.num_ranks = 4, .machine = "node1/host-threads"};
  state.calibration.Add(Algorithm::kRing, 1 << 20, 1e-3, 1.5e-3);
  state.calibration.Add(Algorithm::kStragglar, 1 << 20, 1e-3, 2e-3,
                        CalibrationRegime::kPhaseHidden);
  state.predicted_lag_s = {0, 1e-5, 3e-3, 2e-5};
  state.straggler = 2;
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "fuzz-seed.json").string();
  ASSERT_TRUE(SaveState(path, state).ok());
  absl::StatusOr<std::string> text = ReadStateText(path);
  ASSERT_TRUE(text.ok()) << text.status();
  Fuzz("state", ReadState, {*text}, /*seed=*/3);
}

// Inputs kept from earlier failures: each must still end in a result or one line.
TEST(FuzzInputsTest, KeptInputs) {
  const std::filesystem::path kept = std::filesystem::path(STRAGGLAR_SOURCE_DIR) / "tests/fuzz";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kept)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".md") continue;
    std::ifstream file(entry.path(), std::ios::binary);
    const std::string input((std::istreambuf_iterator<char>(file)), {});
    const std::string name = entry.path().filename().string();
    const Reader reader = absl::StartsWith(name, "plan-")    ? Reader(ReadAndVerifyPlan)
                          : absl::StartsWith(name, "trace-") ? Reader(ReadTrace)
                                                             : Reader(ReadState);
    ExpectOneLine(reader(input), input, name);
    ++files;
  }
  EXPECT_GT(files, 0) << "no kept inputs in " << kept;
}

}  // namespace
}  // namespace stragglar
