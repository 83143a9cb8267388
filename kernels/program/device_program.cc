#include "kernels/program/device_program.h"

#include <algorithm>
#include <utility>

#include "kernels/program/program.h"

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

namespace {

// Where each chunk's data is, as lowering walks the steps.
struct ChunkWalk {
  std::vector<bool> written;          // by this rank, so far
  std::vector<int32_t> last_receive;  // step index; -1: never
  std::vector<int32_t> last_send;     // step index; -1: never
  std::vector<uint8_t> flags;         // DeviceChunkFlag
};

ChunkWalk StartWalk(const RankProgram& program) {
  ChunkWalk walk{.written = std::vector<bool>(program.num_chunks, false),
                 .last_receive = std::vector<int32_t>(program.num_chunks, -1),
                 .last_send = std::vector<int32_t>(program.num_chunks, -1),
                 .flags = std::vector<uint8_t>(program.num_chunks, 0)};
  for (size_t index = 0; index < program.steps.size(); ++index) {
    const ProgramStep& step = program.steps[index];
    for (int32_t i = step.first_send; i < step.first_send + step.num_sends; ++i) {
      const ProgramPiece& piece = program.pieces[i];
      for (int32_t c = piece.first_chunk; c < piece.first_chunk + piece.num_chunks; ++c) {
        walk.last_send[c] = static_cast<int32_t>(index);
      }
    }
    for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
      const ProgramPiece& piece = program.pieces[i];
      for (int32_t c = piece.first_chunk; c < piece.first_chunk + piece.num_chunks; ++c) {
        walk.last_receive[c] = static_cast<int32_t>(index);
      }
    }
  }
  return walk;
}

// Appends `piece` of step `index` as runs of chunks that agree on own_from_input and to_result.
void AppendReceivePiece(const DevicePiece& lowered, int32_t index, ChunkWalk& walk,
                        std::vector<DevicePiece>& pieces) {
  for (int32_t c = lowered.first_chunk; c < lowered.first_chunk + lowered.num_chunks; ++c) {
    const bool own_from_input = !walk.written[c];
    const bool to_result = walk.last_receive[c] == index && walk.last_send[c] <= index;
    walk.written[c] = true;
    walk.flags[c] = static_cast<uint8_t>((walk.flags[c] & kDeviceCopyIn) |
                                         (to_result ? kDeviceEndResult : kDeviceEndWindow));
    if (c > lowered.first_chunk && pieces.back().own_from_input == own_from_input &&
        pieces.back().to_result == to_result) {
      ++pieces.back().num_chunks;
      continue;
    }
    DevicePiece piece = lowered;
    piece.first_chunk = c;
    piece.num_chunks = 1;
    piece.own_from_input = own_from_input;
    piece.to_result = to_result;
    pieces.push_back(piece);
  }
}

}  // namespace

absl::StatusOr<DeviceProgram> LowerPlanForDevice(const Plan& plan, int rank) {
  absl::StatusOr<RankProgram> lowered = LowerPlan(plan, rank, Placement{.in_place = true});
  if (!lowered.ok()) return lowered.status();
  const RankProgram& program = *lowered;
  DeviceProgram device{
      .rank = program.rank, .num_ranks = program.num_ranks, .num_chunks = program.num_chunks};
  ChunkWalk walk = StartWalk(program);
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
      for (int32_t i = step.first_send; i < step.first_send + step.num_sends; ++i) {
        const ProgramPiece& piece = program.pieces[i];
        for (int32_t c = piece.first_chunk; c < piece.first_chunk + piece.num_chunks; ++c) {
          if (!walk.written[c]) walk.flags[c] |= kDeviceCopyIn;
        }
      }
    }
    if (step.receive_peer >= 0) {
      lowered_step.receives = ++receives_from[step.receive_peer];
      lowered_step.first_piece = static_cast<int32_t>(device.pieces.size());
      for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
        const ProgramPiece& piece = program.pieces[i];
        std::vector<DeviceReadWait> waits = ReadsToWaitFor(program, piece, sends_by_step);
        const DevicePiece lowered_piece{.first_chunk = piece.first_chunk,
                                        .num_chunks = piece.num_chunks,
                                        .through_scratch = piece.overlaps_send,
                                        .first_wait = static_cast<int32_t>(device.waits.size()),
                                        .num_waits = static_cast<int32_t>(waits.size())};
        device.waits.insert(device.waits.end(), waits.begin(), waits.end());
        AppendReceivePiece(lowered_piece, static_cast<int32_t>(index), walk, device.pieces);
      }
      lowered_step.num_pieces =
          static_cast<int32_t>(device.pieces.size()) - lowered_step.first_piece;
    }
    device.steps.push_back(lowered_step);
  }
  for (int32_t peer = 0; peer < program.num_ranks; ++peer) {
    if (sends_to[peer] > 0) device.drain.push_back({.reader = peer, .reads = sends_to[peer]});
  }
  for (int32_t c = 0; c < program.num_chunks; ++c) {
    if (!walk.written[c]) walk.flags[c] |= kDeviceEndInput;
  }
  device.chunk_flags = std::move(walk.flags);
  return device;
}

}  // namespace stragglar
