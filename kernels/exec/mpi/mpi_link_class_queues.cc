#include "kernels/exec/mpi/mpi_link_class_queues.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/exec/mpi/mpi_executor.h"
#include "kernels/exec/mpi/mpi_wire.h"

namespace stragglar {
namespace {

// Per thread, reused across calls: where each queue's receive lands when it cannot land in
// place, and the buffers of sends whose extents are packed into one message.
thread_local std::vector<std::byte> landing[kNumLinkClasses];
thread_local std::vector<std::vector<std::byte>> spare_packs;

// One call on the queues: per chunk, how many receives have been applied to it and how many
// sends of it have completed; per queue, the next send to post and the receive in flight.
class MpiQueueRun {
 public:
  MpiQueueRun(const LinkClassQueues& queues, const MpiMessages& messages, MPI_Comm comm,
              int64_t max_message_bytes, MpiAlarm* alarm)
      : queues_(queues),
        messages_(messages),
        program_(messages.program()),
        comm_(comm),
        max_message_bytes_(max_message_bytes),
        alarm_(alarm),
        writes_done_(program_.num_chunks, 0),
        sends_done_(program_.num_chunks, 0),
        requests_(kNumLinkClasses, MPI_REQUEST_NULL) {}

  // RunQueues, then on a failure: the receives still posted cancelled, the sends let go.
  absl::Status Run();

 private:
  absl::Status RunQueues();
  struct Receiving {
    bool landed = false;    // its message is in
    bool in_place = false;  // it landed in the result: nothing left to apply
  };

  bool Met(const QueuedTransfer& transfer) const {
    return queues_.Met(transfer, writes_done_, sends_done_);
  }
  bool Done() const {
    for (int c = 0; c < kNumLinkClasses; ++c) {
      if (next_send_[c] < queues_.sends[c].size() || next_receive_[c] < queues_.receives[c].size())
        return false;
    }
    return true;
  }
  int64_t ReceiveBytes(const ProgramStep& step) const {
    return messages_.ExtentsBytes(step.first_receive, step.num_receives);
  }
  absl::Status PostReadySends(bool& progressed);
  absl::Status PostReceive(int link_class);
  absl::Status ApplyLandedReceives(bool& progressed);
  // Blocks until a request completes, then records what completed.
  absl::Status WaitForAny();
  absl::Status Stuck() const;

