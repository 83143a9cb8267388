#include "policy/calibration.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "policy/statistics.h"

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
  std::deque<double>& ratios = ratios_[{algorithm, Bucket(bytes), regime}];
  ratios.push_back(measured_s / predicted_s);
  if (static_cast<int>(ratios.size()) > kSamplesKept) ratios.pop_front();
}

double Calibration::Factor(Algorithm algorithm, int64_t bytes, CalibrationRegime regime) const {
  const int bucket = Bucket(bytes);
  auto it = ratios_.find({algorithm, bucket, regime});
  if (it != ratios_.end() && static_cast<int>(it->second.size()) >= kOwnSamples) {
    return Median(std::vector<double>(it->second.begin(), it->second.end()));
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
    pool.insert(pool.end(), ratios.begin(), ratios.end());
  }
  if (algorithm == Algorithm::kNative && !native.empty()) return Median(std::move(native));
  return plans.empty() ? 1 : std::min(1.0, Median(std::move(plans)));
}

int Calibration::Samples(Algorithm algorithm, int64_t bytes, CalibrationRegime regime) const {
  auto it = ratios_.find({algorithm, Bucket(bytes), regime});
  return it == ratios_.end() ? 0 : static_cast<int>(it->second.size());
}

nlohmann::json Calibration::ToJson() const {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, ratios] : ratios_) {
    const auto& [algorithm, bucket, regime] = key;
    const std::vector<double> values(ratios.begin(), ratios.end());
    const double factor = Median(values);
    std::vector<double> deviations;
    for (double value : values) deviations.push_back(std::abs(value - factor));
    const std::string name = absl::StrCat(
        AlgorithmName(algorithm), regime == CalibrationRegime::kPhaseHidden ? kHiddenSuffix : "");
    json[name][std::to_string(bucket)] = {{"factor", factor},
                                          {"error", factor > 0 ? Median(deviations) / factor : 0.0},
                                          {"samples", values.size()},
                                          {"ratios", values}};
  }
  return json;
}

absl::Status Calibration::FromJson(const nlohmann::json& json) {
  if (!json.is_object()) return absl::InvalidArgumentError("calibration: expected an object");
  std::map<Key, std::deque<double>> parsed;
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
      std::deque<double>& ratios = parsed[{*algorithm, bucket, regime}];
      for (const nlohmann::json& ratio : entry["ratios"]) {
        if (!ratio.is_number() || !(ratio.get<double>() > 0) ||
            !std::isfinite(ratio.get<double>())) {
          return absl::InvalidArgumentError(
              absl::StrCat("calibration: ", name, "/", bucket, ": ratios must be positive"));
        }
        ratios.push_back(ratio.get<double>());
      }
      while (static_cast<int>(ratios.size()) > kSamplesKept) ratios.pop_front();
    }
  }
  ratios_ = std::move(parsed);
  return absl::OkStatus();
}

}  // namespace stragglar
