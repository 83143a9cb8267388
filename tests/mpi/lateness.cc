// A job whose ranks are late on a script: CALLS checked MPI_Allreduce calls of 1 MiB of floats,
// and before each, every rank the script names for that call sleeps. Each item of the script is
// RANK@FIRST-END:SECONDS, rank RANK late by SECONDS in calls [FIRST, END), e.g.
//   3@0-100:0.06,1@100-200:0.06,2@250-251:0.6
// Prints one line per rank when every sum was exact; exits 1 on a wrong sum or a bad script. With
// LATENESS_PROGRESS_EVERY=N, rank 0 also prints "lateness: call K" as it starts every Nth call, so
// that a check can change the machine at a known call.
// For the call watchdog's check (tests/mpi/watchdog_check.sh) and the fault and policy checks on
// the emulated cluster (tests/cluster/faults_check.sh, policy_check.sh, slowdown_check.sh).
// usage: lateness CALLS SCRIPT
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

struct Late {
  int rank, first, end;
  double seconds;
};

bool ParseScript(const char* text, std::vector<Late>& script) {
  while (*text != '\0') {
    Late late{};
    int used = 0;
    if (std::sscanf(text, "%d@%d-%d:%lf%n", &late.rank, &late.first, &late.end, &late.seconds,
                    &used) != 4 ||
        late.seconds < 0) {
      return false;
    }
    script.push_back(late);
    text += used;
    if (*text == ',') ++text;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<Late> script;
  if (argc != 3 || !ParseScript(argv[2], script)) {
    if (rank == 0) std::printf("usage: lateness CALLS RANK@FIRST-END:SECONDS,...\n");
    MPI_Finalize();
    return 1;
  }
  const int calls = std::atoi(argv[1]);
  const char* every_text = std::getenv("LATENESS_PROGRESS_EVERY");
  const int progress_every = every_text == nullptr ? 0 : std::atoi(every_text);
  constexpr int kCount = 1 << 18;  // 1 MiB of floats
  std::vector<float> values(kCount, static_cast<float>(rank + 1)), sums(kCount);
  const float expected = static_cast<float>(size * (size + 1) / 2);
  for (int call = 0; call < calls; ++call) {
    if (rank == 0 && progress_every > 0 && call % progress_every == 0) {
      std::printf("lateness: call %d\n", call);
      std::fflush(stdout);
    }
    for (const Late& late : script) {
      if (late.rank == rank && call >= late.first && call < late.end) {
        usleep(static_cast<useconds_t>(late.seconds * 1e6));
      }
    }
    MPI_Allreduce(values.data(), sums.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (float sum : sums) {
      if (sum != expected) {
        std::printf("lateness: rank %d got %g in call %d, expected %g\n", rank, sum, call,
                    expected);
        return 1;
      }
    }
  }
  std::printf("lateness: rank %d exact\n", rank);
  MPI_Finalize();
  return 0;
}
