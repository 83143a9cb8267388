#include "kernels/program/device_program.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/program/program.h"

namespace stragglar {
namespace {

// The reads to wait for before `extent`'s chunks change: its lending steps as (reader, reads),
// one per reader (its later reads imply its earlier ones).
std::vector<DeviceReadWait> ReadsToWaitFor(const RankProgram& program, const ProgramExtent& extent,
                                           const std::vector<uint32_t>& sends_by_step) {
  std::vector<DeviceReadWait> waits;
  for (int32_t w = extent.first_wait; w < extent.first_wait + extent.num_waits; ++w) {
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
      const ProgramExtent& extent = program.extents[i];
      for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c) {
        walk.last_send[c] = static_cast<int32_t>(index);
      }
    }
    for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
      const ProgramExtent& extent = program.extents[i];
      for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c) {
        walk.last_receive[c] = static_cast<int32_t>(index);
      }
    }
  }
  return walk;
}

// Appends `extent` of step `index` as runs of chunks that agree on own_from_input and to_result.
void AppendReceiveExtent(const DeviceExtent& lowered, int32_t index, ChunkWalk& walk,
                         std::vector<DeviceExtent>& extents) {
  for (int32_t c = lowered.first_chunk; c < lowered.first_chunk + lowered.num_chunks; ++c) {
    const bool own_from_input = !walk.written[c];
    const bool to_result = walk.last_receive[c] == index && walk.last_send[c] <= index;
    walk.written[c] = true;
    walk.flags[c] = static_cast<uint8_t>((walk.flags[c] & kDeviceCopyIn) |
                                         (to_result ? kDeviceEndResult : kDeviceEndWindow));
    if (c > lowered.first_chunk && extents.back().own_from_input == own_from_input &&
        extents.back().to_result == to_result) {
      ++extents.back().num_chunks;
      continue;
    }
    DeviceExtent extent = lowered;
    extent.first_chunk = c;
    extent.num_chunks = 1;
    extent.own_from_input = own_from_input;
    extent.to_result = to_result;
    extents.push_back(extent);
  }
}

}  // namespace

absl::StatusOr<DeviceProgram> LowerForDevice(const RankProgram& program) {
  if (!program.placement.in_place || program.placement.native_pre_arrival) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", program.rank,
        ": the device executor runs programs lowered in place with their pre-arrival rounds; this "
        "one is ",
        program.placement.in_place ? "lowered with its pre-arrival left to NCCL" : "out of place"));
  }
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
        const ProgramExtent& extent = program.extents[i];
        for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c) {
          if (!walk.written[c]) walk.flags[c] |= kDeviceCopyIn;
        }
      }
    }
    if (step.receive_peer >= 0) {
      lowered_step.receives = ++receives_from[step.receive_peer];
      lowered_step.first_extent = static_cast<int32_t>(device.extents.size());
      for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
        const ProgramExtent& extent = program.extents[i];
        std::vector<DeviceReadWait> waits = ReadsToWaitFor(program, extent, sends_by_step);
        const DeviceExtent lowered_extent{.first_chunk = extent.first_chunk,
                                          .num_chunks = extent.num_chunks,
                                          .through_scratch = extent.overlaps_send,
                                          .first_wait = static_cast<int32_t>(device.waits.size()),
                                          .num_waits = static_cast<int32_t>(waits.size())};
        device.waits.insert(device.waits.end(), waits.begin(), waits.end());
        AppendReceiveExtent(lowered_extent, static_cast<int32_t>(index), walk, device.extents);
      }
      lowered_step.num_extents =
          static_cast<int32_t>(device.extents.size()) - lowered_step.first_extent;
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
