#include "tools/pipeline_job.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/units.h"
#include "pipeline/links/link_profiler.h"

namespace stragglar {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

// Messages into one stage from one neighbour, delivered in the order sent (a stage sends its
// micro-batches in order), each not before its delivery time.
class Mailbox {
 public:
  void Send(Clock::time_point deliver_at) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(deliver_at);
    ready_.notify_all();
  }
  void Receive() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [this] { return !queue_.empty(); });
    const Clock::time_point deliver_at = queue_.front();
    queue_.pop_front();
    lock.unlock();
    std::this_thread::sleep_until(deliver_at);
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Clock::time_point> queue_;
};

struct StageRecord {
  std::vector<std::pair<Link, double>> sent;  // (link, transfer seconds)
  double forward_s = 0, backward_s = 0;       // measured totals
};

// One iteration: every stage's thread runs its order; returns the wall time.
double RunIteration(const PipelineJobOptions& options, const std::vector<int>& warmup, bool delayed,
                    std::vector<StageRecord>& records) {
  const PipelineSpec& spec = options.spec;
  const int stages = spec.stages();
  std::vector<Mailbox> activations(stages), gradients(stages);
  records.assign(stages, {});
  const double base_s = options.activation_bytes / options.bandwidth_bytes_per_s;
  const auto send = [&](int from, int to, Mailbox& box, StageRecord& record) {
    const double seconds = base_s + (delayed ? spec.link_delay_s[std::min(from, to)] : 0);
    box.Send(Clock::now() +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
    record.sent.emplace_back(Link{from, to}, seconds);
  };
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < stages; ++i) {
    threads.emplace_back([&, i] {
      StageRecord& record = records[i];
      for (const PipelineOp& op : StageOrder(spec.microbatches, warmup[i])) {
        if (op.forward && i > 0) activations[i].Receive();
        if (!op.forward && i + 1 < stages) gradients[i].Receive();
        const Clock::time_point begin = Clock::now();
        std::this_thread::sleep_for(
            std::chrono::duration<double>(op.forward ? spec.forward_s[i] : spec.backward_s[i]));
        (op.forward ? record.forward_s : record.backward_s) += Seconds(Clock::now() - begin);
        if (op.forward && i + 1 < stages) send(i, i + 1, activations[i + 1], record);
        if (!op.forward && i > 0) send(i, i - 1, gradients[i - 1], record);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return Seconds(Clock::now() - start);
}

}  // namespace

absl::StatusOr<PipelineJobReport> RunPipelineJob(const PipelineJobOptions& options,
                                                 std::ostream& progress) {
  if (absl::Status valid = ValidatePipelineSpec(options.spec); !valid.ok()) return valid;
  if (options.iterations < 1) return absl::InvalidArgumentError("need at least 1 iteration");
  const PipelineSpec& spec = options.spec;
  absl::StatusOr<std::unique_ptr<LinkProfiler>> profiler =
      LinkProfiler::Create({.stages = spec.stages(),
                            .comm = kPipelineComm,
                            .metrics = options.metrics,
                            .advice_file = options.advice_file,
                            .memory_microbatches = options.memory_microbatches});
  if (!profiler.ok()) return profiler.status();
  std::vector<int> warmup = DefaultWarmup(spec, options.memory_microbatches);
  PipelineJobReport report;
  std::vector<StageRecord> records;
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    const bool delayed = iteration + 1 >= options.delay_from;
    const double seconds = RunIteration(options, warmup, delayed, records);
    report.iteration_s.push_back(seconds);
    report.warmup.push_back(warmup);
    // What the stages measured: their times and their transfers.
    PipelineSpec measured = spec;
    for (int i = 0; i < spec.stages(); ++i) {
      measured.forward_s[i] = records[i].forward_s / spec.microbatches;
      measured.backward_s[i] = records[i].backward_s / spec.microbatches;
      for (const auto& [link, transfer_s] : records[i].sent) {
        (*profiler)->Record(
            {.link = link, .bytes = options.activation_bytes, .seconds = transfer_s});
      }
    }
    const absl::StatusOr<LinkEpoch> epoch = (*profiler)->EndEpoch(&measured);
    if (!epoch.ok()) return epoch.status();
    std::string line =
        absl::StrCat("iteration ", iteration + 1, "/", options.iterations, ": ",
                     FormatSeconds(seconds), ", warm-up ", absl::StrJoin(warmup, " "));
    if (epoch->advice.has_value()) {
      const PipelineAdvice& a = *epoch->advice;
      if (report.named_at < 0) report.named_at = iteration + 1;
      absl::StrAppend(&line, "; slow link ", a.slow_link.src, "->", a.slow_link.dst, " (",
                      FormatSeconds(a.delay_s), " late): advice ", absl::StrJoin(a.warmup, " "));
      if (options.apply_advice) warmup = a.warmup;
      report.advice = a;
    }
    progress << line << "\n" << std::flush;
  }
  return report;
}

}  // namespace stragglar
