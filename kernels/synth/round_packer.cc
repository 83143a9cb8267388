#include "kernels/synth/round_packer.h"

#include <algorithm>

namespace stragglar {
namespace {

constexpr uint8_t kSending = 1;
constexpr uint8_t kReceiving = 2;

}  // namespace

RoundPacker::RoundPacker(int num_ranks, int num_chunks)
    : num_ranks_(num_ranks),
      num_chunks_(num_chunks),
      last_write_(static_cast<size_t>(num_ranks) * num_chunks, -1),
      last_read_(static_cast<size_t>(num_ranks) * num_chunks, -1) {}

bool RoundPacker::PortsFree(int round, const std::vector<Transfer>& group) const {
  if (round >= num_rounds()) return true;
  const std::vector<uint8_t>& busy = busy_[round];
  return std::all_of(group.begin(), group.end(), [&](const Transfer& transfer) {
    return (busy[transfer.src] & kSending) == 0 && (busy[transfer.dst] & kReceiving) == 0;
  });
}

int RoundPacker::Place(std::vector<Transfer> group, int not_before) {
  int round = not_before;
  for (const Transfer& transfer : group) {
    for (int32_t chunk : transfer.chunks) {
      round = std::max(round, LastWrite(transfer.src, chunk) + 1);  // read after write
      round = std::max(round, LastWrite(transfer.dst, chunk) + 1);  // write after write
      round = std::max(round, LastRead(transfer.dst, chunk));       // write after read
    }
  }
  while (!PortsFree(round, group)) ++round;
  while (num_rounds() <= round) {
    rounds_.emplace_back();
    busy_.emplace_back(num_ranks_, 0);
  }
  for (const Transfer& transfer : group) {
    busy_[round][transfer.src] |= kSending;
    busy_[round][transfer.dst] |= kReceiving;
    for (int32_t chunk : transfer.chunks) {
      LastRead(transfer.src, chunk) = std::max(LastRead(transfer.src, chunk), round);
      if (transfer.op == TransferOp::kReduce) {
        LastRead(transfer.dst, chunk) = std::max(LastRead(transfer.dst, chunk), round);
      }
      LastWrite(transfer.dst, chunk) = round;
    }
  }
  std::vector<Transfer>& transfers = rounds_[round].transfers;
  transfers.insert(transfers.end(), std::make_move_iterator(group.begin()),
                   std::make_move_iterator(group.end()));
  return round;
}

}  // namespace stragglar
