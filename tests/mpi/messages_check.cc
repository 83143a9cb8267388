// The MPI executor's messages of any size (issue 51, item 5): with the largest plain message set to
// a few hundred bytes, every transfer of the call travels as one element of a derived type
// (kernels/exec/mpi/mpi_wire.h), as a transfer of 2 GiB or more does at the default. Every family
// of plans runs round by round (whole messages and segmented reduces) and on one queue per link
// class (the ranks as 2 nodes), both also with transfers between the nodes cut into network
// messages after a ready handshake, in place and not, on small integers whose sums are exact; every
// result is compared with the exact sum. Prints "messages: ok" on rank 0; exits 1 on a wrong
// element or a failed call.
// usage: messages_check (4 ranks)
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/exec/mpi/mpi_executor.h"
#include "kernels/program/program.h"
#include "kernels/synth/synthesizers.h"

namespace stragglar {
namespace {

constexpr int64_t kCount = 10007;  // floats: chunks of uneven sizes, a few KiB each

bool RunCase(const std::string& name, const Plan& plan, const MpiExecutorOptions& options,
             bool in_place, MPI_Comm comm, int rank, int size) {
  std::vector<float> input(kCount), result(kCount, -1.0f);
  for (int64_t i = 0; i < kCount; ++i) input[i] = static_cast<float>(rank + 1 + i % 7);
  if (in_place) result = input;
  absl::StatusOr<RankProgram> program = LowerPlan(plan, rank, {.in_place = in_place});
  if (!program.ok()) {
    std::printf("messages: FAIL %s: %s\n", name.c_str(), program.status().ToString().c_str());
    return false;
  }
  const AllReduceArgs args{.send = in_place ? result.data() : input.data(),
                           .recv = result.data(),
                           .count = kCount,
                           .type = DataType::kFloat32,
                           .op = ReduceOp::kSum};
  const absl::Status status = mpi::Run(*program, args, options, comm);
  if (!status.ok()) {
    std::printf("messages: FAIL %s: %s\n", name.c_str(), status.ToString().c_str());
    return false;
  }
  for (int64_t i = 0; i < kCount; ++i) {
    const float expected = static_cast<float>(size * (size + 1) / 2 + size * (i % 7));
    if (result[i] != expected) {
      std::printf("messages: FAIL %s: element %lld is %g, expected %g\n", name.c_str(),
                  static_cast<long long>(i), result[i], expected);
      return false;
    }
  }
  return true;
}

int Main() {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 4) {
    if (rank == 0) std::printf("messages: FAIL needs 4 ranks, has %d\n", size);
    return 1;
  }
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const std::vector<std::pair<std::string, Plan>> plans = {
      {"ring", *SynthesizeRing(4)},
      {"halving-doubling", *SynthesizeHalvingDoubling(4)},
      {"stragglar", *SynthesizeStragglar(4, 3)},
      {"stragglar-log-depth", *SynthesizeLogDepthStragglar(4, 3, 2)},
      {"stragglar-hierarchical 2x2", *SynthesizeHierarchicalStragglar(2, 2, 3)},
      {"ring-hierarchical 2x2", *SynthesizeHierarchicalRing(2, 2)}};
  // Largest plain messages of 496 bytes (31 x 16): every transfer of a few KiB is a derived type.
  const std::vector<std::pair<std::string, MpiExecutorOptions>> ways = {
      {"rounds", {.reduce_segment_bytes = 0, .max_message_bytes = 496}},
      {"segmented", {.reduce_segment_bytes = 1024, .max_message_bytes = 496}},
      {"per-class queues",
       {.ranks_per_node = 2, .per_class_queues = true, .max_message_bytes = 496}},
      // Transfers between the nodes in messages of 1 KiB, each after its receiver's ready message,
      // round by round and on the queues (a rank whose peers are all on the other node runs its
      // rounds, and must cut and wait as its peers on queues do).
      {"network messages",
       {.ranks_per_node = 2, .network_message_bytes = 1024, .max_message_bytes = 496}},
      {"per-class queues, network messages",
       {.ranks_per_node = 2,
        .per_class_queues = true,
        .network_message_bytes = 1024,
        .max_message_bytes = 496}}};
  bool ok = true;
  int cases = 0;
  for (const auto& [plan_name, plan] : plans) {
    for (const auto& [way, options] : ways) {
      for (bool in_place : {false, true}) {
        const std::string name =
            absl::StrCat(plan_name, ", ", way, in_place ? ", in place" : ", out of place");
        ok = RunCase(name, plan, options, in_place, comm, rank, size) && ok;
        ++cases;
      }
    }
  }
  int all_ok = ok ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0 && all_ok == 1) {
    std::printf("messages: ok (%d cases, every transfer one message of a derived type)\n", cases);
  }
  MPI_Comm_free(&comm);
  return all_ok == 1 ? 0 : 1;
}

}  // namespace
}  // namespace stragglar

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int status = stragglar::Main();
  MPI_Finalize();
  return status;
}
