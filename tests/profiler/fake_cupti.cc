// A stand-in for libcupti, loaded by the GPU timer in place of the real one (see
// dlopen_shim.c): it records what the timer enabled, fails the step a test names, and delivers
// made-up kernel records through the timer's buffer callbacks. It lets a machine without a GPU
// check the CUPTI set-up, the undoing of a failed set-up, and the record plumbing.
#include <cupti.h>

#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

std::mutex mu;
std::string fail_function;  // the function that fails, with fail_result
CUptiResult fail_result = CUPTI_SUCCESS;
std::map<std::string, int> calls;
bool subscribed = false;
CUpti_CallbackFunc api_callback = nullptr;
void* api_userdata = nullptr;
std::set<std::pair<int, int>> enabled_callbacks;  // (domain, cbid)
std::set<int> enabled_kinds;
CUpti_BuffersCallbackRequestFunc buffer_requested = nullptr;
CUpti_BuffersCallbackCompleteFunc buffer_completed = nullptr;
CUpti_TimestampCallbackFunc timestamp_callback = nullptr;
std::vector<CUpti_ActivityKernel10> pending;  // records the next flush delivers
int buffers_completed = 0;

// Counts the call; the result a test asked this function to fail with, or success.
CUptiResult Enter(const char* name) {
  ++calls[name];
  return fail_function == name ? fail_result : CUPTI_SUCCESS;
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  switch (result) {
    case CUPTI_SUCCESS:
      *str = "CUPTI_SUCCESS";
      return CUPTI_SUCCESS;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      return CUPTI_SUCCESS;
    case CUPTI_ERROR_UNKNOWN:
      *str = "CUPTI_ERROR_UNKNOWN";
      return CUPTI_SUCCESS;
    default:
      return CUPTI_ERROR_INVALID_PARAMETER;
  }
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
  std::lock_guard<std::mutex> lock(mu);
  if (CUptiResult r = Enter("cuptiSubscribe"); r != CUPTI_SUCCESS) return r;
  if (subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  subscribed = true;
  api_callback = callback;
  api_userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&subscribed);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard<std::mutex> lock(mu);
  if (CUptiResult r = Enter("cuptiUnsubscribe"); r != CUPTI_SUCCESS) return r;
  if (!subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&subscribed)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  subscribed = false;
  api_callback = nullptr;
  enabled_callbacks.clear();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(mu);
  if (CUptiResult r = Enter("cuptiEnableCallback"); r != CUPTI_SUCCESS) return r;
  if (!subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
  if (enable) {
    enabled_callbacks.insert({domain, static_cast<int>(cbid)});
  } else {
    enabled_callbacks.erase({domain, static_cast<int>(cbid)});
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(mu);
  if (CUptiResult r = Enter("cuptiActivityEnable"); r != CUPTI_SUCCESS) return r;
  enabled_kinds.insert(kind);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(mu);
  if (CUptiResult r = Enter("cuptiActivityDisable"); r != CUPTI_SUCCESS) return r;
  enabled_kinds.erase(kind);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                    CUpti_BuffersCallbackCompleteFunc completed) {
  std::lock_guard<std::mutex> lock(mu);
  if (CUptiResult r = Enter("cuptiActivityRegisterCallbacks"); r != CUPTI_SUCCESS) return r;
  buffer_requested = requested;
  buffer_completed = completed;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc callback) {
  std::lock_guard<std::mutex> lock(mu);
  if (CUptiResult r = Enter("cuptiActivityRegisterTimestampCallback"); r != CUPTI_SUCCESS) {
    return r;
  }
  timestamp_callback = callback;
  return CUPTI_SUCCESS;
}

// Records lie back to back in the buffer, each a CUpti_ActivityKernel10.
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid_bytes,
                                                CUpti_Activity** record) {
  uint8_t* next = *record == nullptr
                      ? buffer
                      : reinterpret_cast<uint8_t*>(*record) + sizeof(CUpti_ActivityKernel10);
  if (next + sizeof(CUpti_ActivityKernel10) > buffer + valid_bytes) {
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  }
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

// Delivers the pending records in one buffer (outside the lock, as CUPTI calls back).
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  std::vector<CUpti_ActivityKernel10> records;
  CUpti_BuffersCallbackRequestFunc requested;
  CUpti_BuffersCallbackCompleteFunc completed;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (CUptiResult r = Enter("cuptiActivityFlushAll"); r != CUPTI_SUCCESS) return r;
    if (buffer_requested == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
    records.swap(pending);
    requested = buffer_requested;
    completed = buffer_completed;
  }
  if (records.empty()) return CUPTI_SUCCESS;
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  requested(&buffer, &size, &max_records);
  size_t bytes = records.size() * sizeof(CUpti_ActivityKernel10);
  if (buffer == nullptr || size < bytes) return CUPTI_ERROR_UNKNOWN;
  std::memcpy(buffer, records.data(), bytes);
  completed(nullptr, 0, buffer, size, bytes);
  std::lock_guard<std::mutex> lock(mu);
  ++buffers_completed;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  std::lock_guard<std::mutex> lock(mu);
  if (CUptiResult r = Enter("cuptiGetTimestamp"); r != CUPTI_SUCCESS) return r;
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);  // what the real one uses by default on Linux
  *timestamp = static_cast<uint64_t>(now.tv_sec) * 1000000000u + now.tv_nsec;
  return CUPTI_SUCCESS;
}

