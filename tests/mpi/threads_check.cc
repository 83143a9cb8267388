// A MPI_THREAD_MULTIPLE program under the preload (issue 51, item 1): the thread level stays the
// program's, and THREADS threads, each on a communicator of its own, make CALLS Allreduces at
// once, every result checked. Sizes cycle through 1 KiB to 1 MiB of floats, so that calls both
// below and above STRAGGLAR_MIN_BYTES are made, and every thread's data differs (rank, thread
// and call), so that a result that crossed threads is wrong.
// Prints "threads: ok" on rank 0 when every rank saw the level it asked for and every sum was
// exact; exits 1 otherwise, and 77 ("threads: SKIP") where the MPI library gives a lower level
// without the preload too.
// usage: threads_check THREADS CALLS
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kSizes[] = {256, 4096, 65536, 262144};  // floats

// CALLS checked Allreduces on `comm` for thread `thread`; false on the first wrong sum.
bool Work(MPI_Comm comm, int thread, int calls) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<float> in(kSizes[3]), out(kSizes[3]);
  for (int call = 0; call < calls; ++call) {
    const int count = kSizes[(call + thread) % 4];
    // Small integers: every sum is exact in any order.
    for (int i = 0; i < count; ++i) in[i] = static_cast<float>((rank + 1) * (thread + 1) + i % 5);
    MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, comm);
    for (int i = 0; i < count; ++i) {
      const float expected =
          static_cast<float>(size * (size + 1) / 2 * (thread + 1) + size * (i % 5));
      if (out[i] != expected) {
        std::printf("threads: FAIL thread %d, call %d (%d floats), element %d: %g, expected %g\n",
                    thread, call, count, i, out[i], expected);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, queried = MPI_THREAD_SINGLE;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Query_thread(&queried);
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 1000;
  if (provided != MPI_THREAD_MULTIPLE && !std::getenv("LD_PRELOAD")) {
    if (rank == 0) std::printf("threads: SKIP (the library gives level %d)\n", provided);
    MPI_Finalize();
    return 77;
  }
  bool ok = provided == MPI_THREAD_MULTIPLE && queried == MPI_THREAD_MULTIPLE;
  if (!ok) {
    std::printf("threads: FAIL rank %d: MPI_THREAD_MULTIPLE asked, %d provided, %d queried\n", rank,
                provided, queried);
  }
  std::vector<MPI_Comm> comms(threads);
  for (MPI_Comm& comm : comms) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  std::vector<char> passed(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] { passed[t] = Work(comms[t], t, calls) ? 1 : 0; });
  }
  for (std::thread& worker : workers) worker.join();
  for (int t = 0; t < threads; ++t) ok = ok && passed[t] == 1;
  for (MPI_Comm& comm : comms) MPI_Comm_free(&comm);
  MPI_Query_thread(&queried);
  ok = ok && queried == MPI_THREAD_MULTIPLE;
  int all_ok = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0 && all_ok == 1) {
    std::printf("threads: ok (%d threads, %d calls each, level MPI_THREAD_MULTIPLE kept)\n",
                threads, calls);
  }
  MPI_Finalize();
  return all_ok == 1 ? 0 : 1;
}
