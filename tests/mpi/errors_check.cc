// Erroneous MPI_Allreduce calls get MPI's error, as the library itself gives it (issue 51, item 4):
// each call is made through MPI_Allreduce (the preload's when it is loaded) and then through
// PMPI_Allreduce (the library's own) on a communicator with MPI_ERRORS_RETURN, and both must
// return an error of the same class, without a crash. A correct call on the same communicator
// after them must still be exact. With --counts-differ (for a plan forced: a call the preload
// passes to the library is the library's), on a communicator of its own, counts that differ
// across ranks (rank 0 twice the others'): every rank must return (run_check's timeout fails a
// hang), with MPI_ERR_TRUNCATE, MPI's class for it, or success, at least one rank failing, and
// the next call on that communicator (passed to the library) exact. The last rank enters that
// call only after the others have returned from it, so that the alarm reaches it before its call
// begins (it must fail the call too, not pass it to the library). The library's own is not
// called so: OpenMPI 4.1.4's own Allreduce corrupts its heap there ("double free or corruption"
// at 256 KiB on 4 ranks).
// Prints one line per case and "errors: ok" on rank 0; exits 1 on a mismatch.
// usage: errors_check [--counts-differ]
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr int kCount = 1 << 16;  // 256 KiB: STRAGGLAR_MIN_BYTES by default

struct Case {
  const char* name;
  bool in_place_as_receive = false;  // recvbuf = MPI_IN_PLACE
  bool one_buffer = false;           // sendbuf == recvbuf, without MPI_IN_PLACE
  int count = kCount;
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op op = MPI_SUM;
  bool null_comm = false;
};

int ClassOf(int code) {
  int error_class = code;
  if (code != MPI_SUCCESS) MPI_Error_class(code, &error_class);
  return error_class;
}

std::string ErrorName(int error_class) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(error_class, text, &length);
  return std::string(text, length);
}

// Receives one note on `tag` from every rank but `self` within `seconds`; true when all came.
// Receives still posted then are cancelled: a note sent later (one int, sent eagerly) is left
// unmatched.
bool AwaitNotes(int self, int tag, double seconds) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<int> notes(size);
  std::vector<MPI_Request> requests;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == self) continue;
    requests.emplace_back();
    PMPI_Irecv(&notes[peer], 1, MPI_INT, peer, tag, MPI_COMM_WORLD, &requests.back());
  }
  const double deadline = MPI_Wtime() + seconds;
  int all = 0;
  while (!all && MPI_Wtime() < deadline) {
    PMPI_Testall(static_cast<int>(requests.size()), requests.data(), &all, MPI_STATUSES_IGNORE);
    if (!all) usleep(1000);
  }
  if (!all) {
    for (MPI_Request& request : requests) {
      if (request == MPI_REQUEST_NULL) continue;
      PMPI_Cancel(&request);
      PMPI_Wait(&request, MPI_STATUS_IGNORE);
    }
  }
  return all != 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);  // inherits MPI_ERRORS_RETURN
  std::vector<float> in(kCount, 1.0f), out(kCount, 0.0f);
  const std::vector<Case> cases = {
      {.name = "MPI_IN_PLACE as the receive buffer", .in_place_as_receive = true},
      {.name = "one buffer for both, without MPI_IN_PLACE", .one_buffer = true},
      {.name = "a negative count", .count = -1},
      {.name = "MPI_DATATYPE_NULL", .type = MPI_DATATYPE_NULL},
      {.name = "MPI_OP_NULL", .op = MPI_OP_NULL},
      {.name = "MPI_COMM_NULL", .null_comm = true},
  };
  bool ok = true;
  for (const Case& c : cases) {
    const void* send = c.one_buffer ? static_cast<const void*>(out.data()) : in.data();
    void* receive = c.in_place_as_receive ? MPI_IN_PLACE : static_cast<void*>(out.data());
    const MPI_Comm target = c.null_comm ? MPI_COMM_NULL : comm;
    const int ours = ClassOf(MPI_Allreduce(send, receive, c.count, c.type, c.op, target));
    const int native = ClassOf(PMPI_Allreduce(send, receive, c.count, c.type, c.op, target));
    const bool same = ours == native;
    ok = ok && same;
    if (rank == 0 || !same) {
      std::printf("errors: %s: %s (the library's own: %s)%s\n", c.name,
                  ours == MPI_SUCCESS ? "success" : ErrorName(ours).c_str(),
                  native == MPI_SUCCESS ? "success" : ErrorName(native).c_str(),
                  same ? "" : " FAIL: classes differ");
    }
  }
  // The communicator still works.
  MPI_Allreduce(in.data(), out.data(), kCount, MPI_FLOAT, MPI_SUM, comm);
  for (float value : out) ok = ok && value == static_cast<float>(size);
  if (out[0] != static_cast<float>(size)) std::printf("errors: FAIL the next call is wrong\n");
  if (argc > 1 && std::string(argv[1]) == "--counts-differ") {
    MPI_Comm differing = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &differing);
    // A correct call first: the preload sets a communicator up (collectively) at its first call.
    MPI_Allreduce(in.data(), out.data(), kCount, MPI_FLOAT, MPI_SUM, differing);
    const int count = rank == 0 ? kCount : kCount / 2;
    // The last rank enters the call only once the others have returned from it (or after 10 s,
    // should a plan need it for them to return): the alarm has then come before its call began.
    const int last = size - 1;
    constexpr int kReturnedTag = 7;
    bool entered_late = false;
    if (rank == last) entered_late = AwaitNotes(last, kReturnedTag, 10.0);
    const int got =
        ClassOf(MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, differing));
    if (rank != last) PMPI_Send(&rank, 1, MPI_INT, last, kReturnedTag, MPI_COMM_WORLD);
    if (rank == last) {
      std::printf("errors: the last rank entered the call %s\n",
                  entered_late ? "after the others had returned" : "before the others returned");
    }
    const bool expected = got == MPI_SUCCESS || got == MPI_ERR_TRUNCATE;
    ok = ok && expected;
    std::printf("errors: counts that differ, rank %d: %s%s\n", rank,
                got == MPI_SUCCESS ? "success" : ErrorName(got).c_str(),
                expected ? "" : " FAIL: not MPI_ERR_TRUNCATE");
    int failed = got == MPI_SUCCESS ? 0 : 1, failures = 0;
    PMPI_Allreduce(&failed, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (failures == 0) {
      ok = false;
      if (rank == 0) std::printf("errors: FAIL no rank found the counts that differ\n");
    }
    // The communicator goes on, through the library.
    MPI_Allreduce(in.data(), out.data(), kCount, MPI_FLOAT, MPI_SUM, differing);
    if (out[0] != static_cast<float>(size) || out[kCount - 1] != static_cast<float>(size)) {
      ok = false;
      std::printf("errors: FAIL the call after the counts that differ is wrong\n");
    }
    MPI_Comm_free(&differing);
  }
  int all_ok = ok ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0 && all_ok == 1) std::printf("errors: ok\n");
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return all_ok == 1 ? 0 : 1;
}
