#include "kernels/plan/plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace stragglar {
namespace {

constexpr std::array<absl::string_view, 4> kAlgorithmNames = {"ring", "halving-doubling",
                                                              "stragglar", "native"};

absl::string_view OpName(TransferOp op) { return op == TransferOp::kReduce ? "reduce" : "copy"; }

// `value` as an int, if it is an integer that fits: get<int>() would keep its low 32 bits, and
// "ranks": 4294967300 would read as 4.
std::optional<int> AsInt(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t number = value.get<uint64_t>();
    if (number > static_cast<uint64_t>(std::numeric_limits<int>::max())) return std::nullopt;
    return static_cast<int>(number);
  }
  if (!value.is_number_integer()) return std::nullopt;
  const int64_t number = value.get<int64_t>();
  if (number < std::numeric_limits<int>::min() || number > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(number);
}

// Reads an integer member, naming `where` and the key in the error.
absl::StatusOr<int> IntMember(const nlohmann::json& object, absl::string_view key,
                              absl::string_view where) {
  auto it = object.find(key);
  if (it == object.end())
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing \"", key, "\""));
  std::optional<int> value = AsInt(*it);
  if (!value.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", key, "\" must be a 32-bit signed integer, got ", it->dump()));
  }
  return *value;
}

absl::StatusOr<Transfer> TransferFromJson(const nlohmann::json& json, absl::string_view where) {
  if (!json.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
  Transfer transfer;
  absl::StatusOr<int> src = IntMember(json, "src", where);
  if (!src.ok()) return src.status();
  absl::StatusOr<int> dst = IntMember(json, "dst", where);
  if (!dst.ok()) return dst.status();
  transfer.src = *src;
  transfer.dst = *dst;
  auto op = json.find("op");
  if (op == json.end() || !op->is_string() ||
      (op->get<std::string>() != "reduce" && op->get<std::string>() != "copy")) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"op\" must be \"reduce\" or \"copy\""));
  }
  transfer.op = op->get<std::string>() == "reduce" ? TransferOp::kReduce : TransferOp::kCopy;
  auto chunks = json.find("chunks");
  if (chunks == json.end() || !chunks->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"chunks\" must be an array"));
  }
  for (const nlohmann::json& chunk : *chunks) {
    std::optional<int> id = AsInt(chunk);
    if (!id.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": chunk ids must be 32-bit signed integers, got ", chunk.dump()));
    }
    transfer.chunks.push_back(*id);
  }
  return transfer;
}

}  // namespace

absl::string_view AlgorithmName(Algorithm algorithm) {
  return kAlgorithmNames[static_cast<size_t>(algorithm)];
}

ChunkList ChunkRange(int begin, int end) {
  ChunkList chunks;
  chunks.AppendRange(begin, end);
  return chunks;
}

PlanHeader HeaderOf(const Plan& plan) {
  return {.algorithm = plan.algorithm,
          .num_ranks = plan.num_ranks,
          .num_chunks = plan.num_chunks,
          .straggler = plan.straggler,
          .pre_arrival_rounds = plan.pre_arrival_rounds,
          .variant = plan.variant,
          .round_count = plan.num_rounds()};
}

absl::string_view PlanVariantName(PlanVariant variant) {
  switch (variant) {
    case PlanVariant::kLogDepth:
      return "log-depth";
    case PlanVariant::kHierarchical:
      return "hierarchical";
    case PlanVariant::kFlat:
      break;
  }
  return "flat";
}

absl::string_view PlanFamilyName(PlanFamily family) {
  if (family == kStragglarLogDepthFamily) return "stragglar-log-depth";
  if (family == kStragglarHierarchicalFamily) return "stragglar-hierarchical";
  if (family == kRingHierarchicalFamily) return "ring-hierarchical";
  return AlgorithmName(family.algorithm);
}

std::optional<PlanFamily> FindPlanFamily(absl::string_view name) {
  for (PlanFamily family : kPlanFamilies) {
    if (name == PlanFamilyName(family)) return family;
  }
  return std::nullopt;
}

absl::string_view AlgorithmFamily(Algorithm algorithm) {
  return algorithm == Algorithm::kStragglar ? "stragglar" : "baseline";
}

absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name) {
  for (Algorithm algorithm : kAllAlgorithms) {
    if (AlgorithmName(algorithm) == name) return algorithm;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown algorithm \"", name, "\"; expected one of ", absl::StrJoin(kAlgorithmNames, ", ")));
}

absl::StatusOr<Algorithm> ParsePlanAlgorithm(absl::string_view name) {
  absl::StatusOr<Algorithm> algorithm = ParseAlgorithm(name);
  if (algorithm.ok() && *algorithm != Algorithm::kNative) return algorithm;
  return absl::InvalidArgumentError(absl::StrCat(
      algorithm.ok() ? "\"native\" is a communication library's own AllReduce, not a plan"
                     : absl::StrCat("unknown algorithm \"", name, "\""),
      "; expected one of ",
      absl::StrJoin(kAlgorithmNames.begin(), kAlgorithmNames.end() - 1, ", ")));
}

absl::StatusOr<std::vector<Algorithm>> ParseAlgorithmList(absl::string_view names) {
  std::vector<Algorithm> algorithms;
  for (absl::string_view name : absl::StrSplit(names, ',')) {
    absl::StatusOr<Algorithm> algorithm = ParsePlanAlgorithm(name);
    if (!algorithm.ok()) return algorithm.status();
    if (std::find(algorithms.begin(), algorithms.end(), *algorithm) != algorithms.end()) {
      return absl::InvalidArgumentError(absl::StrCat("algorithm \"", name, "\" listed twice"));
    }
    algorithms.push_back(*algorithm);
  }
  return algorithms;
}

ElementRange ChunkElements(int64_t count, int num_chunks, int chunk) {
  // count * chunk stays far below 2^63 for any buffer that fits in memory and chunk <= 2^20.
  return {count * chunk / num_chunks, count * (chunk + 1) / num_chunks};
}

Plan RenameRanks(Plan renamed, absl::FunctionRef<int(int)> rename) {
  if (renamed.straggler.has_value()) renamed.straggler = rename(*renamed.straggler);
  for (Round& round : renamed.rounds) {
    for (Transfer& transfer : round.transfers) {
      transfer.src = rename(transfer.src);
      transfer.dst = rename(transfer.dst);
    }
  }
  return renamed;
}

Plan SwapRanks(Plan plan, int a, int b) {
  return RenameRanks(std::move(plan), [a, b](int rank) {
    return rank == a ? b : rank == b ? a : rank;
  });
}

namespace {

nlohmann::json TransferToJson(const Transfer& transfer) {
  return {{"src", transfer.src},
          {"dst", transfer.dst},
          {"chunks", std::vector<int32_t>(transfer.chunks.begin(), transfer.chunks.end())},
          {"op", OpName(transfer.op)}};
}

nlohmann::json RoundToJson(const Round& round) {
  nlohmann::json transfers = nlohmann::json::array();
  for (const Transfer& transfer : round.transfers) transfers.push_back(TransferToJson(transfer));
  return {{"transfers", std::move(transfers)}};
}

// `json.dump(2)` with every line after the first indented by `indent` more: how dump(2) of a
// document prints `json` where it nests.
std::string DumpIndented(const nlohmann::json& json, const std::string& indent) {
  return absl::StrReplaceAll(json.dump(2), {{"\n", absl::StrCat("\n", indent)}});
}

// RoundToJson(round) as dump(2) prints it as an element of the document's "rounds", a transfer
// at a time: a round of Halving-Doubling at 4096 ranks names 8 million chunks.
void WriteRoundJson(const Round& round, std::ostream& out) {
  if (round.transfers.empty()) {
    out << DumpIndented(RoundToJson(round), "    ");
    return;
  }
  out << "{\n      \"transfers\": [";
  for (size_t t = 0; t < round.transfers.size(); ++t) {
    out << (t == 0 ? "\n        " : ",\n        ")
        << DumpIndented(TransferToJson(round.transfers[t]), "        ");
  }
  out << "\n      ]\n    }";
}

// Everything but the rounds, which are an empty array.
nlohmann::json PlanHeaderToJson(const Plan& plan) {
  nlohmann::json json = {{"algorithm", AlgorithmName(plan.algorithm)},
                         {"ranks", plan.num_ranks},
                         {"straggler", nullptr},
                         {"chunks", plan.num_chunks},
                         {"pre_arrival_rounds", plan.pre_arrival_rounds},
                         {"rounds", nlohmann::json::array()}};
  if (plan.straggler.has_value()) json["straggler"] = *plan.straggler;
  if (plan.variant != PlanVariant::kFlat) json["variant"] = PlanVariantName(plan.variant);
  return json;
}

}  // namespace

