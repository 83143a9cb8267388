#include "bench/nccl_bench/report.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/common/bandwidth.h"

extern char** environ;

namespace stragglar::nccl_bench {
namespace {

std::string ShellQuote(absl::string_view arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_=./:,+@%") == absl::string_view::npos) {
    return std::string(arg);
  }
  std::string quoted = "'";
  for (char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace

PlacementSummary Summarize(const Collected& collected, int64_t bytes, int ranks) {
  PlacementSummary summary;
  for (double t : collected.time_us) summary.time_us += t / ranks;
  for (int64_t w : collected.wrong) summary.wrong += w;
  const bench::AllReduceBandwidth bandwidth =
      bench::AllReduceBandwidthOf(bytes, summary.time_us * 1e-6, ranks);
  summary.algbw = bandwidth.algbw_gbps;
  summary.busbw = bandwidth.busbw_gbps;
  if (!collected.call_us.empty() && !collected.call_us[0].empty()) {
    const size_t calls = collected.call_us[0].size();
    double total = 0;
    for (size_t i = 0; i < calls; ++i) {
      double shortest = std::numeric_limits<double>::infinity();
      for (const std::vector<double>& rank_calls : collected.call_us) {
        if (i < rank_calls.size()) shortest = std::min(shortest, rank_calls[i]);
      }
      total += shortest;
    }
    summary.after_us = total / calls;
  }
  return summary;
}

std::string NcclVersionString(int code) {
  // 2.9 and later: major * 10000 + minor * 100 + patch.
  if (code >= 10000) return absl::StrFormat("%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
  return absl::StrFormat("%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
}

std::string NcclAllReduceOrigin() {
  void* symbol = dlsym(RTLD_DEFAULT, "ncclAllReduce");
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

bool PreloadActive(const std::string& origin) { return absl::StrContains(origin, "libstragglar"); }

nlohmann::json StartingReport(const std::vector<std::string>& argv) {
  std::string command_line;
  for (const std::string& arg : argv) {
    absl::StrAppend(&command_line, command_line.empty() ? "" : " ", ShellQuote(arg));
  }
  return {{"program", kProgram},
          {"command_line", command_line},
          {"status", "starting"},
          {"units",
           {{"size", "bytes"}, {"time_us", "microseconds"}, {"algbw", "GB/s"}, {"busbw", "GB/s"}}},
          {"rows", nlohmann::json::array()}};
}

void AddProbe(const Probe& probe, const std::string& origin, nlohmann::json& report) {
  report["nccl_version_code"] = probe.nccl_version;
  report["nccl_version"] = NcclVersionString(probe.nccl_version);
  report["cuda_runtime_version"] = probe.cuda_runtime;
  report["cuda_driver_version"] = probe.cuda_driver;
  report["preload"] = {{"active", PreloadActive(origin)}, {"ncclAllReduce_from", origin}};
  const char* ld_preload = std::getenv("LD_PRELOAD");
  report["ld_preload"] = ld_preload != nullptr ? nlohmann::json(ld_preload) : nullptr;
}

void AddLayout(const Config& config, const Layout& layout, const Probe& probe,
               const std::vector<std::string>& env, nlohmann::json& report) {
  report["nranks"] = layout.ranks;
  report["device_count"] = layout.devices;
  report["devices"] = probe.devices;
  report["one_gpu_mode"] = layout.shared_gpu;
  report["straggler"] = config.delayed() ? nlohmann::json(layout.straggler) : nullptr;
  report["delay_us"] = config.delay_us;
  report["delay_us_per_mib"] = config.delay_us_per_mib;
  report["iters"] = config.iters;
  report["warmup_iters"] = config.warmup;
  report["check"] = config.check;
  report["minbytes"] = config.min_bytes;
  report["maxbytes"] = config.max_bytes;
  report["stepfactor"] = config.step_factor;
  nlohmann::json environment = nlohmann::json::object();
  for (const std::string& entry : env) {
    if (!absl::StartsWith(entry, "STRAGGLAR_") && !absl::StartsWith(entry, "NCCL_")) continue;
    const size_t equals = entry.find('=');
    environment[entry.substr(0, equals)] = entry.substr(equals + 1);
  }
  report["environment"] = environment;
  report["ranks"] = nlohmann::json::array();
}

absl::Status WriteJson(const std::string& path, const nlohmann::json& report) {
  if (path.empty()) return absl::OkStatus();
  const std::string temporary = path + ".tmp";
  std::ofstream file(temporary);
  file << report.dump(2) << "\n";
  file.close();
  if (!file || std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write --json file ", path));
  }
  return absl::OkStatus();
}

void PrintHeader(const Config& config, const Layout& layout, const Probe& probe,
                 const std::string& origin) {
  std::string mode;
  if (layout.shared_gpu) {
    mode = absl::StrCat(config.one_gpu ? "--one_gpu" : "fewer GPUs than ranks",
                        ": one process and NCCL_HOSTID per rank, NCCL sockets over lo");
  } else {
    mode = "one GPU per rank";
  }
  std::cout << absl::StrFormat(
      "# %s: nccl-tests-style AllReduce, one process per rank\n"
      "# nranks %d, devices %d (%s)\n"
      "# NCCL %s, CUDA runtime %d, driver %d\n"
      "# preload active: %s (ncclAllReduce from %s)\n",
      kProgram, layout.ranks, layout.devices, mode, NcclVersionString(probe.nccl_version),
      probe.cuda_runtime, probe.cuda_driver, PreloadActive(origin) ? "yes" : "no", origin);
  std::string env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (absl::StartsWith(*entry, "STRAGGLAR_") || absl::StartsWith(*entry, "NCCL_")) {
      absl::StrAppend(&env, env.empty() ? "" : " ", *entry);
    }
  }
  std::cout << "# environment: " << (env.empty() ? "-" : env) << "\n";
  std::cout << absl::StrFormat(
      "# minBytes %d maxBytes %d step: %d(factor) warmup iters: %d iters: %d validation: %d\n",
      config.min_bytes, config.max_bytes, config.step_factor, config.warmup, config.iters,
      config.check ? 1 : 0);
  if (config.delayed()) {
    std::cout << absl::StrFormat(
        "# straggler: rank %d spins %g us + %g us per MiB on its stream before every AllReduce; "
        "\"after\" is the time after its arrival\n",
        layout.straggler, config.delay_us, config.delay_us_per_mib);
  }
  std::cout << "#\n# Using devices" << std::endl;
}

void PrintTableHeader(const Config& config, const std::vector<std::string>& hello) {
  for (const std::string& line : hello) std::cout << line << "\n";
  const bool after = config.delayed();
  std::string line1 = absl::StrFormat("#\n#%51s  %-34s  %-34s", "", "out-of-place", "in-place");
  std::string line2 =
      absl::StrFormat("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  std::string line3 =
      absl::StrFormat("#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int placement = 0; placement < 2; ++placement) {
    absl::StrAppendFormat(&line2, "  %8s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
    absl::StrAppendFormat(&line3, "  %8s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
  }
  if (after) {
    absl::StrAppend(&line1, "  after (us)");
    absl::StrAppendFormat(&line2, "  %9s  %9s", "oop", "ip");
  }
  for (std::string* line : {&line1, &line3}) {
    line->erase(line->find_last_not_of(' ') + 1);
  }
  std::cout << line1 << "\n" << line2 << "\n" << line3 << std::endl;
}

void PrintRow(const Config& config, const RowSpec& row, const std::array<Collected, 2>& collected,
              int ranks, Totals& totals, nlohmann::json& report) {
  std::string line = absl::StrFormat("%12d  %12d  %8s  %6s  %6d", row.bytes, row.count,
                                     TypeName(row.type), ReduceOpName(row.op), -1);
  nlohmann::json json = {{"size", row.bytes},
                         {"count", row.count},
                         {"type", TypeName(row.type)},
                         {"op", ReduceOpName(row.op)}};
  std::string after;
  for (int placement = 0; placement < 2; ++placement) {
    const PlacementSummary summary = Summarize(collected[placement], row.bytes, ranks);
    absl::StrAppendFormat(&line, "  %8.2f  %6.2f  %6.2f  %6s", summary.time_us, summary.algbw,
                          summary.busbw,
                          config.check ? absl::StrCat(summary.wrong) : std::string("N/A"));
    nlohmann::json entry = {{"time_us", summary.time_us},
                            {"algbw", summary.algbw},
                            {"busbw", summary.busbw},
                            {"wrong", config.check ? nlohmann::json(summary.wrong) : nullptr},
                            {"rank_time_us", collected[placement].time_us}};
    if (summary.after_us.has_value()) {
      entry["after_arrival_us"] = *summary.after_us;
      absl::StrAppendFormat(&after, "  %9.2f", *summary.after_us);
    }
    json[placement == 0 ? "oop" : "ip"] = entry;
    totals.busbw += summary.busbw;
    ++totals.busbw_count;
    totals.wrong += summary.wrong;
  }
  std::cout << line << after << std::endl;
  report["rows"].push_back(json);
}

void PrintSummary(const Config& config, const Totals& totals, nlohmann::json& report) {
  const double avg_busbw = totals.busbw_count > 0 ? totals.busbw / totals.busbw_count : 0;
  if (config.check) {
    std::cout << absl::StrFormat("# Out of bounds values : %d %s\n", totals.wrong,
                                 totals.wrong == 0 ? "OK" : "FAILED");
  }
  std::cout << absl::StrFormat("# Avg bus bandwidth    : %g\n#", avg_busbw) << std::endl;
  report["avg_busbw"] = avg_busbw;
  report["wrong_total"] = config.check ? nlohmann::json(totals.wrong) : nullptr;
  report["status"] = totals.wrong == 0 ? "ok" : "wrong";
}

}  // namespace stragglar::nccl_bench
