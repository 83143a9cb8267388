// An emulated device for the device executor's tests: the kernel's control code
// (kernels/exec/device/device_rank.h) with CPU threads as CTAs.
//  - CpuCta: the platform of one CTA, a thread. Waits spin (yielding) on acquire loads and
//    honour a DeviceWatch as the GPU's do (the abort word, the timeout, the failure record);
//    posts are release stores. With `jitter`, a CTA sometimes pauses before it moves data, so
//    that a missing wait shows.
//  - CpuStream and CpuLauncher: kernel launches run in order on a worker thread per stream, each
//    as one thread per CTA, and the launch returns at once, as on a GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "kernels/exec/device/device_executor.h"
#include "kernels/exec/device/device_rank.h"
#include "kernels/exec/device/device_watch.h"
#include "kernels/reduce/reduce_element.h"

namespace stragglar {

// A wait given up on: for the `transfers`-th ready signal of `peer`, or its `transfers`-th read of
// this rank's window.
struct GaveUp {
  int32_t peer = -1;  // -1: nothing was given up on
  uint32_t transfers = 0;
  bool read = false;
  DeviceGiveUp reason = DeviceGiveUp::kNone;  // kNone: the test's own deadline
};

struct CpuCtaOptions {
  absl::Time give_up_at = absl::InfiniteFuture();  // the test's own deadline, for every wait
  const DeviceWatch* watch = nullptr;              // the executor's, as the GPU honours it
  uint64_t seed = 1;
  bool jitter = false;
  const uint64_t* read_slots = nullptr;  // where the read half of this rank's signals begins
};

template <typename Codec, DeviceFault kPlanted = DeviceFault::kNone>
class CpuCta {
 public:
  using Storage = typename Codec::Storage;
  static constexpr DeviceFault kFault = kPlanted;

  explicit CpuCta(const CpuCtaOptions& options) : options_(options), random_(options.seed) {}

  bool Wait(uint64_t* signal, uint64_t awaited, int32_t peer) {
    std::atomic_ref<uint64_t> word(*signal);
    const absl::Time started = absl::Now();
    while (true) {
      const SignalState state = CheckSignal(word.load(std::memory_order_acquire), awaited);
      if (state == SignalState::kReached) return true;
      const DeviceGiveUp reason =
          state == SignalState::kOutOfStep ? DeviceGiveUp::kOutOfStep : WhyGiveUp(started);
      if (reason != DeviceGiveUp::kNone || absl::Now() > options_.give_up_at) {
        gave_up_ = {.peer = peer,
                    .transfers = static_cast<uint32_t>(awaited),
                    .read = signal >= options_.read_slots,
                    .reason = reason};
        if (reason != DeviceGiveUp::kNone && options_.watch != nullptr) {
          Record(reason, peer, awaited >> 32);
        }
        return false;
      }
      std::this_thread::yield();
    }
  }
  void Sync() {}  // one thread per CTA
  bool Stopped() const {
    const DeviceWatch* watch = options_.watch;
    return watch != nullptr && (std::atomic_ref<uint32_t>(*watch->claim).load() != 0 ||
                                std::atomic_ref<uint32_t>(Abort(*watch)).load() != 0);
  }
  void Post(uint64_t* signal, uint64_t value) {
    std::atomic_ref<uint64_t>(*signal).store(value, std::memory_order_release);
  }
  void Copy(Storage* out, const Storage* in, int64_t elements) {
    Pause();
    std::memmove(out, in, elements * sizeof(Storage));
  }
  template <typename Op>
  void Reduce(Storage* out, const Storage* first, const Storage* second, int64_t elements) {
    Pause();
    for (int64_t i = 0; i < elements; ++i) {
      out[i] = reduce_element::ReduceElement<Codec, Op>(first[i], second[i]);
    }
  }
  void Divide(Storage* out, const Storage* in, int64_t elements, int divisor) {
    for (int64_t i = 0; i < elements; ++i) {
      out[i] = reduce_element::DivideElement<Codec>(in[i], divisor);
    }
  }
  const GaveUp& gave_up() const { return gave_up_; }

 private:
  DeviceGiveUp WhyGiveUp(absl::Time started) const {
    const DeviceWatch* watch = options_.watch;
    if (watch == nullptr) return DeviceGiveUp::kNone;
    if (std::atomic_ref<uint32_t>(Abort(*watch)).load(std::memory_order_acquire) != 0) {
      return DeviceGiveUp::kAborted;
    }
    if (watch->timeout_ns > 0 &&
        absl::Now() - started > absl::Nanoseconds(static_cast<int64_t>(watch->timeout_ns))) {
      return DeviceGiveUp::kTimedOut;
    }
    return DeviceGiveUp::kNone;
  }
  // The host writes the word; the kernel only reads it.
  static uint32_t& Abort(const DeviceWatch& watch) { return *const_cast<uint32_t*>(watch.abort); }
  // As the GPU's: the first CTA to give up claims the record.
  void Record(DeviceGiveUp reason, int32_t peer, uint64_t sequence) {
    uint32_t none = 0;
    if (!std::atomic_ref<uint32_t>(*options_.watch->claim).compare_exchange_strong(none, 1)) {
      return;
    }
    DeviceFailure& failure = *options_.watch->failure;
    std::atomic_ref<uint32_t>(failure.reason)
        .store(static_cast<uint32_t>(reason), std::memory_order_relaxed);
    std::atomic_ref<int32_t>(failure.peer).store(peer, std::memory_order_relaxed);
    std::atomic_ref<uint32_t>(failure.sequence)
        .store(static_cast<uint32_t>(sequence), std::memory_order_relaxed);
    std::atomic_ref<uint32_t>(failure.recorded).store(1, std::memory_order_release);
  }
  void Pause() {
    if (options_.jitter && random_() % 4 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  const CpuCtaOptions options_;
  std::mt19937_64 random_;
  GaveUp gave_up_;
};

// Work enqueued on a stream runs in order on the stream's own thread.
class CpuStream {
 public:
  CpuStream() : worker_([this] { Work(); }) {}
  ~CpuStream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }
  void Enqueue(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(work));
    }
    changed_.notify_all();
  }
  // Waits until everything enqueued so far has run (cudaStreamSynchronize).
  void Synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && !running_; });
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      work();
      lock.lock();
      running_ = false;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

// Launches on a CpuStream (the `stream` argument): one thread per CTA, joined before the
// stream's next work starts.
class CpuLauncher final : public DeviceLauncher {
 public:
  // One stream per rank in the tests: stream order is launch order.
  absl::Status Launch(DataType type, ReduceOp op, const DeviceProgramView& program,
                      const DeviceCall& call, const DeviceWatch& watch, int ctas, void* stream,
                      void**) override {
    static_cast<CpuStream*>(stream)->Enqueue([=] {
      std::vector<std::thread> threads;
      for (int cta = 0; cta < ctas; ++cta) {
        threads.emplace_back([&, cta] {
          reduce_element::DispatchOnType(type, [&]<typename Codec>(reduce_element::Tag<Codec>) {
            reduce_element::DispatchOnOp(op, [&]<typename Op>(reduce_element::Tag<Op>) {
              CpuCta<Codec> platform({.watch = &watch, .seed = static_cast<uint64_t>(cta)});
              RunDeviceRank<Codec, Op>(platform, program, call, cta, ctas);
            });
          });
        });
      }
      for (std::thread& thread : threads) thread.join();
    });
    return absl::OkStatus();
  }
};

}  // namespace stragglar
