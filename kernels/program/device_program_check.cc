#include "kernels/program/device_program_check.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/program/symbolic_value.h"

namespace stragglar {
namespace {

using Value = SymbolicValue;

// A read of one chunk of a rank's window by a peer: its `reads`-th read of that window.
struct Loan {
  int32_t reader = 0;
  uint32_t reads = 0;
  int round = 0;
};

// What a step of a round writes, applied once every rank has read what it reads in that round.
struct Write {
  int rank = 0;
  int32_t chunk = 0;
  bool to_result = false;
  Value value;
  Value expected;
};

// Every rank's window, input and result as the device programs run them, round by round, next to
// the values the plan says (`expected_`, which the programs' own check ties to the plan).
class DeviceRun {
 public:
  DeviceRun(absl::Span<const RankProgram> programs, absl::Span<const DeviceProgram> device)
      : programs_(programs), device_(device), n_(static_cast<int>(programs.size())) {}

  absl::Status Run();

 private:
  absl::Status CheckHeaders();
  absl::Status CheckStep(int rank, size_t index);
  void Start();
  // The step index of each rank's step in `round`, or -1.
  std::vector<int> StepsOf(int round);
  // Every receive of `round` reads its sender's window as it is at the start of the round.
  absl::Status Read(const std::vector<int>& steps, std::vector<std::vector<Value>>& incoming);
  // Every receive of `round` computes its chunks; the writes land after all reads.
  absl::Status Compute(const std::vector<int>& steps,
                       const std::vector<std::vector<Value>>& incoming, std::vector<Write>& writes);
  absl::Status CheckWindowWrite(int rank, size_t index, const DeviceExtent& extent, int32_t chunk);
  absl::Status CheckResultWrite(int rank, size_t index, int32_t chunk);
  absl::Status CheckDrain(int rank);
  absl::Status Finish(int rank);
  std::string Where(int rank, size_t index) const {
    return absl::StrCat("rank ", rank, " step ", index, " (round ",
                        programs_[rank].steps[index].round, ")");
  }
  // The chunks step `index` of `rank` receives, in order.
  std::vector<int32_t> ReceivedChunks(int rank, size_t index) const;

