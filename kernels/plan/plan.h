// The plan IR: an AllReduce algorithm as data. One plan feeds the verifier, the simulator and every
// executor, so no executor ever invents its own schedule.
//
// Semantics (the contract in docs/plans.md): initially rank r holds only its own contribution in
// every chunk. Within a round every transfer reads the sender's value as of the start of the round;
// afterwards `kReduce` adds it into the receiver's chunk and `kCopy` overwrites it. A rank sends at
// most one and receives at most one transfer per round. At the end every rank holds the sum of all
// contributions.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/plan/chunk_list.h"
#include "nlohmann/json_fwd.hpp"

namespace stragglar {

// What a call runs. Ring, Halving-Doubling and StragglAR are plans of ours (this IR). Native is
// the communication library's own AllReduce (MPI's, NCCL's), which the preload libraries can run
// instead: it has no plan, the model prices it as Ring's plan (or NCCL's closed forms on nodes),
// and the calibration learns what it really takes, apart from our plans.
enum class Algorithm : uint8_t { kRing, kHalvingDoubling, kStragglar, kNative };

inline constexpr std::array<Algorithm, 4> kAllAlgorithms = {
    Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kStragglar, Algorithm::kNative};
// The algorithms that are plans (everything but native).
inline constexpr std::array<Algorithm, 3> kPlanAlgorithms = {
    Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kStragglar};

// "ring", "halving-doubling", "stragglar", "native": the names used by the CLI and every JSON/CSV
// contract.
absl::string_view AlgorithmName(Algorithm algorithm);
absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name);
// The family an algorithm belongs to in comparisons (`stragglar sim --json`): "baseline" for what
// NCCL or MPI would run (Ring, Halving-Doubling, the library's own), "stragglar" for plans that
// use the straggler's delay.
absl::string_view AlgorithmFamily(Algorithm algorithm);
// ParseAlgorithm of a plan's algorithm: "native" is refused too, naming the plans.
absl::StatusOr<Algorithm> ParsePlanAlgorithm(absl::string_view name);
// Comma-separated plan algorithms, e.g. "ring,stragglar"; rejects empty items, duplicates and
// native.
absl::StatusOr<std::vector<Algorithm>> ParseAlgorithmList(absl::string_view names);

// Which family within its algorithm a plan belongs to. StragglAR: the flat schedule (the paper's,
// pipelined or not), log-depth (kernels/synth/stragglar_log_depth.cc) or hierarchical
// (kernels/synth/stragglar_hierarchical.cc). Ring: the flat ring, or the hierarchical ring of a
// machine of nodes (kernels/synth/ring_hierarchical.cc). Descriptive only: the verifier, the
// simulator and the executors treat every plan alike.
enum class PlanVariant : uint8_t { kFlat, kLogDepth, kHierarchical };
// "flat", "log-depth", "hierarchical".
absl::string_view PlanVariantName(PlanVariant variant);

// A plan family: an algorithm and the variant of its schedule, named here once for every layer
// that names one (`stragglar plan` and `stragglar sim`, the simulator's candidates,
// STRAGGLAR_ALGORITHM). A flat family goes by its algorithm's name, the others by
// "<algorithm>-<variant>".
struct PlanFamily {
  Algorithm algorithm = Algorithm::kRing;
  PlanVariant variant = PlanVariant::kFlat;
  friend bool operator==(const PlanFamily&, const PlanFamily&) = default;
};
inline constexpr PlanFamily kStragglarLogDepthFamily{Algorithm::kStragglar, PlanVariant::kLogDepth};
inline constexpr PlanFamily kStragglarHierarchicalFamily{Algorithm::kStragglar,
                                                         PlanVariant::kHierarchical};
inline constexpr PlanFamily kRingHierarchicalFamily{Algorithm::kRing, PlanVariant::kHierarchical};
// Every family a synthesizer makes, the flat ones first.
inline constexpr std::array<PlanFamily, 6> kPlanFamilies = {
    PlanFamily{Algorithm::kRing},      PlanFamily{Algorithm::kHalvingDoubling},
    PlanFamily{Algorithm::kStragglar}, kStragglarLogDepthFamily,
    kStragglarHierarchicalFamily,      kRingHierarchicalFamily};
// "ring", "halving-doubling", "stragglar", "stragglar-log-depth", "stragglar-hierarchical",
// "ring-hierarchical" (a flat family of the native algorithm: "native").
absl::string_view PlanFamilyName(PlanFamily family);
// The family of kPlanFamilies called exactly `name` (as the CLI takes it); nullopt for any other
// name.
std::optional<PlanFamily> FindPlanFamily(absl::string_view name);

enum class TransferOp : uint8_t { kReduce, kCopy };

