// Bit-exact check of MPI_Allreduce (stragglar's, when libstragglar_mpi.so is preloaded) against
// the MPI library's own PMPI_Allreduce on the same inputs: every supported type x op, in place and
// out of place, sizes from 0 to past the chunk boundaries, on the world and on a split
// communicator; plus calls stragglar must pass through unchanged (16-bit integers, a derived
// type, a user-defined op). Inputs are the project's exact test data (kernels/reduce/exact_data.h),
// exact in every reduction order, so any difference is a bug, not rounding. Exits 1 on any
// mismatch.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reduce/exact_data.h"
#include "tests/sanitizer_sweep.h"

namespace {

using stragglar::DataType;
using stragglar::ReduceOp;

struct Type {
  const char* name;
  MPI_Datatype type;
  DataType data;  // the exact data that fills it: the same width and signedness
};

struct Op {
  const char* name;
  MPI_Op op;
  ReduceOp data;  // the operator the inputs are exact for
};

// `count` elements of `type` (`element_size` bytes each) on `rank` of `ranks`: the type's exact
// data, as many elements of it as fill the buffer (two int32 for an int32 pair, two int8 for an
// int16, whose wrap-around sums are exact as well).
std::vector<char> Input(const Type& type, const Op& op, int rank, int ranks, int count,
                        int element_size) {
  const stragglar::exact_data::Spec spec{.type = type.data,
                                         .op = op.data,
                                         .ranks = ranks,
                                         .seed = static_cast<uint64_t>(count) * 131 + ranks};
  const int64_t elements = int64_t{count} * element_size / stragglar::DataTypeSize(type.data);
  std::vector<char> input(int64_t{count} * element_size);
  stragglar::exact_data::FillInput(spec, rank, 0, elements, input.data());
  return input;
}

// Defined for every int32, INT32_MIN included (whose std::abs is not).
void AbsMax(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<int32_t*>(in);
  auto* b = static_cast<int32_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    b[i] = static_cast<int32_t>(std::max(std::abs(int64_t{a[i]}), std::abs(int64_t{b[i]})));
  }
}

int failures = 0;
int checks = 0;

// `mine` must equal `reference` bit for bit; a mismatch names the first wrong element of the
// exact data's type.
void Compare(const std::string& what, DataType type, const std::vector<char>& mine,
             const std::vector<char>& reference, int rank) {
  ++checks;
  const int64_t elements = static_cast<int64_t>(mine.size()) / stragglar::DataTypeSize(type);
  const stragglar::exact_data::Mismatches mismatches =
      stragglar::exact_data::Compare(type, mine.data(), reference.data(), elements);
  if (mismatches.count > 0) {
    ++failures;
    std::fprintf(
        stderr,
        "rank %d: MISMATCH %s (%lld of %lld %s elements differ; the first, %lld, is %s, "
        "PMPI_Allreduce gives %s)\n",
        rank, what.c_str(), static_cast<long long>(mismatches.count),
        static_cast<long long>(elements), std::string(stragglar::DataTypeName(type)).c_str(),
        static_cast<long long>(mismatches.first),
        stragglar::exact_data::ElementString(type, mine.data(), mismatches.first).c_str(),
        stragglar::exact_data::ElementString(type, reference.data(), mismatches.first).c_str());
  }
}

