// stragglar-mpi-comm-cycles: what a new communicator costs. Each cycle duplicates MPI_COMM_WORLD,
// makes one Allreduce on the duplicate and frees it, as frameworks do when they make sub-groups
// and pipeline stages. Cycles alternate between MPI_Allreduce (the preload's, under
// LD_PRELOAD=libstragglar_mpi.so) and PMPI_Allreduce (the library's own, which the preload never
// sees), so that both kinds run in one job on the same machine state. Rank 0 prints each kind's
// median, 10th and 90th percentile per cycle and their ratio; without the preload both kinds are
// the library's own, a control.
//
// usage: mpirun -np 4 [-x LD_PRELOAD=.../libstragglar_mpi.so] stragglar-mpi-comm-cycles
//          [--cycles 500] [--count 1024]
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"

ABSL_FLAG(int, cycles, 500, "cycles of each kind");
ABSL_FLAG(int, count, 1024, "floats per Allreduce");

namespace {

using AllReduceFunction = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);

// One cycle's seconds, the same on every rank (the slowest rank's).
double Cycle(AllReduceFunction all_reduce, std::vector<float>& in, std::vector<float>& out) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  all_reduce(in.data(), out.data(), static_cast<int>(in.size()), MPI_FLOAT, MPI_SUM, comm);
  MPI_Comm_free(&comm);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return seconds;
}

double Percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(fraction * static_cast<double>(values.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int cycles = absl::GetFlag(FLAGS_cycles);
  std::vector<float> in(std::max(1, absl::GetFlag(FLAGS_count)), 1.0f), out(in.size());
  std::vector<double> preload, native;
  bool exact = true;
  for (int i = 0; i < cycles; ++i) {
    // Alternating which kind goes first, so that drift hits both alike.
    for (int kind = 0; kind < 2; ++kind) {
      const bool through_preload = (kind == 0) == (i % 2 == 0);
      (through_preload ? preload : native)
          .push_back(Cycle(through_preload ? MPI_Allreduce : PMPI_Allreduce, in, out));
      exact = exact && std::all_of(out.begin(), out.end(),
                                   [&](float value) { return value == static_cast<float>(size); });
    }
  }
  int all_exact = exact ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_exact, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf(
        "comm-cycles: %d ranks, %d cycles of each kind (dup, one Allreduce of %zu floats, "
        "free); per cycle, the slowest rank's:\n",
        size, cycles, in.size());
    for (const auto& [name, times] :
         {std::pair{"MPI_Allreduce", &preload}, std::pair{"PMPI_Allreduce", &native}}) {
      std::printf("  %-15s median %8.1f us  p10 %8.1f  p90 %8.1f\n", name,
                  Percentile(*times, 0.5) * 1e6, Percentile(*times, 0.1) * 1e6,
                  Percentile(*times, 0.9) * 1e6);
    }
    std::printf("comm-cycles: MPI_Allreduce / PMPI_Allreduce %.2fx (medians); results %s\n",
                Percentile(preload, 0.5) / Percentile(native, 0.5),
                all_exact == 1 ? "exact" : "WRONG");
  }
  MPI_Finalize();
  return all_exact == 1 ? 0 : 1;
}
