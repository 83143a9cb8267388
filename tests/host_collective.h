// Running an AllReduce plan on the host executor, one thread per rank, on exact data, and checking
// every rank's result bit for bit: what the host executor tests share.
#pragma once

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "kernels/exec/host/host_executor.h"
#include "kernels/reduce/exact_data.h"
#include "tests/host_plan_run.h"

namespace stragglar {

struct Collective {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int64_t count = 0;
  bool in_place = false;
  absl::Duration timeout = absl::Seconds(30);
  int ranks_per_node = 0;  // > 0: one queue per link class (HostExecutorOptions)
  // Set: the transport delays messages between its nodes (HostTransport::EmulateNodes).
  std::optional<HostTransport::NodeEmulation> emulation;
};

struct Outcome {
  std::vector<absl::Status> statuses;
  std::vector<exact_data::Bytes> results;
  std::vector<exact_data::Bytes> sent;  // the send buffers after the call (out of place only)
};

inline Outcome RunAllReduce(const Plan& plan, const Collective& collective,
                            const std::vector<exact_data::Bytes>& inputs) {
  const int num_ranks = plan.num_ranks;
  Outcome outcome;
  outcome.statuses.resize(num_ranks);
  if (collective.in_place) {
    outcome.results = inputs;
  } else {
    outcome.sent = inputs;
    // A fill pattern that no reduction produces by accident, so unwritten elements show up.
    for (const exact_data::Bytes& input : inputs)
      outcome.results.emplace_back(input.size(), std::byte{0xa5});
  }
  HostTransport transport(num_ranks);
  if (collective.emulation.has_value()) {
    const absl::Status status = transport.EmulateNodes(*collective.emulation);
    EXPECT_TRUE(status.ok()) << status;
  }
  std::vector<std::thread> threads;
  threads.reserve(num_ranks);
  for (int rank = 0; rank < num_ranks; ++rank) {
    threads.emplace_back([&, rank] {
      const AllReduceArgs args{
          .send = collective.in_place ? outcome.results[rank].data() : outcome.sent[rank].data(),
          .recv = outcome.results[rank].data(),
          .count = collective.count,
          .type = collective.type,
          .op = collective.op};
      outcome.statuses[rank] = ExecutePlanOnHost(
          plan, rank, args, transport,
          {.timeout = collective.timeout, .ranks_per_node = collective.ranks_per_node});
    });
  }
  for (std::thread& thread : threads) thread.join();
  return outcome;
}

// Every rank succeeded and holds exactly `expected`; out of place, no send buffer changed.
inline void ExpectExactResult(const Outcome& outcome, const Collective& collective,
                              const std::vector<exact_data::Bytes>& inputs,
                              const exact_data::Bytes& expected, const std::string& context) {
  for (size_t rank = 0; rank < outcome.results.size(); ++rank) {
    ASSERT_TRUE(outcome.statuses[rank].ok())
        << context << " rank " << rank << ": " << outcome.statuses[rank];
    const exact_data::Bytes& result = outcome.results[rank];
    const exact_data::Mismatches mismatches =
        exact_data::Compare(collective.type, result.data(), expected.data(), collective.count);
    if (mismatches.count > 0) {
      const int64_t first = mismatches.first;
      ADD_FAILURE() << context << " rank " << rank << ": first wrong element " << first << " of "
                    << collective.count << " is "
                    << exact_data::ElementString(collective.type, result.data(), first)
                    << ", expected "
                    << exact_data::ElementString(collective.type, expected.data(), first);
      return;
    }
    if (!collective.in_place) {
      EXPECT_TRUE(outcome.sent[rank] == inputs[rank])
          << context << " rank " << rank << ": the send buffer changed";
    }
  }
}

// Runs one collective on exact inputs and checks it against the reference.
inline void CheckExact(const Plan& plan, const Collective& collective, uint64_t seed) {
  const exact_data::Spec spec{
      .type = collective.type, .op = collective.op, .ranks = plan.num_ranks, .seed = seed};
  std::vector<exact_data::Bytes> inputs;
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    inputs.push_back(exact_data::MakeInput(spec, rank, collective.count));
  }
  const exact_data::Bytes expected = exact_data::Reference(spec, collective.count);
  const Outcome outcome = RunAllReduce(plan, collective, inputs);
  ExpectExactResult(
      outcome, collective, inputs, expected,
      absl::StrCat(AlgorithmName(plan.algorithm), " n=", plan.num_ranks,
                   plan.straggler ? absl::StrCat(" straggler=", *plan.straggler) : "", " ",
                   DataTypeName(collective.type), " ", ReduceOpName(collective.op),
                   " count=", collective.count, collective.in_place ? " in place" : "",
                   collective.ranks_per_node > 0 ? absl::StrCat(" queues per link class, nodes of ",
                                                                collective.ranks_per_node)
                                                 : ""));
}

}  // namespace stragglar
