#include "kernels/device_program.h"

#include <algorithm>
#include <utility>

#include "kernels/program.h"

namespace stragglar {
namespace {

// The reads to wait for before `piece`'s chunks change: its lending steps as (reader, reads),
// one per reader (its later reads imply its earlier ones).
std::vector<DeviceReadWait> ReadsToWaitFor(const RankProgram& program, const ProgramPiece& piece,
                                           const std::vector<uint32_t>& sends_by_step) {
  std::vector<DeviceReadWait> waits;
  for (int32_t w = piece.first_wait; w < piece.first_wait + piece.num_waits; ++w) {
    const int32_t lender = program.waits[w];
    const DeviceReadWait wait{.reader = program.steps[lender].send_peer,
                              .reads = sends_by_step[lender]};
    auto same_reader = std::find_if(waits.begin(), waits.end(), [&](const DeviceReadWait& other) {
      return other.reader == wait.reader;
    });
    if (same_reader == waits.end()) {
      waits.push_back(wait);
    } else {
      same_reader->reads = std::max(same_reader->reads, wait.reads);
    }
  }
  return waits;
}

}  // namespace

absl::StatusOr<DeviceProgram> LowerPlanForDevice(const Plan& plan, int rank) {
  absl::StatusOr<RankProgram> lowered = LowerPlan(plan, rank, Placement{.in_place = true});
  if (!lowered.ok()) return lowered.status();
  const RankProgram& program = *lowered;
  DeviceProgram device{
      .rank = program.rank, .num_ranks = program.num_ranks, .num_chunks = program.num_chunks};
  std::vector<uint32_t> sends_to(program.num_ranks, 0);
  std::vector<uint32_t> receives_from(program.num_ranks, 0);
  std::vector<uint32_t> sends_by_step(program.steps.size(), 0);
  for (size_t index = 0; index < program.steps.size(); ++index) {
    const ProgramStep& step = program.steps[index];
    DeviceStep lowered_step{.send_peer = step.send_peer,
                            .receive_peer = step.receive_peer,
                            .receive_op = step.receive_op};
    if (step.send_peer >= 0) {
      lowered_step.sends = sends_by_step[index] = ++sends_to[step.send_peer];
    }
    if (step.receive_peer >= 0) {
      lowered_step.receives = ++receives_from[step.receive_peer];
      lowered_step.first_piece = static_cast<int32_t>(device.pieces.size());
      lowered_step.num_pieces = step.num_receives;
      for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
        const ProgramPiece& piece = program.pieces[i];
        std::vector<DeviceReadWait> waits = ReadsToWaitFor(program, piece, sends_by_step);
        device.pieces.push_back({.first_chunk = piece.first_chunk,
                                 .num_chunks = piece.num_chunks,
                                 .through_scratch = piece.overlaps_send,
                                 .first_wait = static_cast<int32_t>(device.waits.size()),
                                 .num_waits = static_cast<int32_t>(waits.size())});
        device.waits.insert(device.waits.end(), waits.begin(), waits.end());
      }
    }
    device.steps.push_back(lowered_step);
  }
  for (int32_t peer = 0; peer < program.num_ranks; ++peer) {
    if (sends_to[peer] > 0) device.drain.push_back({.reader = peer, .reads = sends_to[peer]});
  }
  return device;
}

}  // namespace stragglar
