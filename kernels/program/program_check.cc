#include "kernels/program/program_check.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/program/symbolic_value.h"

namespace stragglar {
namespace {

using Value = SymbolicValue;

std::string Describe(const Value& value) { return DescribeValue(value); }

const char* BufferName(Buffer buffer) { return buffer == Buffer::kInput ? "input" : "result"; }

// The chunks of extents[first, first + count), in order.
std::vector<int32_t> ChunksOf(const RankProgram& program, int32_t first, int32_t count) {
  std::vector<int32_t> chunks;
  ForEachChunk(program, first, count, [&](int32_t chunk) { chunks.push_back(chunk); });
  return chunks;
}

// Every rank's buffers as the programs run them, next to the plan's values.
class SymbolicRun {
 public:
  SymbolicRun(const Plan& plan, absl::Span<const RankProgram> programs)
      : plan_(plan), programs_(programs), n_(plan.num_ranks) {
    const Value garbage = Single(n_);
    plan_values_.assign(n_, std::vector<Value>(plan.num_chunks));
    input_.assign(n_, std::vector<Value>(plan.num_chunks));
    result_.assign(n_, std::vector<Value>(plan.num_chunks, garbage));
    loans_.assign(n_, std::vector<std::set<int32_t>>(plan.num_chunks));
    written_.assign(n_, std::vector<bool>(plan.num_chunks, false));
    for (int rank = 0; rank < n_; ++rank) {
      for (int chunk = 0; chunk < plan.num_chunks; ++chunk) {
        plan_values_[rank][chunk] = input_[rank][chunk] = Single(rank);
      }
    }
  }

  absl::Status Run();

 private:
  Value Single(int member) const { return SingleValue(n_, member); }
  bool InPlace() const { return programs_[0].placement.in_place; }
  // The memory `buffer` names for `rank` (in place, both are the result).
  Value& At(int rank, Buffer buffer, int32_t chunk) {
    return buffer == Buffer::kInput && !InPlace() ? input_[rank][chunk] : result_[rank][chunk];
  }
  absl::Status CheckHeaders();
  absl::Status StartAfterPreArrival();
  void ApplyPlanRound(int round);
  // The step of `rank` for `round`, or nullptr; advances the rank's cursor.
  const ProgramStep* StepFor(int rank, int round);
  absl::Status CheckStepMatchesPlan(int rank, int round, const ProgramStep* step);
  absl::Status Send(int rank, const ProgramStep& step, std::vector<Value>& sent);
  absl::Status Receive(int rank, const ProgramStep& step, const std::vector<Value>& incoming);
  absl::Status Finish(int rank);