// ---- Controls for the tests (found with dlsym) ----

// Makes `function` return `result` from now on; "" fails nothing.
void fake_cupti_fail(const char* function, int result) {
  std::lock_guard<std::mutex> lock(mu);
  fail_function = function;
  fail_result = static_cast<CUptiResult>(result);
}

// "subscribed", "driver_callbacks", "runtime_callbacks", "kernel_activity", "buffer_callbacks",
// "timestamp_callback", "buffers_completed", or the name of a CUPTI function: how many calls.
long fake_cupti_count(const char* what) {
  std::lock_guard<std::mutex> lock(mu);
  std::string key = what;
  auto in_domain = [](CUpti_CallbackDomain domain) {
    long n = 0;
    for (const auto& [d, cbid] : enabled_callbacks) n += d == domain;
    return n;
  };
  if (key == "subscribed") return subscribed;
  if (key == "driver_callbacks") return in_domain(CUPTI_CB_DOMAIN_DRIVER_API);
  if (key == "runtime_callbacks") return in_domain(CUPTI_CB_DOMAIN_RUNTIME_API);
  if (key == "kernel_activity") return enabled_kinds.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (key == "buffer_callbacks") return buffer_requested != nullptr;
  if (key == "timestamp_callback") return timestamp_callback != nullptr;
  if (key == "buffers_completed") return buffers_completed;
  auto it = calls.find(key);
  return it == calls.end() ? 0 : it->second;
}

// The timestamp CUPTI would put in records: the registered callback's, 0 without one.
uint64_t fake_cupti_timestamp() {
  CUpti_TimestampCallbackFunc callback;
  {
    std::lock_guard<std::mutex> lock(mu);
    callback = timestamp_callback;
  }
  return callback != nullptr ? callback() : 0;
}

// Queues a kernel record for the next cuptiActivityFlushAll.
void fake_cupti_add_kernel(uint32_t correlation_id, uint64_t start, uint64_t end) {
  CUpti_ActivityKernel10 record;
  std::memset(&record, 0, sizeof record);
  record.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  record.start = start;
  record.end = end;
  record.correlationId = correlation_id;
  std::lock_guard<std::mutex> lock(mu);
  pending.push_back(record);
}

// Calls the subscriber's callback as a launch API would, at its entry (site 0) or exit (1).
int fake_cupti_api_callback(int domain, int cbid, int exit, uint32_t correlation_id, int result) {
  CUpti_CallbackFunc callback;
  void* userdata;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (enabled_callbacks.count({domain, cbid}) == 0) return 0;
    callback = api_callback;
    userdata = api_userdata;
  }
  CUpti_CallbackData data;
  std::memset(&data, 0, sizeof data);
  data.callbackSite = exit ? CUPTI_API_EXIT : CUPTI_API_ENTER;
  data.functionName = "fake";
  data.correlationId = correlation_id;
  int return_value = result;  // cudaError_t and CUresult are both int-sized enums
  data.functionReturnValue = &return_value;
  callback(userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, &data);
  return 1;
}

}  // extern "C"
