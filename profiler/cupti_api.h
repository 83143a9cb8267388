// libcupti, loaded with dlopen and reached through dlsym: the GPU call timer never links it, so a
// program using the timer runs where CUPTI is missing (and falls back to CUDA events).
#pragma once

// CUPTI headers for types, enums and prototypes only: every CUPTI function is reached through
// dlsym, so this library never links libcupti.
#include <cupti.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>

#include <string>

#include "absl/strings/string_view.h"

namespace stragglar::gpu_timer_internal {

// The CUPTI functions the timer calls.
struct CuptiApi {
  decltype(&cuptiGetResultString) get_result_string = nullptr;  // optional
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) activity_register_callbacks = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp_callback =
      nullptr;  // optional (CUDA 12.x+)
  decltype(&cuptiActivityGetNextRecord) activity_get_next_record = nullptr;
  decltype(&cuptiActivityFlushAll) activity_flush_all = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;

  // "<call>: <CUPTI's name for result>", or its number when libcupti has no name for it.
  std::string Error(absl::string_view call, CUptiResult result) const;
};

// Loads libcupti once per process; the handle is never closed (CUPTI does not support being
// unloaded). Returns null with `*error` set when it cannot be loaded; later calls give the same.
const CuptiApi* LoadCupti(std::string* error);

}  // namespace stragglar::gpu_timer_internal
