// Ranks as threads for the communicator's tests (communicator_test.cc, communicator_link_test.cc):
// a rendezvous where the k-th collective of every rank meets the k-th of the others, the backend
// that gathers through it, and the comparison of two ranks' (or runs') decisions.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "runtime/communicator.h"

namespace stragglar::testing_threads {

// The k-th collective of every rank meets the k-th of the others.
class Rendezvous {
 public:
  explicit Rendezvous(int ranks) : ranks_(ranks) {}
  void Deposit(int64_t round, int rank, std::vector<double> values) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::vector<double>>& slots = rounds_[round];
    slots.resize(ranks_);
    slots[rank] = std::move(values);
    ++counts_[round];
    changed_.notify_all();
  }
  std::vector<double> Collect(int64_t round) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return counts_[round] == ranks_; });
    std::vector<double> all;
    for (const std::vector<double>& each : rounds_[round]) {
      all.insert(all.end(), each.begin(), each.end());
    }
    return all;
  }

 private:
  const int ranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, std::vector<std::vector<double>>> rounds_;
  std::map<int64_t, int> counts_;
};

// One rank of ranks as threads: the k-th gather of every rank meets the k-th of the others.
class GatheringBackend : public CommBackend {
 public:
  GatheringBackend(int rank, Rendezvous& gathers) : rank_(rank), gathers_(gathers) {}
  double Now() override { return 0; }
  absl::Status StartGather(absl::Span<const double> mine) override {
    gathers_.Deposit(started_++, rank_, {mine.begin(), mine.end()});
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> FinishGather() override {
    return gathers_.Collect(finished_++);
  }

 protected:
  int rank() const { return rank_; }

 private:
  int rank_;
  Rendezvous& gathers_;
  int64_t started_ = 0, finished_ = 0;
};

// The same decision at every call: family, straggler, exploration and predicted time.
inline ::testing::AssertionResult SameDecisions(const std::vector<CallDecision>& a,
                                                const std::vector<CallDecision>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size();
  for (size_t call = 0; call < a.size(); ++call) {
    if (a[call].call != b[call].call || a[call].algorithm != b[call].algorithm ||
        a[call].straggler != b[call].straggler || a[call].explored != b[call].explored ||
        a[call].predicted_s != b[call].predicted_s) {
      return ::testing::AssertionFailure()
             << "call " << call << ": " << AlgorithmName(a[call].algorithm) << " vs "
             << AlgorithmName(b[call].algorithm);
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace stragglar::testing_threads
