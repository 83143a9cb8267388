#include "kernels/exec/mpi/mpi_link_class_queues.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/exec/mpi/mpi_executor.h"
#include "kernels/exec/mpi/mpi_network.h"
#include "kernels/exec/mpi/mpi_wire.h"

namespace stragglar {
namespace {

// The queue of transfers with peers on other nodes: the one cut into network messages.
constexpr int kNetworkClass = 1;

// Per thread, reused across calls: where each queue's receive lands when it cannot land in
// place, and the buffers of sends whose extents are packed into one message.
thread_local std::vector<std::byte> landing[kNumLinkClasses];
thread_local std::vector<std::vector<std::byte>> spare_packs;

// One call on the queues: per chunk, how many receives have been applied to it and how many
// sends of it have completed; per queue, the next send to post and the receive in flight.
class MpiQueueRun {
 public:
  MpiQueueRun(const LinkClassQueues& queues, const MpiMessages& messages, MPI_Comm comm,
              const QueueMessages& cut, std::optional<ReadyTags> ready_tags, MpiAlarm* alarm)
      : queues_(queues),
        messages_(messages),
        program_(messages.program()),
        comm_(comm),
        cut_(cut),
        ready_tags_(ready_tags),
        alarm_(alarm),
        writes_done_(program_.num_chunks, 0),
        sends_done_(program_.num_chunks, 0) {}

  // RunQueues, then on a failure: the receives still posted cancelled, the sends let go.
  absl::Status Run();

 private:
  absl::Status RunQueues();
  // What a request in flight is for.
  enum class Purpose { kReceive, kSend, kPeerReady, kSaidReady };
  struct InFlight {
    Purpose purpose;
    int link_class = 0;
    int32_t step = 0;  // kSend: the step whose send it is a message of
    int64_t message = 0;
  };
  struct Receiving {
    bool posted = false;
    bool in_place = false;  // it lands in the result: nothing left to apply
    int64_t bytes = 0;
    MessageCut messages;
    int64_t landed = 0;
    bool Landed() const { return posted && landed == messages.count; }
  };
  struct Sending {
    int link_class = 0;
    std::vector<std::byte> pack;  // empty when sent from the chunks in place
    const std::byte* data = nullptr;
    int64_t bytes = 0;
    MessageCut messages;
    int64_t posted = 0;
    int64_t done = 0;
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
  // Transfers on the network queue wait for their receiver to say it is ready.
  bool Handshakes(int link_class) const {
    return link_class == kNetworkClass && ready_tags_.has_value();
  }
  MessageCut CutOf(int link_class, int64_t bytes) const {
    return MessageCut::Of(bytes, link_class == kNetworkClass ? cut_.network_message_bytes : 0);
  }
  int64_t ReceiveBytes(const ProgramStep& step) const {
    return messages_.ExtentsBytes(step.first_receive, step.num_receives);
  }
  void Post(Purpose purpose, int link_class, int32_t step, int64_t message, MPI_Request request) {
    requests_.push_back(request);
    in_flight_.push_back(
        {.purpose = purpose, .link_class = link_class, .step = step, .message = message});
  }
  absl::Status PostReadySends(bool& progressed);
  absl::Status StartSend(int link_class, int32_t step_index);
  absl::Status PostMoreMessages(int32_t step_index, Sending& sending);
  absl::Status PostReceive(int link_class);
  absl::Status ApplyLandedReceives(bool& progressed);
  // Blocks until a request completes, then records what completed.
  absl::Status WaitForAny();
  absl::Status Completed(const InFlight& done, const MPI_Status& status);
  absl::Status Stuck() const;

