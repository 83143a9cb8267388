// Runs the `stragglar` binary (STRAGGLAR_CLI, set per test target) as a user would, with its own
// files for stdin, stdout and stderr, for the CLI's tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stragglar {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream content;
  content << file.rdbuf();
  return content.str();
}

inline CliResult RunCli(const std::string& args, const std::string& stdin_text = "") {
  // ctest runs the tests of this file as parallel processes: each call gets its own files.
  static int calls = 0;
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("cli-", getpid(), "-", calls++);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "in") << stdin_text;
  const std::string command =
      absl::StrCat(STRAGGLAR_CLI, " ", args, " <", (dir / "in").string(), " >",
                   (dir / "out").string(), " 2>", (dir / "err").string());
  const int status = std::system(command.c_str());
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(dir / "out");
  result.err = ReadFile(dir / "err");
  std::filesystem::remove_all(dir);
  return result;
}

}  // namespace stragglar