nlohmann::json PlanToJson(const Plan& plan) {
  nlohmann::json json = PlanHeaderToJson(plan);
  nlohmann::json& rounds = json["rounds"];
  for (const Round& round : plan.rounds) rounds.push_back(RoundToJson(round));
  return json;
}

void WritePlanJson(const Plan& plan, const nlohmann::json& extra, std::ostream& out) {
  nlohmann::json header = PlanHeaderToJson(plan);
  header.update(extra);
  const std::string text = header.dump(2);
  // The header's one empty array at the top level; every round goes inside it, indented two
  // levels deeper, as dump(2) of the whole document would put it, and is written a transfer at a
  // time.
  constexpr std::string_view kEmptyRounds = "\n  \"rounds\": []";
  const size_t at = text.find(kEmptyRounds);
  if (plan.rounds.empty() || at == std::string::npos) {
    out << text;
    return;
  }
  const size_t open = at + kEmptyRounds.size() - 1;  // just past '['
  out.write(text.data(), static_cast<std::streamsize>(open));
  for (size_t r = 0; r < plan.rounds.size(); ++r) {
    out << (r == 0 ? "\n    " : ",\n    ");
    WriteRoundJson(plan.rounds[r], out);
  }
  out << "\n  ";
  out.write(text.data() + open, static_cast<std::streamsize>(text.size() - open));
}

namespace {

// PlanFromJson's checks of everything but the rounds' contents: the plan without its rounds.
absl::StatusOr<Plan> PlanHeaderFromJson(const nlohmann::json& json) {
  if (!json.is_object()) return absl::InvalidArgumentError("plan: not a JSON object");
  Plan plan;
  auto algorithm = json.find("algorithm");
  if (algorithm == json.end() || !algorithm->is_string()) {
    return absl::InvalidArgumentError("plan: \"algorithm\" must be a string");
  }
  absl::StatusOr<Algorithm> parsed = ParseAlgorithm(algorithm->get<std::string>());
  if (!parsed.ok())
    return absl::InvalidArgumentError(absl::StrCat("plan: ", parsed.status().message()));
  if (*parsed == Algorithm::kNative) {
    return absl::InvalidArgumentError(
        "plan: \"native\" is the communication library's own AllReduce, which has no plan");
  }
  plan.algorithm = *parsed;
  absl::StatusOr<int> ranks = IntMember(json, "ranks", "plan");
  if (!ranks.ok()) return ranks.status();
  absl::StatusOr<int> chunks = IntMember(json, "chunks", "plan");
  if (!chunks.ok()) return chunks.status();
  // Bounds before anything is sized by them: the verifier keeps a bitset over ranks per rank
  // (512 MiB at 65536 ranks; "ranks": 100000000 ended in std::bad_alloc), and one entry per chunk.
  constexpr int kMaxRanks = 65536;
  constexpr int kMaxChunks = 1 << 24;
  for (auto [name, value, most] :
       {std::tuple{"ranks", *ranks, kMaxRanks}, std::tuple{"chunks", *chunks, kMaxChunks}}) {
    if (value < 1 || value > most) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: \"", name, "\" must be in [1, ", most, "], got ", value));
    }
  }
  plan.num_ranks = *ranks;
  plan.num_chunks = *chunks;
  if (auto straggler = json.find("straggler"); straggler != json.end() && !straggler->is_null()) {
    absl::StatusOr<int> value = IntMember(json, "straggler", "plan");
    if (!value.ok()) return value.status();
    plan.straggler = *value;
  }
  if (json.contains("pre_arrival_rounds")) {
    absl::StatusOr<int> pre = IntMember(json, "pre_arrival_rounds", "plan");
    if (!pre.ok()) return pre.status();
    plan.pre_arrival_rounds = *pre;
  }
  if (auto variant = json.find("variant"); variant != json.end()) {
    bool known = false;
    for (PlanVariant candidate :
         {PlanVariant::kFlat, PlanVariant::kLogDepth, PlanVariant::kHierarchical}) {
      if (variant->is_string() && variant->get<std::string>() == PlanVariantName(candidate)) {
        plan.variant = candidate;
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(
          "plan: \"variant\" must be \"flat\", \"log-depth\" or \"hierarchical\"");
    }
  }
  auto rounds = json.find("rounds");
  if (rounds == json.end() || !rounds->is_array()) {
    return absl::InvalidArgumentError("plan: \"rounds\" must be an array");
  }
  return plan;
}

