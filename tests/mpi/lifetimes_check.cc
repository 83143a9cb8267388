// The preload's state follows a communicator, not its handle (issue 51, item 2). Every way a
// communicator ends is taken, each followed by a new communicator of another size, which the MPI
// library may give the same handle:
//   free        MPI_Comm_dup of the world, then MPI_Comm_free
//   disconnect  MPI_Comm_dup of the world, then MPI_Comm_disconnect
//   split       MPI_Comm_split of the world in halves, then MPI_Comm_free
// Each communicator makes CALLS Allreduces of 4096 floats, each checked against the exact sum
// (every rank adds rank + 1 + call, so a result computed for another communicator's ranks, or one
// left from an earlier call, is wrong). Rank 0 says how often a handle came back; every rank
// exits 1 on a wrong sum, and prints "lifetimes: ok" when every sum on every rank was exact.
// usage: lifetimes_check [ROUNDS] [CALLS]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

namespace {

constexpr int kCount = 4096;

// CALLS checked Allreduces on `comm`; false on a wrong sum.
bool Check(MPI_Comm comm, int calls, const char* what) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<float> in(kCount), out(kCount);
  for (int call = 0; call < calls; ++call) {
    for (int i = 0; i < kCount; ++i) in[i] = static_cast<float>(rank + 1 + call + i % 7);
    MPI_Allreduce(in.data(), out.data(), kCount, MPI_FLOAT, MPI_SUM, comm);
    for (int i = 0; i < kCount; ++i) {
      const float expected = static_cast<float>(size * (size + 1) / 2 + size * (call + i % 7));
      if (out[i] != expected) {
        std::printf("lifetimes: FAIL %s (%d ranks), call %d, element %d: %g, expected %g\n", what,
                    size, call, i, out[i], expected);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 4;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 3;
  bool ok = true;
  std::set<MPI_Comm> seen;
  int reused = 0, made = 0;
  auto note = [&](MPI_Comm comm) {
    ++made;
    if (!seen.insert(comm).second) ++reused;
  };
  for (int round = 0; round < rounds && ok; ++round) {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    note(comm);
    ok = ok && Check(comm, calls, "a duplicate of the world");
    MPI_Comm_free(&comm);

    MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2, rank, &comm);
    note(comm);
    ok = ok && Check(comm, calls, "a half of the world, after a free");
    MPI_Comm_free(&comm);

    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    note(comm);
    ok = ok && Check(comm, calls, "a duplicate of the world, after a free");
    MPI_Comm_disconnect(&comm);

    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &comm);
    note(comm);
    ok = ok && Check(comm, calls, "a half of the world, after a disconnect");
    MPI_Comm_disconnect(&comm);
  }
  int all_ok = ok ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("lifetimes: %d communicators, %d of them on a handle that came back\n", made,
                reused);
    if (all_ok == 1) std::printf("lifetimes: ok\n");
  }
  MPI_Finalize();
  return all_ok == 1 ? 0 : 1;
}
