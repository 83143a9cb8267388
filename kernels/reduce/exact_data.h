// AllReduce test data whose result is exact in any reduction order and grouping, and that result
// computed independently of the library's reduction kernels: the one source that the executor
// tests, `stragglar run`, stragglar-bench -c 1, stragglar-mpi-bench --check and the MPI preload's
// check compare results with.
//
// Every input element follows from (type, op, rank, number of ranks, element index, seed) alone,
// so a rank fills its own input and the reference without seeing the others'. The elements look
// random (a hash of rank, index and seed), so a chunk reduced into or copied to the wrong place
// changes the result. Per operator, for n ranks:
//   integers: sum in [-max/n, max/n] (unsigned: [0, max/n]) and avg in [1, max/n], so that no
//     partial sum overflows: reducers differ there (OpenMPI's vectorized 8-bit sums saturate,
//     NCCL's integer average may divide in a wider type), and signed overflow is undefined in C.
//     max, min: any bits. prod: odd bits, whose wrap-around products are exact in any order and
//     never collapse to 0.
//   floats: sum integers in [-m, m] and avg in [1, m] with n * m within the type's exact integer
//     range (2^8 bf16, 2^11 fp16, 2^24 fp32, 2^53 fp64): every partial sum is exact in the type,
//     up to 256 ranks in bf16. avg stays positive so that a reducer that scales each input by 1/n
//     before summing (NCCL) rounds without cancellation (see UlpTolerance). prod: +-1, and
//     +-2^{-1,0,1} from at most 8 ranks per element, so every partial product lies in
//     [2^-8, 2^8]. max, min: non-zero multiples of 1/8 up to 125 in magnitude (no -0/+0 ties).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reduce/reduce.h"

namespace stragglar::exact_data {

using Bytes = std::vector<std::byte>;

// One AllReduce's data: every rank's input and the reference follow from it.
struct Spec {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int ranks = 2;  // the number of ranks that contribute
  uint64_t seed = 1;
};

// A 64-bit mixing function (SplitMix64's finalizer after its increment), for deriving seeds.
uint64_t SplitMix64(uint64_t x);

// Element `index` of `rank`'s input: its little-endian bits in the low DataTypeSize(type) bytes.
uint64_t InputElement(const Spec& spec, int rank, int64_t index);
// Elements [first, first + count) of `rank`'s input, written to `out` (count elements).
void FillInput(const Spec& spec, int rank, int64_t first, int64_t count, void* out);
Bytes MakeInput(const Spec& spec, int rank, int64_t count);

// Elements [first, first + count) of the exact AllReduce over ranks 0..spec.ranks-1, written to
// `out`. Computed element by element in 64-bit integers or doubles, not with the library's kernels,
// except kAvg's final division, which is FinalizeReduction's contract (sum, then divide once:
// what the library's executors compute).
void FillReference(const Spec& spec, int64_t first, int64_t count, void* out);
Bytes Reference(const Spec& spec, int64_t count);

// How a reducer computes a floating-point average.
enum class Averaging {
  kSumThenDivide,  // the library's kernels and executors: exact with these inputs
  kScaleThenSum,   // NCCL: sum(x * (1/n)); exact when n is a power of two, else rounded per rank
};

// Units in the last place that a correct result may differ from the reference by: 0 (bit for
// bit) except a float average summed from scaled inputs over a rank count that is not a power of
// two, which may be n + 2 ulps off.
int64_t UlpTolerance(const Spec& spec, Averaging averaging);

struct Mismatches {
  int64_t count = 0;   // elements off by more than the tolerance
  int64_t first = -1;  // the first of them; -1 when none
};

// Compares `count` elements of `got` with `want`, allowing `ulps` units in the last place (floats;
// integers must be equal whatever `ulps` says).
Mismatches Compare(DataType type, const void* got, const void* want, int64_t count,
                   int64_t ulps = 0);

// Element `index` of `data` as a number (integers of more than 53 bits rounded).
double ElementValue(DataType type, const void* data, int64_t index);
// Element `index` for a mismatch message: its value and its bits, e.g. "-3 (0xc240)".
std::string ElementString(DataType type, const void* data, int64_t index);

// Not exact: floats uniform in [-1, 1], for checks against a rounding bound rather than a
// reference (`type` must be a floating-point type).
Bytes MakeRandomFloatInput(DataType type, int rank, int64_t count, uint64_t seed);

}  // namespace stragglar::exact_data