  const Plan& plan_;
  absl::Span<const RankProgram> programs_;
  int n_;
  std::vector<std::vector<Value>> plan_values_;  // [rank][chunk]: what the plan holds
  std::vector<std::vector<Value>> input_;
  std::vector<std::vector<Value>> result_;
  // [rank][chunk]: steps that lent the chunk out of the result, not yet waited for.
  std::vector<std::vector<std::set<int32_t>>> loans_;
  std::vector<std::vector<bool>> written_;  // [rank][chunk]: a step wrote it into the result
  std::vector<size_t> cursor_;              // [rank]: its next step
};

absl::Status SymbolicRun::CheckHeaders() {
  if (static_cast<int>(programs_.size()) != n_) {
    return absl::InvalidArgumentError(
        absl::StrCat(programs_.size(), " programs for a plan of ", n_, " ranks"));
  }
  for (int rank = 0; rank < n_; ++rank) {
    const RankProgram& program = programs_[rank];
    if (program.rank != rank || program.num_ranks != n_ || program.num_chunks != plan_.num_chunks ||
        program.placement != programs_[0].placement) {
      return absl::InvalidArgumentError(
          absl::StrCat("program ", rank, " is for rank ", program.rank, " of ", program.num_ranks,
                       " with ", program.num_chunks, " chunks, or another placement"));
    }
    for (size_t i = 0; i < program.steps.size(); ++i) {
      const ProgramStep& step = program.steps[i];
      const int64_t extents = static_cast<int64_t>(program.extents.size());
      if (step.first_send < 0 || step.first_send + step.num_sends > extents ||
          step.first_receive < 0 || step.first_receive + step.num_receives > extents ||
          (i > 0 && step.round <= program.steps[i - 1].round)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", rank, " step ", i, ": extents out of range or rounds not in order"));
      }
    }
  }
  cursor_.assign(n_, 0);
  return absl::OkStatus();
}

void SymbolicRun::ApplyPlanRound(int round) {
  std::vector<std::vector<Value>> sent;
  for (const Transfer& transfer : plan_.rounds[round].transfers) {
    sent.emplace_back();
    for (int32_t chunk : transfer.chunks) sent.back().push_back(plan_values_[transfer.src][chunk]);
  }
  for (size_t t = 0; t < sent.size(); ++t) {
    const Transfer& transfer = plan_.rounds[round].transfers[t];
    size_t i = 0;
    for (int32_t chunk : transfer.chunks) {
      Value& target = plan_values_[transfer.dst][chunk];
      for (int m = 0; m <= n_; ++m) {
        target[m] = transfer.op == TransferOp::kCopy ? sent[t][i][m] : (target[m] || sent[t][i][m]);
      }
      ++i;
    }
  }
}

absl::Status SymbolicRun::StartAfterPreArrival() {
  const RankProgram& first = programs_[0];
  if (!first.placement.native_pre_arrival) return absl::OkStatus();
  for (int round = 0; round < plan_.pre_arrival_rounds; ++round) ApplyPlanRound(round);
  const int per_block =
      first.pre_arrival_blocks > 0 ? plan_.num_chunks / first.pre_arrival_blocks : 0;
  for (int rank = 0; rank < n_; ++rank) {
    const int block = programs_[rank].pre_arrival_block;
    for (int i = 0; block >= 0 && i < per_block; ++i) {
      const int chunk = block * per_block + i;
      if (chunk >= plan_.num_chunks) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", rank, ": block ", block, " outside the plan's chunks"));
      }
      result_[rank][chunk] = plan_values_[rank][chunk];
      written_[rank][chunk] = true;
    }
  }
  return absl::OkStatus();
}

const ProgramStep* SymbolicRun::StepFor(int rank, int round) {
  const RankProgram& program = programs_[rank];
  if (cursor_[rank] < program.steps.size() && program.steps[cursor_[rank]].round == round) {
    return &program.steps[cursor_[rank]++];
  }
  return nullptr;
}

absl::Status SymbolicRun::CheckStepMatchesPlan(int rank, int round, const ProgramStep* step) {
  const Transfer* send = nullptr;
  const Transfer* receive = nullptr;
  for (const Transfer& transfer : plan_.rounds[round].transfers) {
    if (transfer.src == rank) send = &transfer;
    if (transfer.dst == rank) receive = &transfer;
  }
  const RankProgram& program = programs_[rank];
  auto same = [&](const Transfer* transfer, int32_t peer, int32_t first, int32_t count,
                  const char* what) -> absl::Status {
    const int32_t expected_peer =
        transfer == nullptr ? -1 : (transfer->src == rank ? transfer->dst : transfer->src);
    const int32_t actual_peer = step == nullptr ? -1 : peer;
    const std::vector<int32_t> expected =
        transfer == nullptr
            ? std::vector<int32_t>{}
            : std::vector<int32_t>(transfer->chunks.begin(), transfer->chunks.end());
    const std::vector<int32_t> actual =
        step == nullptr ? std::vector<int32_t>{} : ChunksOf(program, first, count);
    if (expected_peer != actual_peer || expected != actual) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " round ", round, ": the program ", what, " ", actual.size(),
                       " chunks with rank ", actual_peer, ", the plan ", expected.size(),
                       " with rank ", expected_peer));
    }
    return absl::OkStatus();
  };
  if (absl::Status status =
          step == nullptr ? same(send, -1, 0, 0, "sends")
                          : same(send, step->send_peer, step->first_send, step->num_sends, "sends");
      !status.ok()) {
    return status;
  }
  if (absl::Status status = step == nullptr ? same(receive, -1, 0, 0, "receives")
                                            : same(receive, step->receive_peer, step->first_receive,
                                                   step->num_receives, "receives");
      !status.ok()) {
    return status;
  }
  const bool same_chunks = send != nullptr && receive != nullptr && send->chunks == receive->chunks;
  if (step != nullptr && step->same_chunks_both_ways != same_chunks) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " round ", round, ": same_chunks_both_ways is ",
                     step->same_chunks_both_ways, ", not ", same_chunks));
  }
  if (step != nullptr && ((receive != nullptr && step->receive_op != receive->op) ||
                          (send != nullptr && step->send_op != send->op))) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " round ", round, ": the program's ",
                     receive != nullptr && step->receive_op != receive->op ? "receive" : "send",
                     " has the wrong op"));
  }
  return absl::OkStatus();
}

absl::Status SymbolicRun::Send(int rank, const ProgramStep& step, std::vector<Value>& sent) {
  const RankProgram& program = programs_[rank];
  const int32_t index = static_cast<int32_t>(&step - program.steps.data());
  for (int32_t i = step.first_send; i < step.first_send + step.num_sends; ++i) {
    const ProgramExtent& extent = program.extents[i];
    for (int32_t chunk = extent.first_chunk; chunk < extent.first_chunk + extent.num_chunks;
         ++chunk) {
      const Value& value = At(rank, extent.buffer, chunk);
      if (value != plan_values_[rank][chunk]) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", rank, " round ", step.round, " sends chunk ", chunk, " from its ",
                         BufferName(extent.buffer), ", which holds ", Describe(value),
                         "; the plan's value is ", Describe(plan_values_[rank][chunk])));
      }
      sent.push_back(value);
      if (extent.buffer == Buffer::kResult || InPlace()) loans_[rank][chunk].insert(index);
    }
  }
  return absl::OkStatus();
}

