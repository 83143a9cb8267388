#include "kernels/program/link_class_queues.h"

#include <vector>

namespace stragglar {
namespace {

int LinkClass(int rank, int peer, int ranks_per_node) {
  return rank / ranks_per_node == peer / ranks_per_node ? 0 : 1;
}

}  // namespace

bool LinkClassQueues::OneClass() const {
  int used = 0;
  for (int link_class = 0; link_class < kNumLinkClasses; ++link_class) {
    used += !sends[link_class].empty() || !receives[link_class].empty();
  }
  return used <= 1;
}

bool LinkClassQueues::Met(const QueuedTransfer& transfer, absl::Span<const int32_t> writes_done,
                          absl::Span<const int32_t> sends_done) const {
  for (int32_t i = transfer.first_need; i < transfer.first_need + transfer.num_needs; ++i) {
    const ChunkNeed& need = needs[i];
    if (writes_done[need.chunk] < need.writes || sends_done[need.chunk] < need.sends) return false;
  }
  return true;
}

LinkClassQueues SplitByLinkClass(const RankProgram& program, int ranks_per_node) {
  LinkClassQueues queues;
  // Per chunk, the receives into it and the sends of it so far in program order.
  std::vector<int32_t> writes(program.num_chunks, 0), sends(program.num_chunks, 0);
  for (int32_t index = 0; index < static_cast<int32_t>(program.steps.size()); ++index) {
    const ProgramStep& step = program.steps[index];
    // The send first: a round's send reads the chunks as they were before its receive.
    if (step.send_peer >= 0) {
      QueuedTransfer send{.step = index, .first_need = static_cast<int32_t>(queues.needs.size())};
      ForEachChunk(program, step.first_send, step.num_sends, [&](int32_t c) {
        if (writes[c] > 0) queues.needs.push_back({.chunk = c, .writes = writes[c]});
        ++sends[c];
      });
      send.num_needs = static_cast<int32_t>(queues.needs.size()) - send.first_need;
      queues.sends[LinkClass(program.rank, step.send_peer, ranks_per_node)].push_back(send);
    }
    if (step.receive_peer >= 0) {
      QueuedTransfer receive{.step = index,
                             .first_need = static_cast<int32_t>(queues.needs.size())};
      ForEachChunk(program, step.first_receive, step.num_receives, [&](int32_t c) {
        if (writes[c] > 0 || sends[c] > 0) {
          queues.needs.push_back({.chunk = c, .writes = writes[c], .sends = sends[c]});
        }
        ++writes[c];
      });
      receive.num_needs = static_cast<int32_t>(queues.needs.size()) - receive.first_need;
      queues.receives[LinkClass(program.rank, step.receive_peer, ranks_per_node)].push_back(
          receive);
    }
  }
  return queues;
}

}  // namespace stragglar