struct Transfer {
  int32_t src = 0;
  int32_t dst = 0;
  TransferOp op = TransferOp::kCopy;
  ChunkList chunks;

  friend bool operator==(const Transfer&, const Transfer&) = default;
};

struct Round {
  std::vector<Transfer> transfers;

  friend bool operator==(const Round&, const Round&) = default;
};

// A plan's fields other than `rounds` are its header's (PlanHeader, HeaderOf): keep the two alike.
struct Plan {
  Algorithm algorithm = Algorithm::kRing;
  int num_ranks = 0;
  int num_chunks = 0;
  // Set for StragglAR plans only: the rank whose data arrives late.
  std::optional<int> straggler;
  // StragglAR: rounds [0, pre_arrival_rounds) run before the straggler arrives and must not involve
  // it. The straggler's first transfer is in round pre_arrival_rounds (checked by the verifier).
  int pre_arrival_rounds = 0;
  PlanVariant variant = PlanVariant::kFlat;
  std::vector<Round> rounds;

  int num_rounds() const { return static_cast<int>(rounds.size()); }
  int post_arrival_rounds() const { return num_rounds() - pre_arrival_rounds; }
  friend bool operator==(const Plan&, const Plan&) = default;
};

// What a plan is without its rounds: for pricing where the model reads no transfer (Ring's plan
// on one machine is one ring run, policy/ring_runs.h, and its transfers are 1.35 GB at 4096
// ranks). A type of its own, so that what reads every transfer (LowerPlan, VerifyPlan, the queue
// simulator) cannot be handed one; the round simulator takes one with what else it reads
// (PlanRounds) and refuses a round none of that gives. The policy's plan store
// (policy/plan_store.h) keeps such headers and builds the whole plan only for an executor.
struct PlanHeader {
  Algorithm algorithm = Algorithm::kRing;
  int num_ranks = 0;
  int num_chunks = 0;
  std::optional<int> straggler;
  int pre_arrival_rounds = 0;
  PlanVariant variant = PlanVariant::kFlat;
  int round_count = 0;

  int num_rounds() const { return round_count; }
  int post_arrival_rounds() const { return round_count - pre_arrival_rounds; }
  friend bool operator==(const PlanHeader&, const PlanHeader&) = default;
};
// `plan`'s header: every field but its rounds, and their count.
PlanHeader HeaderOf(const Plan& plan);

// Elements [begin, end) of a buffer of `count` elements that chunk `chunk` of `num_chunks` covers:
// [floor(chunk*count/num_chunks), floor((chunk+1)*count/num_chunks)). Chunks may be empty when
// count < num_chunks; every element belongs to exactly one chunk.
struct ElementRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
ElementRange ChunkElements(int64_t count, int num_chunks, int chunk);

// Chunks begin, begin + 1, ..., end - 1: the list a transfer of a contiguous range carries.
ChunkList ChunkRange(int begin, int end);

// Returns `plan` with every rank r named rename(r) (straggler included); `rename` must be a
// permutation of the ranks. Chunk numbering is unchanged. A plan passed as an rvalue is renamed in
// place.
Plan RenameRanks(Plan plan, absl::FunctionRef<int(int)> rename);
// RenameRanks swapping ranks `a` and `b`. This is how one synthesized StragglAR plan serves every
// straggler index.
Plan SwapRanks(Plan plan, int a, int b);

// JSON in the contract's shape: {"algorithm", "ranks", "straggler", "chunks", "rounds":
// [{"transfers":
// [{"src", "dst", "chunks", "op"}]}]} plus "pre_arrival_rounds", and "variant" for StragglAR plans
// other than the flat schedule.
nlohmann::json PlanToJson(const Plan& plan);
// PlanToJson(plan) with `extra`'s members added (json::update), written as dump(2) writes it,
// byte for byte, one transfer at a time: the document is never in memory whole (Ring's at 1024
// ranks is 293 MB of text and 1.7 GB as a json value; one round of Halving-Doubling at 4096 ranks
// names 8 million chunks). `stragglar plan --json` writes this.
void WritePlanJson(const Plan& plan, const nlohmann::json& extra, std::ostream& out);
// Parses the same shape; structural errors name the offending field. Does not verify correctness:
// run VerifyPlan for that.
absl::StatusOr<Plan> PlanFromJson(const nlohmann::json& json);
// PlanFromJson of the JSON text `in` holds, with the same errors, plus InvalidArgument "not valid
// JSON". Each transfer becomes a Transfer as it is read, so the text is never held as one JSON
// value: verifying Ring's 293 MB at 1024 ranks takes 113 MB resident this way, 1.29 GB parsing it
// whole. `stragglar verify` reads plans this way.
absl::StatusOr<Plan> ReadPlanJson(std::istream& in);

}  // namespace stragglar