absl::Status SymbolicRun::Receive(int rank, const ProgramStep& step,
                                  const std::vector<Value>& incoming) {
  const RankProgram& program = programs_[rank];
  std::set<int32_t> sent_now;
  for (int32_t chunk : ChunksOf(program, step.first_send, step.num_sends)) sent_now.insert(chunk);
  size_t at = 0;
  for (int32_t i = step.first_receive; i < step.first_receive + step.num_receives; ++i) {
    const ProgramExtent& extent = program.extents[i];
    if (extent.first_wait < 0 ||
        extent.first_wait + extent.num_waits > static_cast<int32_t>(program.waits.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " round ", step.round, ": waits out of range"));
    }
    const std::set<int32_t> waits(program.waits.begin() + extent.first_wait,
                                  program.waits.begin() + extent.first_wait + extent.num_waits);
    for (int32_t chunk = extent.first_chunk; chunk < extent.first_chunk + extent.num_chunks;
         ++chunk, ++at) {
      const std::string where =
          absl::StrCat("rank ", rank, " round ", step.round, " chunk ", chunk);
      if (sent_now.contains(chunk) != extent.overlaps_send) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": overlaps_send is ", extent.overlaps_send, " but the step ",
                         sent_now.contains(chunk) ? "sends" : "does not send", " the chunk"));
      }
      for (int32_t loan : loans_[rank][chunk]) {
        if (!waits.contains(loan)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": overwritten while rank ", program.steps[loan].send_peer,
                           " may still read it (lent in round ", program.steps[loan].round,
                           ") without waiting for it"));
        }
      }
      loans_[rank][chunk].clear();
      Value updated = incoming[at];
      if (step.receive_op == TransferOp::kReduce) {
        const Value& own = At(rank, extent.buffer, chunk);
        if (own != plan_values_[rank][chunk]) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": reduces into its ", BufferName(extent.buffer), ", which holds ",
              Describe(own), "; the plan's value is ", Describe(plan_values_[rank][chunk])));
        }
        for (int m = 0; m <= n_; ++m) updated[m] = updated[m] || own[m];
      }
      result_[rank][chunk] = std::move(updated);
      written_[rank][chunk] = true;
    }
  }
  return absl::OkStatus();
}

absl::Status SymbolicRun::Finish(int rank) {
  const RankProgram& program = programs_[rank];
  for (const ProgramExtent& extent : program.finish) {
    for (int32_t chunk = extent.first_chunk; chunk < extent.first_chunk + extent.num_chunks;
         ++chunk) {
      if (chunk < 0 || chunk >= plan_.num_chunks || written_[rank][chunk] || InPlace()) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": the finish copies chunk ",
                                                       chunk, " over what the steps wrote"));
      }
      result_[rank][chunk] = input_[rank][chunk];
    }
  }
  Value complete(n_ + 1, true);
  complete[n_] = false;
  for (int32_t chunk = 0; chunk < plan_.num_chunks; ++chunk) {
    if (result_[rank][chunk] != complete) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " ends with chunk ", chunk,
                                                     " holding ", Describe(result_[rank][chunk])));
    }
  }
  return absl::OkStatus();
}

absl::Status SymbolicRun::Run() {
  if (absl::Status status = CheckHeaders(); !status.ok()) return status;
  // In place, the result is the input's memory: it starts with the rank's own contribution.
  if (InPlace()) result_ = input_;
  if (absl::Status status = StartAfterPreArrival(); !status.ok()) return status;
  const int first_round = programs_[0].placement.native_pre_arrival ? plan_.pre_arrival_rounds : 0;
  for (int round = first_round; round < plan_.num_rounds(); ++round) {
    std::vector<const ProgramStep*> steps(n_);
    for (int rank = 0; rank < n_; ++rank) {
      steps[rank] = StepFor(rank, round);
      if (absl::Status status = CheckStepMatchesPlan(rank, round, steps[rank]); !status.ok()) {
        return status;
      }
    }
    // Every send reads the start of the round; then every receive lands.
    std::vector<std::vector<Value>> sent(n_);
    for (int rank = 0; rank < n_; ++rank) {
      if (steps[rank] == nullptr) continue;
      if (absl::Status status = Send(rank, *steps[rank], sent[rank]); !status.ok()) return status;
    }
    for (int rank = 0; rank < n_; ++rank) {
      const ProgramStep* step = steps[rank];
      if (step == nullptr || step->receive_peer < 0) continue;
      if (absl::Status status = Receive(rank, *step, sent[step->receive_peer]); !status.ok()) {
        return status;
      }
    }
    ApplyPlanRound(round);
  }
  for (int rank = 0; rank < n_; ++rank) {
    if (cursor_[rank] != programs_[rank].steps.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank,
                       " has steps for rounds the plan does not have, or the "
                       "pre-arrival rounds it should skip"));
    }
    if (absl::Status status = Finish(rank); !status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckPrograms(const Plan& plan, absl::Span<const RankProgram> programs) {
  if (plan.num_ranks < 1 || plan.num_chunks < 1 || programs.empty()) {
    return absl::InvalidArgumentError("an empty plan or no programs");
  }
  return SymbolicRun(plan, programs).Run();
}

}  // namespace stragglar
