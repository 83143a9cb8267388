#include "tools/pipeline_command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/units.h"
#include "exporters/build_info.h"
#include "exporters/prometheus_exporter.h"
#include "nlohmann/json.hpp"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/pipeline_search.h"
#include "runtime/version.h"
#include "tools/pipeline_job.h"

namespace stragglar {
namespace {

absl::Status Bad(absl::string_view message) { return absl::InvalidArgumentError(message); }

// One time for every stage, or one per stage.
absl::StatusOr<std::vector<double>> StageTimes(absl::string_view flag, absl::string_view text,
                                               int stages) {
  if (text.empty()) return Bad(absl::StrCat("--", flag, " is required"));
  absl::StatusOr<std::vector<double>> parsed = ParseDurationList(text);
  if (!parsed.ok()) return Bad(absl::StrCat("--", flag, ": ", parsed.status().message()));
  std::vector<double> times = *std::move(parsed);
  if (times.size() == 1) times.assign(stages, times[0]);
  if (static_cast<int>(times.size()) != stages) {
    return Bad(absl::StrCat("--", flag, " has ", times.size(), " times for ", stages,
                            " stages (give one, or one per stage)"));
  }
  return times;
}

// "I-J:DELAY" with |I - J| = 1, both stages in range; the delay is the link's, both directions.
absl::Status AddLinkDelay(absl::string_view text, std::vector<double>& delays) {
  const std::vector<absl::string_view> link_delay = absl::StrSplit(text, absl::MaxSplits(':', 1));
  const std::vector<absl::string_view> ends =
      absl::StrSplit(link_delay[0], absl::MaxSplits('-', 1));
  int a = 0, b = 0;
  const std::string usage =
      absl::StrCat("--link-delay \"", text, "\": expected I-J:DELAY, e.g. 3-4:30ms");
  if (link_delay.size() != 2 || ends.size() != 2 || !absl::SimpleAtoi(ends[0], &a) ||
      !absl::SimpleAtoi(ends[1], &b)) {
    return Bad(usage);
  }
  const int stages = static_cast<int>(delays.size()) + 1;
  if (std::abs(a - b) != 1 || std::min(a, b) < 0 || std::max(a, b) >= stages) {
    return Bad(absl::StrCat("--link-delay \"", text, "\": a link joins adjacent stages in [0, ",
                            stages - 1, "]"));
  }
  absl::StatusOr<double> delay = ParseSeconds(link_delay[1]);
  if (!delay.ok()) return Bad(absl::StrCat(usage, " (", delay.status().message(), ")"));
  if (*delay < 0) return Bad(absl::StrCat(usage, " (the delay must not be negative)"));
  delays[std::min(a, b)] += *delay;
  return absl::OkStatus();
}

absl::StatusOr<PipelineSpec> SpecFrom(const PipelineArgs& args) {
  if (!args.stages.has_value()) return Bad("--stages is required");
  if (*args.stages < 2 || *args.stages > 1024) {
    return Bad(absl::StrCat("--stages must be in [2, 1024], got ", *args.stages));
  }
  if (!args.microbatches.has_value()) return Bad("--microbatches is required");
  if (*args.microbatches < 1 || *args.microbatches > 100000) {
    return Bad(absl::StrCat("--microbatches must be in [1, 100000], got ", *args.microbatches));
  }
  if (args.memory_microbatches < 0) {
    return Bad(absl::StrCat("--memory-microbatches must be >= 0 (0: unlimited), got ",
                            args.memory_microbatches));
  }
  PipelineSpec spec;
  spec.microbatches = *args.microbatches;
  absl::StatusOr<std::vector<double>> forward = StageTimes("forward", args.forward, *args.stages);
  if (!forward.ok()) return forward.status();
  absl::StatusOr<std::vector<double>> backward =
      StageTimes("backward", args.backward, *args.stages);
  if (!backward.ok()) return backward.status();
  spec.forward_s = *std::move(forward);
  spec.backward_s = *std::move(backward);
  spec.link_delay_s.assign(*args.stages - 1, 0);
  spec.blocking_sends = args.blocking_sends;
  for (const std::string& text : args.link_delays) {
    if (absl::Status added = AddLinkDelay(text, spec.link_delay_s); !added.ok()) return added;
  }
  return spec;
}

struct Row {
  std::string name;
  std::vector<int> warmup;
  PipelineTiming timing;
};

void PrintTable(const PipelineSpec& spec, const PipelineArgs& args, const std::vector<Row>& rows,
                const WarmupSearchResult& search, std::ostream& out) {
  out << "pipeline: " << spec.stages() << " stages, " << spec.microbatches << " micro-batches, "
      << (args.memory_microbatches > 0
              ? absl::StrCat("memory for ", args.memory_microbatches, " micro-batches per stage")
              : std::string("no memory limit"))
      << "\n";
  if (spec.blocking_sends) out << "sends hold their stage until they arrive (head-of-line)\n";
  for (int i = 0; i + 1 < spec.stages(); ++i) {
    if (spec.link_delay_s[i] > 0) {
      out << "link " << i << "-" << i + 1 << ": " << FormatSeconds(spec.link_delay_s[i])
          << " slow (both directions)\n";
    }
  }
  const double base = rows[0].timing.iteration_s;
  out << absl::StrFormat("%-9s %-12s %-10s %-8s %s\n", "counts", "iteration", "bubble", "speedup",
                         "warm-up forwards per stage");
  for (const Row& row : rows) {
    out << absl::StrFormat(
        "%-9s %-12s %-10s %-8s %s\n", row.name, FormatSeconds(row.timing.iteration_s),
        absl::StrFormat("%.1f%%", 100 * row.timing.bubble_fraction),
        absl::StrFormat("%.2fx", base / row.timing.iteration_s), absl::StrJoin(row.warmup, " "));
  }
  out << "best: " << search.method << " over " << search.evaluated << " schedules; lower bound "
      << FormatSeconds(PipelineLowerBound(spec)) << (search.at_bound ? " (reached: optimal)" : "")
      << "\n";
}

}  // namespace

absl::Status RunPipeline(const PipelineArgs& args, std::ostream& out) {
  absl::StatusOr<PipelineSpec> spec = SpecFrom(args);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<WarmupSearchResult> search = SearchWarmup(*spec, args.memory_microbatches);
  if (!search.ok()) return search.status();
  std::vector<Row> rows;
  for (const auto& [name, warmup] :
       {std::pair{"default", DefaultWarmup(*spec, args.memory_microbatches)},
        std::pair{"adapted", AdaptedWarmup(*spec, args.memory_microbatches)}}) {
    absl::StatusOr<PipelineTiming> timing = SimulatePipeline(*spec, warmup);
    if (!timing.ok()) return timing.status();
    rows.push_back({name, warmup, *std::move(timing)});
  }
  rows.push_back({"best", search->warmup, search->timing});
  if (!args.json) {
    PrintTable(*spec, args, rows, *search, out);
    return absl::OkStatus();
  }
  nlohmann::json json;
  for (const Row& row : rows) {
    json[row.name] = {{"warmup", row.warmup},
                      {"iteration_s", row.timing.iteration_s},
                      {"bubble_fraction", row.timing.bubble_fraction},
                      {"speedup", rows[0].timing.iteration_s / row.timing.iteration_s}};
  }
  json["best"]["method"] = search->method;
  json["best"]["evaluated"] = search->evaluated;
  json["lower_bound_s"] = PipelineLowerBound(*spec);
  out << json.dump(2) << "\n";
  return absl::OkStatus();
}

absl::Status RunPipelineJobCommand(const PipelineArgs& args, const PipelineRunArgs& run,
                                   std::ostream& out) {
  absl::StatusOr<PipelineSpec> spec = SpecFrom(args);
  if (!spec.ok()) return spec.status();
  const int iterations = run.iterations.value_or(16);
  if (iterations < 1 || iterations > 100000) {
    return Bad(absl::StrCat("--iterations must be in [1, 100000], got ", iterations));
  }
  if (run.delay_from < 1)
    return Bad(absl::StrCat("--delay-from must be >= 1, got ", run.delay_from));
  // A path that cannot be written fails now, not after the iterations that name a slow link.
  if (!run.advice_file.empty()) {
    const std::filesystem::path parent = std::filesystem::absolute(run.advice_file).parent_path();
    if (access(parent.c_str(), W_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write the advice file ",
                                                     run.advice_file, ": ", parent.string(), ": ",
                                                     std::strerror(errno)));
    }
  }
  PipelineJobOptions options{.spec = *std::move(spec),
                             .memory_microbatches = args.memory_microbatches,
                             .iterations = iterations,
                             .delay_from = run.delay_from,
                             .activation_bytes = run.activation_bytes,
                             .apply_advice = run.apply_advice,
                             .advice_file = run.advice_file};
  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<MetricsServer> server;
  if (run.metrics_port.has_value()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> started =
        MetricsServer::Start(run.metrics_address, *run.metrics_port, registry);
    if (!started.ok()) return started.status();
    server = *std::move(started);
    std::vector<int> stages(options.spec.stages());
    std::iota(stages.begin(), stages.end(), 0);
    ExportBuildInfo(*registry, {.version = std::string(StragglarVersion()), .backend = "host"},
                    kPipelineComm, stages);
    options.metrics = registry.get();
    out << "metrics: http://" << server->endpoint() << "/metrics\n";
  }
  absl::StatusOr<PipelineJobReport> report = RunPipelineJob(options, out);
  if (!report.ok()) return report.status();
  // Before the delay, with it under 1F1B's counts, and with the advice applied.
  double healthy = 0, slow = 0, advised = 0;
  int healthy_n = 0, slow_n = 0, advised_n = 0;
  const std::vector<int> first = report->warmup.front();
  for (int i = 0; i < iterations; ++i) {
    const double seconds = report->iteration_s[i];
    if (i + 1 < run.delay_from) {
      healthy += seconds, ++healthy_n;
    } else if (report->warmup[i] == first) {
      slow += seconds, ++slow_n;
    } else {
      advised += seconds, ++advised_n;
    }
  }
  const auto mean = [](double sum, int n) { return n > 0 ? FormatSeconds(sum / n) : "-"; };
  out << "mean iteration: " << mean(healthy, healthy_n) << " healthy, " << mean(slow, slow_n)
      << " with the slow link"
      << (advised_n > 0 ? ", " + mean(advised, advised_n) + " advised" : "") << "\n";
  if (!report->advice.has_value()) out << "no slow link named\n";
  if (server != nullptr && run.metrics_hold_s > 0) {
    out << "metrics: serving the final values for " << FormatSeconds(run.metrics_hold_s) << "\n"
        << std::flush;
    std::this_thread::sleep_for(std::chrono::duration<double>(run.metrics_hold_s));
  }
  return absl::OkStatus();
}

}  // namespace stragglar
