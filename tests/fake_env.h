// A fake environment for the tests of the STRAGGLAR_* readers (runtime/env_config.h): what
// PreloadConfigFromEnv reads instead of the process's, and the log lines it writes.
#pragma once

#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "runtime/env_config.h"

namespace stragglar {

// The fake environment PreloadConfigFromEnv reads instead of the process's.
inline std::map<std::string, std::string>& FakeEnv() {
  static auto* env = new std::map<std::string, std::string>();
  return *env;
}

inline const char* FakeGetenv(const char* name) {
  auto it = FakeEnv().find(name);
  return it == FakeEnv().end() ? nullptr : it->second.c_str();
}

// The host name as gethostname gives it, to check the log's own.
inline std::string SystemHostName() {
  char buffer[256] = {};
  gethostname(buffer, sizeof(buffer) - 1);
  return buffer;
}

// What each log line starts with: "<hostname>:<pid> [<rank>] stragglar <LEVEL> ".
inline std::string Prefix(absl::string_view rank, absl::string_view level) {
  return absl::StrCat(SystemHostName(), ":", getpid(), " [", rank, "] stragglar ", level, " ");
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  // Every line ends with '\n': the last piece must be empty.
  EXPECT_TRUE(lines.back().empty()) << "unterminated last line: " << lines.back();
  lines.pop_back();
  return lines;
}

// Parses FakeEnv(), returning the invalid-value lines in `lines`.
inline PreloadConfig Parse(std::vector<std::string>* lines) {
  std::ostringstream log;
  PreloadConfig config = PreloadConfigFromEnv(&FakeGetenv, &log);
  *lines = Lines(log.str());
  return config;
}

// A test of the readers: FakeEnv() starts and ends each test empty.
class FakeEnvTest : public ::testing::Test {
 protected:
  void SetUp() override { FakeEnv().clear(); }
  void TearDown() override { FakeEnv().clear(); }
};

}  // namespace stragglar