  absl::Span<const RankProgram> programs_;
  absl::Span<const DeviceProgram> device_;
  int n_;
  int32_t chunks_ = 0;
  std::vector<std::vector<Value>> expected_, input_, window_, result_;  // [rank][chunk]
  // [rank][chunk]: the reads of the chunk out of the rank's window since its last write.
  std::vector<std::vector<std::vector<Loan>>> loans_;
  // [rank][chunk]: the last step that writes it, and the last round in which a peer reads it.
  std::vector<std::vector<int>> last_write_, last_loan_round_;
  std::vector<std::vector<uint32_t>> reads_by_;  // [rank][reader]: reads of the rank's window
};

std::vector<int32_t> DeviceRun::ReceivedChunks(int rank, size_t index) const {
  std::vector<int32_t> chunks;
  const ProgramStep& step = programs_[rank].steps[index];
  ForEachChunk(programs_[rank], step.first_receive, step.num_receives,
               [&](int32_t chunk) { chunks.push_back(chunk); });
  return chunks;
}

absl::Status DeviceRun::CheckHeaders() {
  if (static_cast<int>(device_.size()) != n_ || n_ == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(device_.size(), " device programs for ", n_, " programs"));
  }
  chunks_ = programs_[0].num_chunks;
  for (int rank = 0; rank < n_; ++rank) {
    const RankProgram& program = programs_[rank];
    const DeviceProgram& lowered = device_[rank];
    if (program.rank != rank || !program.placement.in_place ||
        program.placement.native_pre_arrival || program.num_chunks != chunks_ ||
        lowered.rank != rank || lowered.num_ranks != n_ || lowered.num_chunks != chunks_ ||
        lowered.steps.size() != program.steps.size() ||
        static_cast<int32_t>(lowered.chunk_flags.size()) != chunks_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, ": the device program is for rank ", lowered.rank, " of ",
          lowered.num_ranks, " with ", lowered.num_chunks, " chunks and ", lowered.steps.size(),
          " steps, or its program is not lowered in place with its pre-arrival rounds"));
    }
    for (const DeviceReadWait& wait : lowered.drain) {
      if (wait.reader < 0 || wait.reader >= n_) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", rank, ": drains the reads of rank ", wait.reader));
      }
    }
    for (size_t index = 0; index < program.steps.size(); ++index) {
      if (absl::Status status = CheckStep(rank, index); !status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

// Peers, op and counts as the program's step has them, and extents that land exactly the chunks
// it receives, in order, with their waits in range.
absl::Status DeviceRun::CheckStep(int rank, size_t index) {
  const ProgramStep& step = programs_[rank].steps[index];
  const DeviceProgram& lowered = device_[rank];
  const DeviceStep& device_step = lowered.steps[index];
  const std::string where = Where(rank, index);
  if (device_step.send_peer != step.send_peer || device_step.receive_peer != step.receive_peer ||
      (step.receive_peer >= 0 && device_step.receive_op != step.receive_op)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": peers or op differ from the program's"));
  }
  // Rank r's sends to (or receives from) `peer` up to this step's round: the k-th send from a to
  // b is b's k-th receive, which is how both sides name the same transfer.
  auto count = [&](int r, bool sends, int32_t peer) {
    uint32_t k = 0;
    for (const ProgramStep& s : programs_[r].steps) {
      k += s.round <= step.round && (sends ? s.send_peer : s.receive_peer) == peer;
    }
    return k;
  };
  if (step.send_peer >= 0 && device_step.sends != count(rank, true, step.send_peer)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": counts ", device_step.sends, " sends to rank ", step.send_peer));
  }
  if (step.receive_peer >= 0 && (device_step.receives != count(rank, false, step.receive_peer) ||
                                 device_step.receives != count(step.receive_peer, true, rank))) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": counts ", device_step.receives, " receives from rank ",
                     step.receive_peer, ", which counts its sends to this rank otherwise"));
  }
  std::vector<int32_t> landed;
  for (int32_t e = device_step.first_extent; e < device_step.first_extent + device_step.num_extents;
       ++e) {
    if (e < 0 || e >= static_cast<int32_t>(lowered.extents.size())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": extent ", e, " out of range"));
    }
    const DeviceExtent& extent = lowered.extents[e];
    if (extent.first_wait < 0 ||
        extent.first_wait + extent.num_waits > static_cast<int32_t>(lowered.waits.size())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": waits out of range"));
    }
    for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c) {
      landed.push_back(c);
    }
  }
  if (landed != ReceivedChunks(rank, index)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": its extents land other chunks than the step receives"));
  }
  return absl::OkStatus();
}

void DeviceRun::Start() {
  const Value garbage = SingleValue(n_, n_);
  expected_.assign(n_, {});
  input_.assign(n_, {});
  window_.assign(n_, std::vector<Value>(chunks_, garbage));
  result_.assign(n_, std::vector<Value>(chunks_, garbage));
  loans_.assign(n_, std::vector<std::vector<Loan>>(chunks_));
  last_write_.assign(n_, std::vector<int>(chunks_, -1));
  last_loan_round_.assign(n_, std::vector<int>(chunks_, -1));
  reads_by_.assign(n_, std::vector<uint32_t>(n_, 0));
  for (int rank = 0; rank < n_; ++rank) {
    expected_[rank] = input_[rank] = std::vector<Value>(chunks_, SingleValue(n_, rank));
    for (int32_t chunk = 0; chunk < chunks_; ++chunk) {
      if (device_[rank].chunk_flags[chunk] & kDeviceCopyIn)
        window_[rank][chunk] = input_[rank][chunk];
    }
    for (size_t index = 0; index < programs_[rank].steps.size(); ++index) {
      const ProgramStep& step = programs_[rank].steps[index];
      for (int32_t chunk : ReceivedChunks(rank, index)) {
        last_write_[rank][chunk] = static_cast<int>(index);
        int& lent = last_loan_round_[step.receive_peer][chunk];
        lent = std::max(lent, step.round);
      }
    }
  }
}