  const LinkClassQueues& queues_;
  const MpiMessages& messages_;
  const RankProgram& program_;
  MPI_Comm comm_;
  const QueueMessages cut_;
  const std::optional<ReadyTags> ready_tags_;
  MpiAlarm* alarm_;  // may be null
  std::vector<int32_t> writes_done_;
  std::vector<int32_t> sends_done_;
  size_t next_send_[kNumLinkClasses] = {};
  size_t next_receive_[kNumLinkClasses] = {};
  Receiving receiving_[kNumLinkClasses];
  // Per queue: the send whose messages are still being posted (one at a time, in order), and
  // whether the peer of its next send has said it is ready, or is being asked.
  int32_t posting_[kNumLinkClasses] = {-1, -1};
  bool peer_ready_[kNumLinkClasses] = {};
  bool awaiting_ready_[kNumLinkClasses] = {};
  std::map<int32_t, Sending> sending_;  // by step
  // Every request in flight and what it is for, in the order posted.
  std::vector<MPI_Request> requests_;
  std::vector<InFlight> in_flight_;
  std::vector<int> completed_;
  std::vector<MPI_Status> statuses_;
  std::vector<std::pair<InFlight, MPI_Status>> done_;  // what a wait completed, reused
};

absl::Status MpiQueueRun::PostReadySends(bool& progressed) {
  for (int c = 0; c < kNumLinkClasses; ++c) {
    const std::vector<QueuedTransfer>& sends = queues_.sends[c];
    while (next_send_[c] < sends.size() && posting_[c] < 0) {
      const QueuedTransfer& transfer = sends[next_send_[c]];
      const ProgramStep& step = program_.steps[transfer.step];
      if (Handshakes(c) && !peer_ready_[c]) {
        // Asked as soon as the send is next, so that the answer is in by the time it may go.
        if (!awaiting_ready_[c]) {
          MPI_Request request = MPI_REQUEST_NULL;
          if (int code = PMPI_Irecv(nullptr, 0, MPI_BYTE, step.send_peer,
                                    ready_tags_->Of(step.round), comm_, &request);
              code != MPI_SUCCESS) {
            return MpiCallFailed("MPI_Irecv", code);
          }
          awaiting_ready_[c] = true;
          Post(Purpose::kPeerReady, c, transfer.step, 0, request);
        }
        break;
      }
      if (!Met(transfer)) break;
      if (absl::Status status = StartSend(c, transfer.step); !status.ok()) return status;
      peer_ready_[c] = false;
      ++next_send_[c];
      progressed = true;
    }
  }
  return absl::OkStatus();
}

absl::Status MpiQueueRun::StartSend(int link_class, int32_t step_index) {
  const ProgramStep& step = program_.steps[step_index];
  Sending& sending = sending_[step_index];
  sending.link_class = link_class;
  if (step.num_sends > 1 && !spare_packs.empty()) {
    sending.pack = std::move(spare_packs.back());
    spare_packs.pop_back();
  }
  sending.data = messages_.SendData(step, sending.pack);
  sending.bytes = messages_.ExtentsBytes(step.first_send, step.num_sends);
  sending.messages = CutOf(link_class, sending.bytes);
  posting_[link_class] = step_index;
  return PostMoreMessages(step_index, sending);
}

absl::Status MpiQueueRun::PostMoreMessages(int32_t step_index, Sending& sending) {
  const ProgramStep& step = program_.steps[step_index];
  for (; sending.posted < sending.messages.count && sending.posted - sending.done < kSendsInFlight;
       ++sending.posted) {
    absl::StatusOr<WireMessage> wire = WireMessage::Of(
        sending.messages.Length(sending.bytes, sending.posted), cut_.max_message_bytes);
    if (!wire.ok()) return wire.status();
    MPI_Request request = MPI_REQUEST_NULL;
    if (int code = PMPI_Isend(sending.data + sending.messages.Offset(sending.posted), wire->count(),
                              wire->type(), step.send_peer, step.round, comm_, &request);
        code != MPI_SUCCESS) {
      return MpiCallFailed("MPI_Isend", code);
    }
    Post(Purpose::kSend, sending.link_class, step_index, sending.posted, request);
  }
  if (sending.posted == sending.messages.count && posting_[sending.link_class] == step_index) {
    posting_[sending.link_class] = -1;
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
  Receiving& receiving = receiving_[link_class];
  receiving = {
      .posted = true, .in_place = in_place, .bytes = bytes, .messages = CutOf(link_class, bytes)};
  for (int64_t message = 0; message < receiving.messages.count; ++message) {
    absl::StatusOr<WireMessage> wire =
        WireMessage::Of(receiving.messages.Length(bytes, message), cut_.max_message_bytes);
    if (!wire.ok()) return wire.status();
    MPI_Request request = MPI_REQUEST_NULL;
    if (int code = PMPI_Irecv(target + receiving.messages.Offset(message), wire->count(),
                              wire->type(), step.receive_peer, step.round, comm_, &request);
        code != MPI_SUCCESS) {
      return MpiCallFailed("MPI_Irecv", code);
    }
    Post(Purpose::kReceive, link_class, transfer.step, message, request);
  }
  // Ready once every message has somewhere to land: over a link, a message that reaches a peer
  // still receiving another shares the link with it, and both arrive late
  // (mpi_executor.cc, RunStep).
  if (Handshakes(link_class)) {
    MPI_Request said = MPI_REQUEST_NULL;
    if (int code = PMPI_Isend(nullptr, 0, MPI_BYTE, step.receive_peer, ready_tags_->Of(step.round),
                              comm_, &said);
        code != MPI_SUCCESS) {
      return MpiCallFailed("MPI_Isend", code);
    }
    Post(Purpose::kSaidReady, link_class, transfer.step, 0, said);
  }
  return absl::OkStatus();
}

absl::Status MpiQueueRun::ApplyLandedReceives(bool& progressed) {
  for (int c = 0; c < kNumLinkClasses; ++c) {
    if (!receiving_[c].Landed()) continue;
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

absl::Status MpiQueueRun::Completed(const InFlight& done, const MPI_Status& status) {
  switch (done.purpose) {
    case Purpose::kReceive: {
      Receiving& receiving = receiving_[done.link_class];
      const ProgramStep& step = program_.steps[done.step];
      const int64_t length = receiving.messages.Length(receiving.bytes, done.message);
      absl::StatusOr<WireMessage> wire = WireMessage::Of(length, cut_.max_message_bytes);
      if (!wire.ok()) return wire.status();
      const int64_t received = wire->ReceivedBytes(status);
      if (received != length) {
        return MismatchedCounts(step.receive_peer, received, step.round, program_.rank, length);
      }
      ++receiving.landed;
      return absl::OkStatus();
    }
    case Purpose::kSend: {
      Sending& sending = sending_.at(done.step);
      ++sending.done;
      if (sending.done < sending.messages.count) return PostMoreMessages(done.step, sending);
      const ProgramStep& step = program_.steps[done.step];
      ForEachChunk(program_, step.first_send, step.num_sends,
                   [&](int32_t chunk) { ++sends_done_[chunk]; });
      if (sending.pack.capacity() > 0) spare_packs.push_back(std::move(sending.pack));
      sending_.erase(done.step);
      return absl::OkStatus();
    }
    case Purpose::kPeerReady:
      peer_ready_[done.link_class] = true;
      awaiting_ready_[done.link_class] = false;
      return absl::OkStatus();
    case Purpose::kSaidReady:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status MpiQueueRun::WaitForAny() {
  // Nothing in flight: as MPI_Waitsome says of no requests, not a wait for the alarm alone.
  if (requests_.empty()) return Stuck();
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
  // What completed is taken out first (MPI has set its requests to MPI_REQUEST_NULL), keeping
  // the others in order: recording it may post more.
  done_.clear();
  for (int k = 0; k < count; ++k) done_.emplace_back(in_flight_[completed_[k]], statuses_[k]);
  size_t kept = 0;
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    requests_[kept] = requests_[i];
    in_flight_[kept] = in_flight_[i];
    ++kept;
  }
  requests_.resize(kept);
  in_flight_.resize(kept);
  for (const auto& [what, status] : done_) {
    if (absl::Status recorded = Completed(what, status); !recorded.ok()) return recorded;
  }
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
    const Purpose purpose = in_flight_[i].purpose;
    if (purpose == Purpose::kReceive || purpose == Purpose::kPeerReady) {
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
  // The result may change (kAvg, chunks no transfer wrote) only once no send reads it; and every
  // ready message has gone.
  while (!requests_.empty()) {
    if (absl::Status status = WaitForAny(); !status.ok()) return status;
  }
  messages_.Finish();
  return absl::OkStatus();
}

}  // namespace

absl::Status RunMpiOnLinkClassQueues(const LinkClassQueues& queues, const MpiMessages& messages,
                                     MPI_Comm comm, const QueueMessages& cut, MpiAlarm* alarm) {
  std::optional<ReadyTags> ready_tags;
  if (cut.network_message_bytes > 0) {
    absl::StatusOr<ReadyTags> tags = ReadyTags::For(comm, messages.program());
    if (!tags.ok()) return tags.status();
    ready_tags = *tags;
  }
  return MpiQueueRun(queues, messages, comm, cut, ready_tags, alarm).Run();
}

}  // namespace stragglar
