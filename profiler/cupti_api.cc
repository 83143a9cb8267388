#include "profiler/cupti_api.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"

#ifndef STRAGGLAR_CUPTI_LIBRARY
#define STRAGGLAR_CUPTI_LIBRARY ""
#endif

namespace stragglar::gpu_timer_internal {

std::string CuptiApi::Error(absl::string_view call, CUptiResult result) const {
  const char* text = nullptr;
  if (get_result_string != nullptr && get_result_string(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return absl::StrCat(call, ": ", text);
  }
  return absl::StrCat(call, ": CUPTI error ", static_cast<int>(result));
}

const CuptiApi* LoadCupti(std::string* error) {
  static std::mutex* mu = new std::mutex;
  static const CuptiApi* api = nullptr;
  static std::string* load_error = nullptr;
  std::lock_guard<std::mutex> lock(*mu);
  if (api != nullptr) return api;
  if (load_error != nullptr) {
    *error = *load_error;
    return nullptr;
  }
  void* handle = nullptr;
  std::string tried;
  std::vector<std::string> names = {"libcupti.so.13", "libcupti.so"};
  if (std::string(STRAGGLAR_CUPTI_LIBRARY).size() > 0) names.push_back(STRAGGLAR_CUPTI_LIBRARY);
  for (const std::string& name : names) {
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* why = dlerror();
    if (tried.empty()) absl::StrAppend(&tried, "dlopen: ", why != nullptr ? why : name);
  }
  if (handle == nullptr) {
    load_error = new std::string(tried.empty() ? "dlopen: no libcupti" : tried);
    *error = *load_error;
    return nullptr;
  }
  auto* loaded = new CuptiApi;
  std::string missing;
  auto resolve = [&](auto& fn, const char* name, bool required) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr && required && missing.empty()) missing = name;
  };
  resolve(loaded->get_result_string, "cuptiGetResultString", false);
  resolve(loaded->subscribe, "cuptiSubscribe", true);
  resolve(loaded->unsubscribe, "cuptiUnsubscribe", true);
  resolve(loaded->enable_callback, "cuptiEnableCallback", true);
  resolve(loaded->activity_enable, "cuptiActivityEnable", true);
  resolve(loaded->activity_disable, "cuptiActivityDisable", true);
  resolve(loaded->activity_register_callbacks, "cuptiActivityRegisterCallbacks", true);
  resolve(loaded->register_timestamp_callback, "cuptiActivityRegisterTimestampCallback", false);
  resolve(loaded->activity_get_next_record, "cuptiActivityGetNextRecord", true);
  resolve(loaded->activity_flush_all, "cuptiActivityFlushAll", true);
  resolve(loaded->get_timestamp, "cuptiGetTimestamp", true);
  if (!missing.empty()) {
    delete loaded;
    load_error = new std::string(absl::StrCat("dlsym: libcupti has no ", missing));
    *error = *load_error;
    return nullptr;
  }
  api = loaded;
  return api;
}

}  // namespace stragglar::gpu_timer_internal