  const LinkClassQueues& queues_;
  const MpiMessages& messages_;
  const RankProgram& program_;
  MPI_Comm comm_;
  const int64_t max_message_bytes_;
  MpiAlarm* alarm_;  // may be null
  std::vector<int32_t> writes_done_;
  std::vector<int32_t> sends_done_;
  size_t next_send_[kNumLinkClasses] = {};
  size_t next_receive_[kNumLinkClasses] = {};
  Receiving receiving_[kNumLinkClasses];
  // requests_[c], c < kNumLinkClasses: queue c's receive in flight (MPI_REQUEST_NULL when none).
  // After them, the sends in flight, in step order per queue: step send_steps_[i] and its packed
  // message packs_[i] (empty when it was sent from the chunks in place).
  std::vector<MPI_Request> requests_;
  std::vector<int32_t> send_steps_;
  std::vector<std::vector<std::byte>> packs_;
  std::vector<int> completed_;
  std::vector<MPI_Status> statuses_;
};

absl::Status MpiQueueRun::PostReadySends(bool& progressed) {
  for (int c = 0; c < kNumLinkClasses; ++c) {
    const std::vector<QueuedTransfer>& sends = queues_.sends[c];
    for (size_t& next = next_send_[c]; next < sends.size() && Met(sends[next]); ++next) {
      const ProgramStep& step = program_.steps[sends[next].step];
      std::vector<std::byte> pack;
      if (step.num_sends > 1 && !spare_packs.empty()) {
        pack = std::move(spare_packs.back());
        spare_packs.pop_back();
      }
      const std::byte* data = messages_.SendData(step, pack);
      absl::StatusOr<WireMessage> wire = WireMessage::Of(
          messages_.ExtentsBytes(step.first_send, step.num_sends), max_message_bytes_);
      if (!wire.ok()) return wire.status();
      MPI_Request request = MPI_REQUEST_NULL;
      if (int code = PMPI_Isend(data, wire->count(), wire->type(), step.send_peer, step.round,
                                comm_, &request);
          code != MPI_SUCCESS) {
        return MpiCallFailed("MPI_Isend", code);
      }
      requests_.push_back(request);
      send_steps_.push_back(sends[next].step);
      packs_.push_back(std::move(pack));  // a vector's bytes stay where they are when it moves
      progressed = true;
    }
  }
  return absl::OkStatus();
}

absl::Status MpiQueueRun::PostReceive(int link_class) {
  if (next_receive_[link_class] >= queues_.receives[link_class].size()) return absl::OkStatus();
  const QueuedTransfer& transfer = queues_.receives[link_class][next_receive_[link_class]];
  const ProgramStep& step = program_.steps[transfer.step];
  const int64_t bytes = ReceiveBytes(step);
  // In place only when nothing may still read or write those chunks first.
  const bool in_place = messages_.ReceivesInPlace(step) && Met(transfer);
  std::vector<std::byte>& buffer = landing[link_class];
  if (!in_place && buffer.size() < static_cast<size_t>(bytes)) buffer.resize(bytes);
  std::byte* target = in_place
                          ? messages_.ResultChunk(program_.extents[step.first_receive].first_chunk)
                          : buffer.data();
  receiving_[link_class] = {.landed = false, .in_place = in_place};
  absl::StatusOr<WireMessage> wire = WireMessage::Of(bytes, max_message_bytes_);
  if (!wire.ok()) return wire.status();
  if (int code = PMPI_Irecv(target, wire->count(), wire->type(), step.receive_peer, step.round,
                            comm_, &requests_[link_class]);
      code != MPI_SUCCESS) {
    return MpiCallFailed("MPI_Irecv", code);
  }
  return absl::OkStatus();
}

absl::Status MpiQueueRun::ApplyLandedReceives(bool& progressed) {
  for (int c = 0; c < kNumLinkClasses; ++c) {
    if (!receiving_[c].landed) continue;
    const QueuedTransfer& transfer = queues_.receives[c][next_receive_[c]];
    if (!Met(transfer)) continue;
    const ProgramStep& step = program_.steps[transfer.step];
    if (!receiving_[c].in_place) messages_.Apply(step, 0, ReceiveBytes(step), landing[c].data());
    ForEachChunk(program_, step.first_receive, step.num_receives,
                 [&](int32_t chunk) { ++writes_done_[chunk]; });
    receiving_[c] = {};
    ++next_receive_[c];
    progressed = true;
    if (absl::Status status = PostReceive(c); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status MpiQueueRun::WaitForAny() {
  // Nothing in flight: as MPI_Waitsome says of an array of MPI_REQUEST_NULL, not a wait for the
  // alarm alone.
  if (std::all_of(requests_.begin(), requests_.end(),
                  [](MPI_Request r) { return r == MPI_REQUEST_NULL; })) {
    return Stuck();
  }
  // The alarm waits last, for the time of the wait.
  const bool alarmed = alarm_ != nullptr;
  if (alarmed) requests_.push_back(alarm_->request());
  completed_.resize(requests_.size());
  statuses_.resize(requests_.size());
  int count = 0;
  const int code = PMPI_Waitsome(static_cast<int>(requests_.size()), requests_.data(), &count,
                                 completed_.data(), statuses_.data());
  const int alarm_index = static_cast<int>(requests_.size()) - 1;
  if (alarmed) {
    alarm_->request() = requests_.back();
    requests_.pop_back();
  }
  if (code != MPI_SUCCESS) return MpiCallFailed("MPI_Waitsome", code);
  if (count == MPI_UNDEFINED) return Stuck();
  for (int k = 0; k < count; ++k) {
    if (alarmed && completed_[k] == alarm_index) return MpiAlarm::Interrupted();
  }
  for (int k = 0; k < count; ++k) {
    const int index = completed_[k];
    if (index < kNumLinkClasses) {
      const ProgramStep& step = program_.steps[queues_.receives[index][next_receive_[index]].step];
      absl::StatusOr<WireMessage> wire = WireMessage::Of(ReceiveBytes(step), max_message_bytes_);
      if (!wire.ok()) return wire.status();
      const int64_t received = wire->ReceivedBytes(statuses_[k]);
      if (received != ReceiveBytes(step)) {
        return MismatchedCounts(step.receive_peer, received, step.round, program_.rank,
                                ReceiveBytes(step));
      }
      receiving_[index].landed = true;
      continue;
    }
    const ProgramStep& step = program_.steps[send_steps_[index - kNumLinkClasses]];
    ForEachChunk(program_, step.first_send, step.num_sends,
                 [&](int32_t chunk) { ++sends_done_[chunk]; });
  }
  // Drop the completed sends (MPI has set their requests to MPI_REQUEST_NULL), keeping the
  // others in order.
  size_t kept = kNumLinkClasses;
  for (size_t i = kNumLinkClasses; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) {
      std::vector<std::byte>& pack = packs_[i - kNumLinkClasses];
      if (pack.capacity() > 0) spare_packs.push_back(std::move(pack));
      continue;
    }
    if (kept != i) {  // a vector moved onto itself would lose the bytes MPI is still sending
      requests_[kept] = requests_[i];
      send_steps_[kept - kNumLinkClasses] = send_steps_[i - kNumLinkClasses];
      packs_[kept - kNumLinkClasses] = std::move(packs_[i - kNumLinkClasses]);
    }
    ++kept;
  }
  requests_.resize(kept);
  send_steps_.resize(kept - kNumLinkClasses);
  packs_.resize(kept - kNumLinkClasses);
  return absl::OkStatus();
}

absl::Status MpiQueueRun::Stuck() const {
  std::string waiting;
  for (int c = 0; c < kNumLinkClasses; ++c) {
    if (next_receive_[c] < queues_.receives[c].size()) {
      absl::StrAppend(&waiting, " receive of step ", queues_.receives[c][next_receive_[c]].step);
    }
    if (next_send_[c] < queues_.sends[c].size()) {
      absl::StrAppend(&waiting, " send of step ", queues_.sends[c][next_send_[c]].step);
    }
  }
  return absl::InternalError(absl::StrCat("rank ", program_.rank,
                                          ": transfers wait for chunks that no transfer in "
                                          "flight will provide:",
                                          waiting));
}

absl::Status MpiQueueRun::Run() {
  absl::Status status = RunQueues();
  if (status.ok()) return status;
  // A receive left posted would land in buffers that later calls use, should a message of a
  // peer's later call match it.
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    if (i < kNumLinkClasses) {
      PMPI_Cancel(&requests_[i]);
      PMPI_Wait(&requests_[i], MPI_STATUS_IGNORE);
    } else {
      PMPI_Request_free(&requests_[i]);
    }
  }
  return status;
}

absl::Status MpiQueueRun::RunQueues() {
  for (int c = 0; c < kNumLinkClasses; ++c) {
    if (absl::Status status = PostReceive(c); !status.ok()) return status;
  }
  while (!Done()) {
    bool progressed = false;
    if (absl::Status status = PostReadySends(progressed); !status.ok()) return status;
    if (absl::Status status = ApplyLandedReceives(progressed); !status.ok()) return status;
    if (progressed || Done()) continue;
    if (absl::Status status = WaitForAny(); !status.ok()) return status;
  }
  // The result may change (kAvg, chunks no transfer wrote) only once no send reads it.
  while (requests_.size() > kNumLinkClasses) {
    if (absl::Status status = WaitForAny(); !status.ok()) return status;
  }
  for (std::vector<std::byte>& pack : packs_) {
    if (pack.capacity() > 0) spare_packs.push_back(std::move(pack));
  }
  messages_.Finish();
  return absl::OkStatus();
}

}  // namespace

absl::Status RunMpiOnLinkClassQueues(const LinkClassQueues& queues, const MpiMessages& messages,
                                     MPI_Comm comm, int64_t max_message_bytes, MpiAlarm* alarm) {
  return MpiQueueRun(queues, messages, comm, max_message_bytes, alarm).Run();
}

}  // namespace stragglar
