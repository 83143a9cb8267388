// A job whose last rank is late once: a first MPI_Allreduce with every rank on time (it sets the
// preload's communicator up), then the last rank sleeps LATE_S seconds before the second, while
// the others wait in it, then CALLS - 2 more (default none). Checks every call's float sums and
// prints one line per rank on success; exits 1 on a wrong sum. For the call watchdog's checks
// (tests/mpi/watchdog_check.sh, tests/cluster/faults_check.sh).
// usage: late_rank LATE_S [CALLS]
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double late_s = argc > 1 ? std::atof(argv[1]) : 0;
  constexpr int kCount = 1 << 18;  // 1 MiB of floats
  std::vector<float> values(kCount, static_cast<float>(rank + 1)), sums(kCount);
  const int calls = argc > 2 ? std::atoi(argv[2]) : 2;
  const float expected = static_cast<float>(size * (size + 1) / 2);
  for (int call = 0; call < calls; ++call) {
    if (call == 1 && rank == size - 1) usleep(static_cast<useconds_t>(late_s * 1e6));
    MPI_Allreduce(values.data(), sums.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (float sum : sums) {
      if (sum != expected) {
        std::printf("late_rank: rank %d got %g in call %d, expected %g\n", rank, sum, call,
                    expected);
        return 1;
      }
    }
  }
  std::printf("late_rank: rank %d exact\n", rank);
  MPI_Finalize();
  return 0;
}
