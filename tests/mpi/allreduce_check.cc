// Bit-exact check of MPI_Allreduce (stragglar's, when libstragglar_mpi.so is preloaded) against
// the MPI library's own PMPI_Allreduce on the same inputs: every supported type x op, in place and
// out of place, sizes from 0 to past the chunk boundaries, on the world and on a split
// communicator; plus calls stragglar must pass through unchanged (16-bit integers, a derived
// type, a user-defined op). Inputs are exact in every reduction order (small integers, powers of
// two for products), so any difference is a bug, not rounding. Exits 1 on any mismatch.
#include <dlfcn.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Type {
  const char* name;
  MPI_Datatype type;
  int size;
  bool floating;
};

struct Op {
  const char* name;
  MPI_Op op;
};

// Element i of `rank`'s input as a double, exact when converted to any of the types: sums stay
// small integers; products use +-1, +-2 and 1/2 (floats) or +-1, 2 (integers, wrapping exactly).
double Value(int rank, int64_t i, const char* op, bool floating) {
  if (std::strcmp(op, "prod") == 0) {
    static const double kFloating[] = {1, -1, 2, 0.5, -2, 1, 0.5};
    static const double kIntegers[] = {1, -1, 2, 1, -1, 2, 1};
    return (floating ? kFloating : kIntegers)[(i * 3 + rank) % 7];
  }
  return static_cast<double>((i * 7 + rank * 5) % 11) - 5;
}

void Fill(const Type& type, const char* op, int rank, int64_t count, std::vector<char>& out) {
  out.assign(count * type.size, 0);
  for (int64_t i = 0; i < count; ++i) {
    double v = Value(rank, i, op, type.floating);
    // Unsigned types: keep sums and products non-negative (wrapping is exact either way).
    if (type.type == MPI_UNSIGNED || type.type == MPI_UINT8_T || type.type == MPI_UINT64_T ||
        type.type == MPI_UNSIGNED_CHAR || type.type == MPI_UNSIGNED_LONG) {
      v = std::fabs(v);
    }
    char* at = out.data() + i * type.size;
    auto put = [&](auto value) { std::memcpy(at, &value, sizeof(value)); };
    if (type.type == MPI_FLOAT)
      put(static_cast<float>(v));
    else if (type.type == MPI_DOUBLE)
      put(v);
    else if (type.size == 1)
      put(static_cast<int8_t>(v));
    else if (type.size == 2)
      put(static_cast<int16_t>(v));
    else if (type.size == 4)
      put(static_cast<int32_t>(v));
    else
      put(static_cast<int64_t>(v));
  }
}

void AbsMax(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<int32_t*>(in);
  auto* b = static_cast<int32_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = std::max(std::abs(a[i]), std::abs(b[i]));
}

int failures = 0;
int checks = 0;

void Compare(const std::string& what, const std::vector<char>& mine,
             const std::vector<char>& reference, int rank) {
  ++checks;
  if (mine != reference) {
    ++failures;
    size_t first = 0;
    while (first < mine.size() && mine[first] == reference[first]) ++first;
    std::fprintf(stderr, "rank %d: MISMATCH %s (first differing byte %zu of %zu)\n", rank,
                 what.c_str(), first, mine.size());
  }
}

// One case: MPI_Allreduce against PMPI_Allreduce, out of place and in place.
void Check(MPI_Comm comm, const char* comm_name, const Type& type, const Op& op, int count,
           MPI_Datatype mpi_type, int element_size) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::vector<char> input, reference(count * element_size), result(count * element_size, 0x5a);
  Fill(type, op.name, rank, count * (element_size / type.size), input);
  PMPI_Allreduce(input.data(), reference.data(), count, mpi_type, op.op, comm);
  const std::string what =
      std::string(comm_name) + " " + type.name + " " + op.name + " count " + std::to_string(count);
  MPI_Allreduce(input.data(), result.data(), count, mpi_type, op.op, comm);
  Compare(what + " out of place", result, reference, rank);
  std::vector<char> in_place = input;
  MPI_Allreduce(MPI_IN_PLACE, in_place.data(), count, mpi_type, op.op, comm);
  Compare(what + " in place", in_place, reference, rank);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Which library's MPI_Allreduce this program calls: with --expect-preload it must be
  // stragglar's, so a preload that silently failed to load cannot pass.
  Dl_info where{};
  dladdr(reinterpret_cast<void*>(&MPI_Allreduce), &where);
  const std::string library = where.dli_fname != nullptr ? where.dli_fname : "?";
  if (argc > 1 && std::strcmp(argv[1], "--expect-preload") == 0 &&
      library.find("libstragglar_mpi") == std::string::npos) {
    std::fprintf(stderr, "MPI_Allreduce resolves to %s, not libstragglar_mpi.so\n",
                 library.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const Type types[] = {
      {"float32", MPI_FLOAT, 4, true},
      {"float64", MPI_DOUBLE, 8, true},
      {"int32", MPI_INT, 4, false},
      {"uint32", MPI_UNSIGNED, 4, false},
      {"int64", MPI_INT64_T, 8, false},
      {"uint64", MPI_UINT64_T, 8, false},
      {"long", MPI_LONG, 8, false},
      {"int8", MPI_INT8_T, 1, false},
      {"uint8", MPI_UINT8_T, 1, false},
      {"signed char", MPI_SIGNED_CHAR, 1, false},
      {"unsigned char", MPI_UNSIGNED_CHAR, 1, false},
  };
  const Op ops[] = {{"sum", MPI_SUM}, {"prod", MPI_PROD}, {"max", MPI_MAX}, {"min", MPI_MIN}};
  // 0 and 1, fewer elements than chunks, odd counts, and one past 256 KiB of float32.
  const int counts[] = {0, 1, 3, 7, 1001, 65537 + 2};
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  int half_size = 0;
  MPI_Comm_size(half, &half_size);
  for (const Type& type : types) {
    for (const Op& op : ops) {
      for (int count : counts) {
        Check(MPI_COMM_WORLD, "world", type, op, count, type.type, type.size);
      }
      Check(half, "half", type, op, 4099, type.type, type.size);
    }
  }
  // Passed through unchanged: a 16-bit type, a derived type, a user-defined op.
  const Type int16{"int16", MPI_SHORT, 2, false};
  Check(MPI_COMM_WORLD, "world", int16, ops[0], 5000, MPI_SHORT, 2);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  const Type int32{"int32 pair", MPI_INT, 4, false};
  MPI_Op abs_max;
  MPI_Op_create(AbsMax, 1, &abs_max);
  // A derived type reduced with a user op (MPI allows user ops on derived types).
  Check(MPI_COMM_WORLD, "world", int32, {"user abs-max", abs_max}, 3000, pair, 8);
  Check(MPI_COMM_WORLD, "world", int32, {"user abs-max", abs_max}, 3000, MPI_INT, 4);
  MPI_Op_free(&abs_max);
  MPI_Type_free(&pair);
  MPI_Comm_free(&half);

  int all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf(
        "allreduce_check: %d ranks, %d cases per rank, %d mismatches (MPI_Allreduce from %s)\n",
        size, checks, all_failures, library.c_str());
  }
  MPI_Finalize();
  return all_failures == 0 ? 0 : 1;
}