// Round r's "transfers" array, or the error that names what is wrong with it.
absl::StatusOr<const nlohmann::json*> TransfersOf(const nlohmann::json& round_json, size_t r) {
  auto transfers = round_json.is_object() ? round_json.find("transfers") : round_json.end();
  if (transfers == round_json.end() || !transfers->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: round ", r, ": \"transfers\" must be an array"));
  }
  return &*transfers;
}

}  // namespace

absl::StatusOr<Plan> PlanFromJson(const nlohmann::json& json) {
  absl::StatusOr<Plan> header = PlanHeaderFromJson(json);
  if (!header.ok()) return header.status();
  Plan plan = *std::move(header);
  const nlohmann::json& rounds = json["rounds"];
  for (size_t r = 0; r < rounds.size(); ++r) {
    absl::StatusOr<const nlohmann::json*> transfers_or = TransfersOf(rounds[r], r);
    if (!transfers_or.ok()) return transfers_or.status();
    const nlohmann::json* transfers = *transfers_or;
    Round& round = plan.rounds.emplace_back();
    for (size_t t = 0; t < transfers->size(); ++t) {
      absl::StatusOr<Transfer> transfer =
          TransferFromJson((*transfers)[t], absl::StrCat("plan: round ", r, " transfer ", t));
      if (!transfer.ok()) return transfer.status();
      round.transfers.push_back(*std::move(transfer));
    }
  }
  return plan;
}

absl::StatusOr<Plan> ReadPlanJson(std::istream& in) {
  // The parser calls back with the depth of each value: the document is 0, its members and the
  // rounds array 1, a round 2, its "transfers" array 3, a transfer 4. Each transfer becomes a
  // Transfer as soon as it is read and leaves the document; errors are kept in document order.
  std::vector<std::string> keys(6);    // keys[d]: the last key read at depth d
  std::vector<bool> arrays(6, false);  // arrays[d]: the container open at depth d is an array
  std::vector<Round> rounds;
  Round round;  // being read
  absl::Status first_error;
  auto keep = [&](const absl::Status& status) {
    if (first_error.ok()) first_error = status;
  };
  using Event = nlohmann::json::parse_event_t;
  const nlohmann::json::parser_callback_t callback = [&](int depth, Event event,
                                                         nlohmann::json& parsed) {
    const size_t d = static_cast<size_t>(depth);
    if (d >= keys.size()) {
      keys.resize(d + 1);
      arrays.resize(d + 1);
    }
    if (event == Event::key) {
      keys[d] = parsed.get<std::string>();
      return true;
    }
    if (event == Event::object_start || event == Event::array_start) {
      arrays[d] = event == Event::array_start;
      return true;
    }
    // A whole value: a scalar, or the end of a container.
    const bool in_rounds = d >= 2 && keys[1] == "rounds" && arrays[1];
    if (d == 4 && in_rounds && !arrays[2] && keys[3] == "transfers" && arrays[3]) {
      absl::StatusOr<Transfer> transfer = TransferFromJson(
          parsed,
          absl::StrCat("plan: round ", rounds.size(), " transfer ", round.transfers.size()));
      if (transfer.ok()) {
        round.transfers.push_back(*std::move(transfer));
      } else {
        keep(transfer.status());
      }
      return false;  // read: not kept in the document
    }
    if (d == 2 && in_rounds) {
      if (absl::StatusOr<const nlohmann::json*> transfers = TransfersOf(parsed, rounds.size());
          !transfers.ok()) {
        keep(transfers.status());
      }
      rounds.push_back(std::move(round));
      round = Round();
      return false;
    }
    return true;
  };
  nlohmann::json json = nlohmann::json::parse(in, callback, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  absl::StatusOr<Plan> plan = PlanHeaderFromJson(json);
  if (!plan.ok()) return plan.status();
  if (!first_error.ok()) return first_error;
  plan->rounds = std::move(rounds);
  return plan;
}

}  // namespace stragglar
