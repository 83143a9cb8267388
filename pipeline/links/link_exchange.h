// The preload's link report exchange. Pipeline ranks share no collective call index (each stage
// makes its own sends and receives), so the exchange cannot ride on the user's calls the way
// AllReduce's epoch exchange does. Instead a background thread per rank all-gathers, every
// `interval`, the sides its rank timed since the last exchange, over a channel of stragglar's own
// (in the NCCL preload: TCP between the processes, rank 0's address shared at the communicator's
// creation). The k-th gather of
// every rank is the same collective, so every rank absorbs the same reports in the same order into
// its own LinkProfiler, and names the same slow link and advises the same counts.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pipeline/links/link_profiler.h"
#include "pipeline/links/link_reports.h"

namespace stragglar {

// A blocking all-gather of equal-sized blocks among the ranks, on a channel that is not the
// user's, called from the exchange thread only (pipeline/links/tcp_report_transport.h). Unavailable
// when a peer has gone (the end of a job, said at INFO); other errors are said as warnings.
class ReportTransport {
 public:
  virtual ~ReportTransport() = default;
  // Every rank's block, in rank order. Cancelled after Cancel().
  virtual absl::StatusOr<std::vector<double>> AllGather(absl::Span<const double> mine) = 0;
  // From another thread: a gather in progress returns Cancelled promptly, and so do later ones.
  virtual void Cancel() = 0;
};

struct LinkExchangeOptions {
  int size = 0;     // ranks
  int slots = 256;  // sides per rank per exchange; more wait for the next one
  std::chrono::milliseconds interval{1000};
  // Run first on the exchange thread (e.g. to bind it to the communicator's device before the
  // take callback polls the GPU timer).
  std::function<void()> thread_setup;
};

class LinkExchanger {
 public:
  // This rank's sides whose time is known, at most `max`, each once.
  using TakeSides = std::function<std::vector<TransferSide>(int max)>;

  // Starts the thread. `profiler` is used by that thread only, until Stop() returns.
  LinkExchanger(LinkExchangeOptions options, std::unique_ptr<ReportTransport> transport,
                TakeSides take, LinkProfiler& profiler);
  ~LinkExchanger() { Stop(); }
  LinkExchanger(const LinkExchanger&) = delete;
  LinkExchanger& operator=(const LinkExchanger&) = delete;

  // Cancels the gather in flight (peers that already stopped will never join it) and joins.
  void Stop();
  // Completed exchanges.
  int exchanges() const { return exchanges_.load(); }
  // False once a gather or a report failed: the link profiling of this communicator has ended
  // (logged once, with the reason).
  bool running() const { return running_.load(); }

 private:
  void Loop();
  absl::Status ExchangeOnce();

  LinkExchangeOptions options_;
  std::unique_ptr<ReportTransport> transport_;
  TakeSides take_;
  LinkProfiler& profiler_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<int> exchanges_{0};
  std::atomic<bool> running_{true};
  std::thread thread_;
};

}  // namespace stragglar