std::vector<int> DeviceRun::StepsOf(int round) {
  std::vector<int> steps(n_, -1);
  for (int rank = 0; rank < n_; ++rank) {
    const std::vector<ProgramStep>& all = programs_[rank].steps;
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].round == round) steps[rank] = static_cast<int>(i);
    }
  }
  return steps;
}

absl::Status DeviceRun::Read(const std::vector<int>& steps,
                             std::vector<std::vector<Value>>& incoming) {
  for (int rank = 0; rank < n_; ++rank) {
    incoming[rank].clear();
    if (steps[rank] < 0) continue;
    const ProgramStep& step = programs_[rank].steps[steps[rank]];
    const int sender = step.receive_peer;
    if (sender < 0) continue;
    const uint32_t reads = device_[rank].steps[steps[rank]].receives;
    for (int32_t chunk : ReceivedChunks(rank, steps[rank])) {
      const Value& value = window_[sender][chunk];
      if (value != expected_[sender][chunk]) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(rank, steps[rank]), ": reads chunk ", chunk, " of rank ", sender,
                         "'s window, which holds ", DescribeValue(value), "; the plan's value is ",
                         DescribeValue(expected_[sender][chunk])));
      }
      incoming[rank].push_back(value);
      loans_[sender][chunk].push_back({.reader = rank, .reads = reads, .round = step.round});
    }
    reads_by_[sender][rank] = std::max(reads_by_[sender][rank], reads);
  }
  return absl::OkStatus();
}

absl::Status DeviceRun::Compute(const std::vector<int>& steps,
                                const std::vector<std::vector<Value>>& incoming,
                                std::vector<Write>& writes) {
  for (int rank = 0; rank < n_; ++rank) {
    if (steps[rank] < 0 || programs_[rank].steps[steps[rank]].receive_peer < 0) continue;
    const size_t index = steps[rank];
    const int sender = programs_[rank].steps[index].receive_peer;
    const DeviceProgram& lowered = device_[rank];
    const DeviceStep& step = lowered.steps[index];
    size_t at = 0;
    for (int32_t e = step.first_extent; e < step.first_extent + step.num_extents; ++e) {
      const DeviceExtent& extent = lowered.extents[e];
      for (int32_t c = extent.first_chunk; c < extent.first_chunk + extent.num_chunks; ++c) {
        Write write{.rank = rank,
                    .chunk = c,
                    .to_result = extent.to_result,
                    .value = incoming[rank][at++],
                    .expected = expected_[sender][c]};
        if (step.receive_op == TransferOp::kReduce) {
          const Value& own = extent.own_from_input ? input_[rank][c] : window_[rank][c];
          if (own != expected_[rank][c]) {
            return absl::InvalidArgumentError(absl::StrCat(
                Where(rank, index), ": reduces chunk ", c, " into its ",
                extent.own_from_input ? "input" : "window", ", which holds ", DescribeValue(own),
                "; the plan's value is ", DescribeValue(expected_[rank][c])));
          }
          for (int i = 0; i <= n_; ++i) {
            write.value[i] = write.value[i] || own[i];
            write.expected[i] = write.expected[i] || expected_[rank][c][i];
          }
        }
        // A write to the result lands in the window too when the call averages (the division
        // comes with the copy out at the end), so it waits for the window's readers as any.
        absl::Status status = CheckWindowWrite(rank, index, extent, c);
        if (status.ok() && extent.to_result) status = CheckResultWrite(rank, index, c);
        if (!status.ok()) return status;
        writes.push_back(std::move(write));
      }
    }
  }
  return absl::OkStatus();
}

// Every read of the chunk since its last write, this round's included, is among the extent's
// waits; a read in this very round means the write must wait for it in scratch.
absl::Status DeviceRun::CheckWindowWrite(int rank, size_t index, const DeviceExtent& extent,
                                         int32_t chunk) {
  const DeviceProgram& lowered = device_[rank];
  const int round = programs_[rank].steps[index].round;
  for (const Loan& loan : loans_[rank][chunk]) {
    bool waited = false;
    for (int32_t w = extent.first_wait; w < extent.first_wait + extent.num_waits; ++w) {
      waited = waited ||
               (lowered.waits[w].reader == loan.reader && lowered.waits[w].reads >= loan.reads);
    }
    if (!waited) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(rank, index), ": writes chunk ", chunk, " of its window without waiting for rank ",
          loan.reader, "'s read ", loan.reads, " of it"));
    }
    if (loan.round == round && !extent.through_scratch) {
      return absl::InvalidArgumentError(absl::StrCat(Where(rank, index), ": writes chunk ", chunk,
                                                     " of its window in place while rank ",
                                                     loan.reader, " reads it in the same round"));
    }
  }
  return absl::OkStatus();
}

