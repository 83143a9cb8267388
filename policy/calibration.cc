#include "policy/calibration.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/statistics.h"

namespace stragglar {

int Calibration::Bucket(int64_t bytes) {
  int bucket = 0;
  while (bytes > 1) {
    bytes >>= 1;
    ++bucket;
  }
  return bucket;
}

namespace {

constexpr absl::string_view kHiddenSuffix = "/phase-hidden";

}  // namespace

void Calibration::Add(Algorithm algorithm, int64_t bytes, double predicted_s, double measured_s,
                      CalibrationRegime regime) {
  if (!(predicted_s > 0) || !(measured_s > 0) || !std::isfinite(predicted_s) ||
      !std::isfinite(measured_s)) {
    return;
  }
  const Key key{algorithm, Bucket(bytes), regime};
  Ratios& ratios = ratios_[key];
  EpochAdds& adds = added_this_epoch_[key];
  if (adds.added == 0 && ratios.scaled == 0 && ratios.measured() >= kOwnSamples) {
    // What the epoch's ratios are compared with, taken before they push any out.
    adds.median_before = Median(std::vector<double>(ratios.values.begin(), ratios.values.end()));
  } else if (adds.added == 0 && algorithm != Algorithm::kNative) {
    // A plan without that many measured: what it was priced with, its shift's guesses where it
    // has them, else the plans' median (not Factor's optimistic cap at 1).
    adds.expected_before =
        ratios.scaled > 0
            ? std::optional(Median(std::vector<double>(ratios.values.begin(), ratios.values.end())))
            : PlanPoolMedian(std::get<int>(key), regime);
  }
  ++adds.added;
  ratios.values.push_back(measured_s / predicted_s);
  if (static_cast<int>(ratios.values.size()) > kSamplesKept) {
    ratios.values.pop_front();
    ratios.scaled = std::max(0, ratios.scaled - 1);
  }
  if (ratios.measured() >= kOwnSamples) UnmarkGuesses(key);
}

void Calibration::UnmarkGuesses(const Key& key) {
  // Measured often enough again: the shift's guesses here go. In its other regimes they stand as
  // its ratios, no longer marked: a call is measured in the regime its arrivals put it in, which
  // exploring cannot choose, so a mark there could keep it explored for ever.
  Ratios& ratios = ratios_.at(key);
  ratios.values.erase(ratios.values.begin(), ratios.values.begin() + ratios.scaled);
  ratios.scaled = 0;
  const auto& [algorithm, bucket, regime] = key;
  for (auto& [other_key, other] : ratios_) {
    if (std::get<Algorithm>(other_key) == algorithm && std::get<int>(other_key) == bucket) {
      other.scaled = 0;
    }
  }
}

double Calibration::CloseEpoch() {
  struct Shift {
    Key key;
    int added = 0;
    double factor = 1;
  };
  std::map<int, Shift> shifts;  // by bucket
  double largest_move = 1;
  for (const auto& [key, adds] : added_this_epoch_) {
    if (adds.added < kOwnSamples) continue;
    const std::deque<double>& values = ratios_.at(key).values;
    const int added = std::min(adds.added, static_cast<int>(values.size()));
    const double epoch_median = Median(std::vector<double>(values.end() - added, values.end()));
    if (!adds.median_before.has_value()) {
      // Measured for the first time since a shift or ever: against what it was expected to take,
      // a guess or other plans' ratios whose model error it need not share (Halving-Doubling's
      // streamed exchanges took 1.5x the model over TCP, Ring 1.05x), so only beyond
      // kShiftFactor is it a move, and never a shift. Without it a link that slowed as the policy
      // turned to an unmeasured plan went unseen for an epoch (cluster.slowdown: Ring's first
      // epoch at 3.5x the others, the move seen an epoch later).
      if (!adds.expected_before.has_value()) continue;
      const double move = epoch_median / *adds.expected_before;
      if (std::isfinite(move) && (move >= kShiftFactor || move <= 1 / kShiftFactor)) {
        largest_move = std::max({largest_move, move, 1 / move});
      }
      continue;
    }
    const double factor = epoch_median / *adds.median_before;
    if (factor > 0 && std::isfinite(factor))
      largest_move = std::max({largest_move, factor, 1 / factor});
    if (factor < kShiftFactor && factor > 1 / kShiftFactor) continue;
    const int bucket = std::get<int>(key);
    auto found = shifts.find(bucket);
    if (found == shifts.end() || added > found->second.added) {
      shifts[bucket] = {.key = key, .added = added, .factor = factor};
    }
  }
  for (const auto& [bucket, shift] : shifts) {
    for (auto& [key, ratios] : ratios_) {
      if (std::get<int>(key) != bucket) continue;
      // The epoch's own ratios already measure the changed machine: only older ones are scaled.
      auto adds = added_this_epoch_.find(key);
      const int size = static_cast<int>(ratios.values.size());
      const int fresh = adds == added_this_epoch_.end() ? 0 : std::min(adds->second.added, size);
      if (key == shift.key) {
        ratios.values.erase(ratios.values.begin(), ratios.values.end() - fresh);
        continue;
      }
      for (auto ratio = ratios.values.begin(); ratio != ratios.values.end() - fresh; ++ratio) {
        *ratio *= shift.factor;
      }
      // The algorithm that shifted was just measured: its other regimes' scaled ratios stand
      // unmarked, as UnmarkGuesses leaves them.
      if (std::get<Algorithm>(key) == std::get<Algorithm>(shift.key)) continue;
      ratios.scaled = size - fresh;
    }
    for (auto& [key, ratios] : ratios_) {
      if (std::get<int>(key) == bucket && ratios.scaled > 0 && ratios.measured() >= kOwnSamples) {
        UnmarkGuesses(key);
      }
    }
  }
  added_this_epoch_.clear();
  return largest_move;
}

std::optional<double> Calibration::PlanPoolMedian(int bucket, CalibrationRegime regime) const {
  std::vector<double> pool;
  for (const auto& [key, ratios] : ratios_) {
    const auto& [algorithm, key_bucket, key_regime] = key;
    if (algorithm == Algorithm::kNative || key_bucket != bucket || key_regime != regime) continue;
    pool.insert(pool.end(), ratios.values.begin(), ratios.values.end());
  }
  if (pool.empty()) return std::nullopt;
  return Median(std::move(pool));
}

double Calibration::Factor(Algorithm algorithm, int64_t bytes, CalibrationRegime regime) const {
  const int bucket = Bucket(bytes);
  auto it = ratios_.find({algorithm, bucket, regime});
  // Its own ratios: measured often enough, or a shift's guesses (better than any pool).
  if (it != ratios_.end() && (it->second.measured() >= kOwnSamples || it->second.scaled > 0)) {
    return Median(std::vector<double>(it->second.values.begin(), it->second.values.end()));
  }
  // Too few of its own. The library's own AllReduce is another program, priced as Ring only for
  // want of its own model: its error is its own (OpenMPI's TCP Allreduce took 1.5x our Ring plan
  // on emulated hosts), so it takes its own few samples, and never joins our plans' pool. A plan
  // takes the ratio pooled over our plans on this size when that is below 1: their model error is
  // mostly shared, and a link faster than the probe found is faster for every plan. Above 1 the
  // pool may be one plan's own trouble (Halving-Doubling's streamed exchanges took 1.5x the model
  // over TCP, Ring 1.05x), which would price an unmeasured plan out of ever being tried: it takes
  // the raw model instead, is chosen where that says it is fastest, and is measured then (every
  // call of an epoch is a sample), once per size and regime.
  std::vector<double> native, plans;
  for (const auto& [key, ratios] : ratios_) {
    if (std::get<int>(key) != bucket) continue;
    std::vector<double>& pool = std::get<Algorithm>(key) == Algorithm::kNative ? native : plans;
    pool.insert(pool.end(), ratios.values.begin(), ratios.values.end());
  }
  if (algorithm == Algorithm::kNative && !native.empty()) return Median(std::move(native));
  return plans.empty() ? 1 : std::min(1.0, Median(std::move(plans)));
}

int Calibration::Samples(Algorithm algorithm, int64_t bytes, CalibrationRegime regime) const {
  auto it = ratios_.find({algorithm, Bucket(bytes), regime});
  return it == ratios_.end() ? 0 : it->second.measured();
}

bool Calibration::Guessed(Algorithm algorithm, int64_t bytes, CalibrationRegime regime) const {
  auto it = ratios_.find({algorithm, Bucket(bytes), regime});
  return it != ratios_.end() && it->second.scaled > 0;
}

nlohmann::json Calibration::ToJson() const {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, ratios] : ratios_) {
    const auto& [algorithm, bucket, regime] = key;
    const std::vector<double> values(ratios.values.begin(), ratios.values.end());
    const double factor = Median(values);
    std::vector<double> deviations;
    for (double value : values) deviations.push_back(std::abs(value - factor));
    const std::string name = absl::StrCat(
        AlgorithmName(algorithm), regime == CalibrationRegime::kPhaseHidden ? kHiddenSuffix : "");
    json[name][std::to_string(bucket)] = {{"factor", factor},
                                          {"error", factor > 0 ? Median(deviations) / factor : 0.0},
                                          {"samples", values.size()},
                                          {"ratios", values}};
    if (ratios.scaled > 0) json[name][std::to_string(bucket)]["scaled"] = ratios.scaled;
  }
  return json;
}