// One case: MPI_Allreduce against PMPI_Allreduce, out of place and in place.
void Check(MPI_Comm comm, const char* comm_name, const Type& type, const Op& op, int count,
           MPI_Datatype mpi_type, int element_size) {
  int rank = 0, ranks = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  const std::vector<char> input = Input(type, op, rank, ranks, count, element_size);
  std::vector<char> reference(count * element_size), result(count * element_size, 0x5a);
  PMPI_Allreduce(input.data(), reference.data(), count, mpi_type, op.op, comm);
  const std::string what =
      std::string(comm_name) + " " + type.name + " " + op.name + " count " + std::to_string(count);
  MPI_Allreduce(input.data(), result.data(), count, mpi_type, op.op, comm);
  Compare(what + " out of place", type.data, result, reference, rank);
  std::vector<char> in_place = input;
  MPI_Allreduce(MPI_IN_PLACE, in_place.data(), count, mpi_type, op.op, comm);
  Compare(what + " in place", type.data, in_place, reference, rank);
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
  bool expect_preload = false;
  // --rotate-ops: each type takes one operator, in rotation, as under a sanitizer (the emulated
  // cluster's runs, where every call crosses capped links, and the repeats of an executor path
  // that another test checks over every pair: what they check is the network path or the shape).
  bool rotate_ops = stragglar::kUnderSanitizer;
  for (int i = 1; i < argc; ++i) {
    expect_preload |= std::strcmp(argv[i], "--expect-preload") == 0;
    rotate_ops |= std::strcmp(argv[i], "--rotate-ops") == 0;
  }
  if (expect_preload && library.find("libstragglar_mpi") == std::string::npos) {
    std::fprintf(stderr, "MPI_Allreduce resolves to %s, not libstragglar_mpi.so\n",
                 library.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  static_assert(sizeof(long) == 8, "MPI_LONG is filled as int64");
  const Type types[] = {
      {"float32", MPI_FLOAT, DataType::kFloat32},
      {"float64", MPI_DOUBLE, DataType::kFloat64},
      {"int32", MPI_INT, DataType::kInt32},
      {"uint32", MPI_UNSIGNED, DataType::kUint32},
      {"int64", MPI_INT64_T, DataType::kInt64},
      {"uint64", MPI_UINT64_T, DataType::kUint64},
      {"long", MPI_LONG, DataType::kInt64},
      {"int8", MPI_INT8_T, DataType::kInt8},
      {"uint8", MPI_UINT8_T, DataType::kUint8},
      {"signed char", MPI_SIGNED_CHAR, DataType::kInt8},
      {"unsigned char", MPI_UNSIGNED_CHAR, DataType::kUint8},
  };
  const Op ops[] = {{"sum", MPI_SUM, ReduceOp::kSum},
                    {"prod", MPI_PROD, ReduceOp::kProd},
                    {"max", MPI_MAX, ReduceOp::kMax},
                    {"min", MPI_MIN, ReduceOp::kMin}};
  // 0 and 1, fewer elements than chunks, odd counts, and one past 256 KiB of float32.
  const int counts[] = {0, 1, 3, 7, 1001, 65537 + 2};
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  int half_size = 0;
  MPI_Comm_size(half, &half_size);
  // Under a sanitizer (scripts/sanitize.sh) or with --rotate-ops each type takes one operator, in
  // rotation: every type, operator and count still runs through the executors, at a quarter of the
  // calls.
  for (size_t t = 0; t < std::size(types); ++t) {
    const Type& type = types[t];
    for (size_t o = 0; o < std::size(ops); ++o) {
      if (rotate_ops && o != t % std::size(ops)) continue;
      const Op& op = ops[o];
      for (int count : counts) {
        Check(MPI_COMM_WORLD, "world", type, op, count, type.type,
              stragglar::DataTypeSize(type.data));
      }
      Check(half, "half", type, op, 4099, type.type, stragglar::DataTypeSize(type.data));
    }
  }
  // Passed through unchanged: a 16-bit type, a derived type, a user-defined op.
  const Type int16{"int16", MPI_SHORT, DataType::kInt8};
  Check(MPI_COMM_WORLD, "world", int16, ops[0], 5000, MPI_SHORT, 2);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  const Type int32{"int32 pair", MPI_INT, DataType::kInt32};
  MPI_Op abs_max;
  MPI_Op_create(AbsMax, 1, &abs_max);
  const Op user_abs_max{"user abs-max", abs_max, ReduceOp::kMax};
  // A derived type reduced with a user op (MPI allows user ops on derived types).
  Check(MPI_COMM_WORLD, "world", int32, user_abs_max, 3000, pair, 8);
  Check(MPI_COMM_WORLD, "world", int32, user_abs_max, 3000, MPI_INT, 4);
  MPI_Op_free(&abs_max);
  MPI_Type_free(&pair);
  MPI_Comm_free(&half);

  // Summed by MPI's own AllReduce (PMPI_, past the preload): a tally through the code under test
  // could hide its own mismatches, and ctest's pass pattern reads rank 0's line only.
  int all_failures = 0;
  PMPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf(
        "allreduce_check: %d ranks, %d cases per rank, %d mismatches (MPI_Allreduce from %s)\n",
        size, checks, all_failures, library.c_str());
  }
  MPI_Finalize();
  return all_failures == 0 ? 0 : 1;
}