// A write into the result is the chunk's last, and no later round reads it out of the window.
absl::Status DeviceRun::CheckResultWrite(int rank, size_t index, int32_t chunk) {
  const int round = programs_[rank].steps[index].round;
  if (last_write_[rank][chunk] != static_cast<int>(index) ||
      last_loan_round_[rank][chunk] > round) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(rank, index), ": writes chunk ", chunk,
                     " to the result, but a later step writes it or a later round reads it"));
  }
  return absl::OkStatus();
}

absl::Status DeviceRun::CheckDrain(int rank) {
  for (int reader = 0; reader < n_; ++reader) {
    if (reads_by_[rank][reader] == 0) continue;
    bool drained = false;
    for (const DeviceReadWait& wait : device_[rank].drain) {
      drained = drained || (wait.reader == reader && wait.reads >= reads_by_[rank][reader]);
    }
    if (!drained) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, ": returns without waiting for rank ", reader, "'s read ",
                       reads_by_[rank][reader], " of its window"));
    }
  }
  return absl::OkStatus();
}

absl::Status DeviceRun::Finish(int rank) {
  const Value complete = [&] {
    Value value(n_ + 1, true);
    value[n_] = false;
    return value;
  }();
  for (int32_t chunk = 0; chunk < chunks_; ++chunk) {
    const uint8_t flags = device_[rank].chunk_flags[chunk];
    const int ends = ((flags & kDeviceEndInput) != 0) + ((flags & kDeviceEndWindow) != 0) +
                     ((flags & kDeviceEndResult) != 0);
    if (ends != 1) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": chunk ", chunk, " has ",
                                                     ends, " places its result comes from"));
    }
    const Value& final_value = (flags & kDeviceEndInput)    ? input_[rank][chunk]
                               : (flags & kDeviceEndWindow) ? window_[rank][chunk]
                                                            : result_[rank][chunk];
    if (final_value != complete) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": chunk ", chunk,
                                                     " ends holding ", DescribeValue(final_value),
                                                     " (from its ",
                                                     (flags & kDeviceEndInput)    ? "input"
                                                     : (flags & kDeviceEndWindow) ? "window"
                                                                                  : "result",
                                                     "), not every rank's contribution"));
    }
  }
  return absl::OkStatus();
}

absl::Status DeviceRun::Run() {
  if (absl::Status status = CheckHeaders(); !status.ok()) return status;
  Start();
  int rounds = 0;
  for (const RankProgram& program : programs_) {
    if (!program.steps.empty()) rounds = std::max(rounds, program.steps.back().round + 1);
  }
  std::vector<std::vector<Value>> incoming(n_);
  for (int round = 0; round < rounds; ++round) {
    const std::vector<int> steps = StepsOf(round);
    if (absl::Status status = Read(steps, incoming); !status.ok()) return status;
    std::vector<Write> writes;
    if (absl::Status status = Compute(steps, incoming, writes); !status.ok()) return status;
    for (Write& write : writes) {
      (write.to_result ? result_ : window_)[write.rank][write.chunk] = write.value;
      expected_[write.rank][write.chunk] = std::move(write.expected);
      loans_[write.rank][write.chunk].clear();
    }
  }
  for (int rank = 0; rank < n_; ++rank) {
    if (absl::Status status = CheckDrain(rank); !status.ok()) return status;
    if (absl::Status status = Finish(rank); !status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckDevicePrograms(absl::Span<const RankProgram> programs,
                                 absl::Span<const DeviceProgram> device) {
  return DeviceRun(programs, device).Run();
}

}  // namespace stragglar
