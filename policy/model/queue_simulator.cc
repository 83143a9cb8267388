#include "policy/model/queue_simulator.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/synth/queue_times.h"

namespace stragglar {
namespace {

absl::Status CheckIndices(const Plan& plan) {
  for (size_t r = 0; r < plan.rounds.size(); ++r) {
    for (const Transfer& transfer : plan.rounds[r].transfers) {
      const bool ranks_ok = transfer.src >= 0 && transfer.src < plan.num_ranks &&
                            transfer.dst >= 0 && transfer.dst < plan.num_ranks;
      const bool chunks_ok = std::all_of(transfer.chunks.begin(), transfer.chunks.end(),
                                         [&](int32_t c) { return c >= 0 && c < plan.num_chunks; });
      if (!ranks_ok || !chunks_ok) {
        return absl::InvalidArgumentError(absl::StrCat("round ", r, ": transfer ", transfer.src,
                                                       " -> ", transfer.dst,
                                                       " names a rank or chunk outside the plan"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SimulationResult> SimulatePlanWithQueues(const Plan& plan, double bytes,
                                                        const NetworkModel& network,
                                                        absl::Span<const double> arrival_s) {
  if (absl::Status status = ValidateSimulation(plan, bytes, network, arrival_s); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckIndices(plan); !status.ok()) return status;
  QueueTimes state(plan.num_chunks, arrival_s);
  std::vector<double> finish_s(arrival_s.begin(), arrival_s.end());
  const double bytes_per_chunk = bytes / plan.num_chunks;
  // The rank behind a slow link, as the round model reads it (every link of one class, the slow
  // rank the intra-node link's: ValidateNetwork): its transfers move their bytes slow_factor
  // times slower. Left out, StragglAR's pieces around a slow link were priced as on a fast one.
  const LinkModel& slow_link = network.intra_node;
  std::vector<double> end_s;
  for (const Round& round : plan.rounds) {
    // Every start from the earlier rounds alone, then the round's effects: its reads see the
    // values from before it.
    const int transfers = static_cast<int>(round.transfers.size());
    end_s.resize(transfers);
    for (int t = 0; t < transfers; ++t) {
      const Transfer& transfer = round.transfers[t];
      const LinkClass link_class = network.topology.Between(transfer.src, transfer.dst);
      const bool slow = slow_link.has_slow_rank() && (transfer.src == slow_link.slow_rank ||
                                                      transfer.dst == slow_link.slow_rank);
      const double moved = bytes_per_chunk * static_cast<double>(transfer.chunks.size()) *
                           (slow ? slow_link.slow_factor : 1.0);
      const double cost = network.Of(link_class).TransferSeconds(moved, transfers);
      end_s[t] = state.Start(transfer, static_cast<int>(link_class)) + cost;
    }
    for (int t = 0; t < transfers; ++t) {
      const Transfer& transfer = round.transfers[t];
      state.Finish(transfer, static_cast<int>(network.topology.Between(transfer.src, transfer.dst)),
                   end_s[t]);
      finish_s[transfer.src] = std::max(finish_s[transfer.src], end_s[t]);
      finish_s[transfer.dst] = std::max(finish_s[transfer.dst], end_s[t]);
    }
  }
  SimulationResult result{.finish_s = std::move(finish_s)};
  const double last_finish = *std::max_element(result.finish_s.begin(), result.finish_s.end());
  result.completion_s = last_finish - *std::min_element(arrival_s.begin(), arrival_s.end());
  result.after_last_arrival_s = last_finish - *std::max_element(arrival_s.begin(), arrival_s.end());
  return result;
}

}  // namespace stragglar
