// Attributes kernel launches to the GPU call timer's open calls through CUPTI's API callbacks: a
// launch belongs to the ticket open on the launching thread (Begin..End), and its correlation id
// ties it to the kernel record CUPTI delivers later (cupti_buffers.h).
#pragma once

#include <cstdint>
#include <string>

#include "profiler/cupti_api.h"

namespace stragglar::gpu_timer_internal {

// Told about the launches made while one of its tickets is open on the launching thread, from
// inside the launch (CUPTI's callback): it must not call CUDA or CUPTI.
class LaunchSink {
 public:
  virtual ~LaunchSink() = default;
  virtual void OnLaunchEnter(uint64_t ticket, uint32_t correlation_id) = 0;
  // The launch returned an error: it produces no kernel record.
  virtual void OnLaunchFailed(uint32_t correlation_id) = 0;
};

// Subscribes `sink` to CUPTI's API callbacks and enables those of every kernel launch entry point
// (driver and runtime). False with `*why` naming the failed CUPTI call otherwise; `*subscriber` is
// null when the subscription itself failed, and the caller's to unsubscribe when it is not.
bool SubscribeToLaunches(const CuptiApi& api, LaunchSink* sink, CUpti_SubscriberHandle* subscriber,
                         std::string* why);

// Makes `ticket` of `sink` the calling thread's open ticket: the thread's launches go to `sink`.
void OpenTicketOnThread(const LaunchSink* sink, uint64_t ticket);
// Closes `ticket` of `sink` when it is the calling thread's open ticket.
void CloseTicketOnThread(const LaunchSink* sink, uint64_t ticket);
// Forgets `sink` on the calling thread, which keeps counting its runtime launches (`sink` is being
// destroyed).
void ForgetSinkOnThread(const LaunchSink* sink);

}  // namespace stragglar::gpu_timer_internal