absl::Status Calibration::FromJson(const nlohmann::json& json) {
  if (!json.is_object()) return absl::InvalidArgumentError("calibration: expected an object");
  std::map<Key, Ratios> parsed;
  for (const auto& [name, buckets] : json.items()) {
    absl::string_view algorithm_name = name;
    const CalibrationRegime regime = absl::ConsumeSuffix(&algorithm_name, kHiddenSuffix)
                                         ? CalibrationRegime::kPhaseHidden
                                         : CalibrationRegime::kPhaseExposed;
    absl::StatusOr<Algorithm> algorithm = ParseAlgorithm(algorithm_name);
    if (!algorithm.ok()) return algorithm.status();
    if (!buckets.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("calibration: ", name, ": expected an object"));
    }
    for (const auto& [bucket_text, entry] : buckets.items()) {
      int bucket = 0;
      if (!absl::SimpleAtoi(bucket_text, &bucket) || bucket < 0 || bucket > 62) {
        return absl::InvalidArgumentError(
            absl::StrCat("calibration: ", name, ": bad size bucket \"", bucket_text, "\""));
      }
      if (!entry.is_object() || !entry.contains("ratios") || !entry["ratios"].is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat("calibration: ", name, "/", bucket, ": missing \"ratios\""));
      }
      Ratios& ratios = parsed[{*algorithm, bucket, regime}];
      for (const nlohmann::json& ratio : entry["ratios"]) {
        if (!ratio.is_number() || !(ratio.get<double>() > 0) ||
            !std::isfinite(ratio.get<double>())) {
          return absl::InvalidArgumentError(
              absl::StrCat("calibration: ", name, "/", bucket, ": ratios must be positive"));
        }
        ratios.values.push_back(ratio.get<double>());
      }
      if (entry.contains("scaled")) {
        const nlohmann::json& scaled = entry["scaled"];
        if (!scaled.is_number_integer() || scaled.get<int64_t>() < 0 ||
            scaled.get<int64_t>() > static_cast<int64_t>(ratios.values.size())) {
          return absl::InvalidArgumentError(absl::StrCat(
              "calibration: ", name, "/", bucket, ": \"scaled\" must count some of its ratios"));
        }
        ratios.scaled = scaled.get<int>();
      }
      while (static_cast<int>(ratios.values.size()) > kSamplesKept) {
        ratios.values.pop_front();
        ratios.scaled = std::max(0, ratios.scaled - 1);
      }
    }
  }
  ratios_ = std::move(parsed);
  // As Add would have left them: an algorithm measured often enough holds no guesses.
  for (auto& [key, ratios] : ratios_) {
    if (ratios.scaled > 0 && ratios.measured() >= kOwnSamples) UnmarkGuesses(key);
  }
  added_this_epoch_.clear();
  return absl::OkStatus();
}

}  // namespace stragglar
