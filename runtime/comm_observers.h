// The observers of one communicator (metrics, traces), and the recorder among them whose rows make
// a preload library's end-of-run trace and summary.
#pragma once

#include <memory>
#include <vector>

#include "exporters/observer.h"
#include "exporters/trace_recorder.h"

namespace stragglar {

class CommObservers {
 public:
  void Add(std::shared_ptr<CollectiveObserver> observer) {
    observers_.push_back(std::move(observer));
  }
  void SetRecorder(std::shared_ptr<TraceRecorder> recorder) {
    recorder_ = recorder;
    if (recorder != nullptr) observers_.push_back(std::move(recorder));
  }
  const std::shared_ptr<TraceRecorder>& recorder() const { return recorder_; }
  const std::vector<std::shared_ptr<CollectiveObserver>>& all() const { return observers_; }

 private:
  std::vector<std::shared_ptr<CollectiveObserver>> observers_;
  std::shared_ptr<TraceRecorder> recorder_;
};

}  // namespace stragglar
