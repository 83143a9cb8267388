// The CLI at the edge of memory: commands whose plan would not fit end in one line naming the
// limit and what to use instead, before they allocate anything (they ended in std::bad_alloc).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli_runner.h"

namespace stragglar {
namespace {

TEST(CliLimitsTest, PlansThatWouldNotFitAreRefusedInOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plan --algorithm stragglar --ranks 16384",
       "stragglar plan: --ranks 16384: the flat StragglAR plan would hold 536805378 transfers "
       "(about 20 GiB); at most 4097 ranks for the flat schedule (33554432 transfers); use "
       "stragglar-log-depth\n"},
      {"plan --algorithm ring --ranks 8192",
       "stragglar plan: --ranks 8192: the Ring plan would hold 134201344 transfers (about 5 GiB); "
       "at most 4096 ranks for Ring's plan (33554432 transfers); use halving-doubling, or a "
       "--topology for the hierarchical ring\n"},
      {"plan --algorithm stragglar --topology 4096x16",
       "stragglar plan: --topology 4096x16: the hierarchical plan would hold 538705920 transfers "
       "(about 20.1 GiB); at most 1017 nodes of 16 ranks (33554432 transfers); use "
       "stragglar-log-depth (its rails log-depth)\n"},
      {"plan --algorithm stragglar-log-depth --topology 4096x16",
       "stragglar plan: hierarchical StragglAR on 4096x16: 65536 ranks x 32768 chunks would take "
       "16384 MiB to schedule; at most 134217728 rank-chunk pairs (1 GiB)\n"},
      {"sim --ranks 16384 --bytes 1MiB --algorithms stragglar",
       "stragglar sim: --ranks 16384: the flat StragglAR plan would hold 536805378 transfers "
       "(about 20 GiB); at most 4097 ranks for the flat schedule (33554432 transfers); use "
       "stragglar-log-depth\n"},
      {"rounds --max-ranks 8192",
       "stragglar rounds: --max-ranks 8192: the Ring plan would hold 134201344 transfers (about "
       "5 GiB); at most 4096 ranks for Ring's plan (33554432 transfers); use halving-doubling, or "
       "a --topology for the hierarchical ring\n"},
      {"rounds --max-ranks 8192 --verify",
       "stragglar rounds: --max-ranks 8192: the flat StragglAR plan would hold 134184962 "
       "transfers (about 5 GiB); at most 4097 ranks for the flat schedule (33554432 transfers); "
       "use stragglar-log-depth\n"},
      {"sim --topology 4096x16 --bytes 1MiB --algorithms ring-hierarchical",
       "stragglar sim: --topology 4096x16: the hierarchical plan would hold 538705920 transfers "
       "(about 20.1 GiB); at most 1017 nodes of 16 ranks (33554432 transfers); use fewer "
       "nodes\n"},
  };
  for (const auto& [args, line] : cases) {
    const CliResult result = RunCli(args);
    EXPECT_EQ(result.exit_code, 1) << args;
    EXPECT_EQ(result.err, line) << args;
    EXPECT_EQ(result.out, "") << args;
  }
}

// What fits is still built: log-depth StragglAR and Halving-Doubling at the largest rank count
// (O(n log n) transfers), and a hierarchical plan well inside the limit. Without a terminal and
// without --progress, a command's stderr stays empty.
TEST(CliLimitsTest, WhatFitsIsBuilt) {
  for (const char* args :
       {"plan --algorithm stragglar-log-depth --ranks 65536",
        "plan --algorithm halving-doubling --ranks 65536",
        "plan --algorithm stragglar --topology 64x16", "rounds --max-ranks 40 --json"}) {
    const CliResult result = RunCli(args);
    EXPECT_EQ(result.exit_code, 0) << args << result.err;
    EXPECT_EQ(result.err, "") << args;
  }
}

}  // namespace
}  // namespace stragglar
