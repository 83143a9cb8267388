#include "profiler/cupti_launches.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <array>

namespace stragglar::gpu_timer_internal {
namespace {

// Per-thread state read by the launch callbacks, which fire for every launch in the process.
struct ThreadState {
  const LaunchSink* timer = nullptr;  // the timer of the open ticket
  uint64_t ticket = 0;                // this thread's open ticket (Begin..End), 0 when none
  int runtime_launch_depth = 0;  // inside a runtime launch: its nested driver launch is the same
};
thread_local ThreadState t_thread;

constexpr std::array<CUpti_CallbackId, 6> kDriverLaunches = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};
// Kernels launched through the runtime (<<<>>>, cudaLaunchKernel*: our own reduction kernels).
constexpr std::array<CUpti_CallbackId, 6> kRuntimeLaunches = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
};

void CUPTIAPI OnApiCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* cbdata) {
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  ThreadState& thread = t_thread;
  bool enter = data->callbackSite == CUPTI_API_ENTER;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    // A runtime launch may reach the driver's launch entry points inside it: count it once, as
    // the runtime call (whose correlation id its kernel record carries).
    if (enter) {
      if (thread.runtime_launch_depth++ > 0) return;
    } else {
      if (thread.runtime_launch_depth == 0) return;  // entered before we subscribed
      if (--thread.runtime_launch_depth > 0) return;
    }
  } else if (domain != CUPTI_CB_DOMAIN_DRIVER_API || thread.runtime_launch_depth > 0) {
    return;
  }
  auto* timer = static_cast<LaunchSink*>(userdata);
  if (enter) {
    if (thread.ticket != 0 && thread.timer == timer) {
      timer->OnLaunchEnter(thread.ticket, data->correlationId);
    }
    return;
  }
  // Exit: a launch that failed produces no record; stop waiting for it.
  bool failed = domain == CUPTI_CB_DOMAIN_RUNTIME_API
                    ? *static_cast<const cudaError_t*>(data->functionReturnValue) != cudaSuccess
                    : *static_cast<const CUresult*>(data->functionReturnValue) != CUDA_SUCCESS;
  if (failed && thread.ticket != 0 && thread.timer == timer) {
    timer->OnLaunchFailed(data->correlationId);
  }
}

}  // namespace

bool SubscribeToLaunches(const CuptiApi& api, LaunchSink* sink, CUpti_SubscriberHandle* subscriber,
                         std::string* why) {
  if (CUptiResult r = api.subscribe(subscriber, &OnApiCallback, sink); r != CUPTI_SUCCESS) {
    *subscriber = nullptr;
    *why = api.Error("cuptiSubscribe", r);
    return false;
  }
  for (CUpti_CallbackId cbid : kDriverLaunches) {
    if (CUptiResult r = api.enable_callback(1, *subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
        r != CUPTI_SUCCESS) {
      *why = api.Error("cuptiEnableCallback", r);
      return false;
    }
  }
  for (CUpti_CallbackId cbid : kRuntimeLaunches) {
    if (CUptiResult r = api.enable_callback(1, *subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
        r != CUPTI_SUCCESS) {
      *why = api.Error("cuptiEnableCallback", r);
      return false;
    }
  }
  return true;
}

void OpenTicketOnThread(const LaunchSink* sink, uint64_t ticket) {
  t_thread = ThreadState{sink, ticket, t_thread.runtime_launch_depth};
}

void CloseTicketOnThread(const LaunchSink* sink, uint64_t ticket) {
  if (t_thread.ticket == ticket && t_thread.timer == sink) t_thread.ticket = 0;
}

void ForgetSinkOnThread(const LaunchSink* sink) {
  if (t_thread.timer == sink) t_thread = ThreadState{nullptr, 0, t_thread.runtime_launch_depth};
}

}  // namespace stragglar::gpu_timer_internal
