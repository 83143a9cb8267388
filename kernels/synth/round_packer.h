// Packs a correct serial schedule into few rounds. A plan family is easiest to write, and to get
// right, as a list of groups executed one per round: every phase in turn, on every node, every
// rail. Run like that it wastes rounds, since phases on different ranks and chunks could overlap.
// The packer places each group, in list order, in the earliest round that keeps the list's
// meaning and the port model:
//  - a group reads its senders' chunks and writes its receivers' chunks (a reduce also reads
//    them); it goes after every earlier group that wrote a cell it reads or writes, and not before
//    an earlier group that read a cell it writes (reads see the start of their round, so the same
//    round is fine);
//  - every rank sends at most one and receives at most one transfer per round.
// A group stays in one round: its transfers may exchange chunks and rely on reading each other's
// old values. The packed rounds mean what the list means, so a family checked as a list is still
// correct packed; VerifyPlan checks the result anyway.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/plan/plan.h"

namespace stragglar {

class RoundPacker {
 public:
  RoundPacker(int num_ranks, int num_chunks);

  // Places `group` (transfers with ranks and chunks in range; at most one send and one receive per
  // rank) in the earliest round >= `not_before` allowed by the groups placed so far, and returns
  // that round.
  int Place(std::vector<Transfer> group, int not_before = 0);

  int num_rounds() const { return static_cast<int>(rounds_.size()); }
  std::vector<Round> TakeRounds() { return std::move(rounds_); }

 private:
  int32_t& LastWrite(int rank, int chunk) { return last_write_[Cell(rank, chunk)]; }
  int32_t& LastRead(int rank, int chunk) { return last_read_[Cell(rank, chunk)]; }
  size_t Cell(int rank, int chunk) const { return static_cast<size_t>(rank) * num_chunks_ + chunk; }
  bool PortsFree(int round, const std::vector<Transfer>& group) const;

  int num_ranks_;
  int num_chunks_;
  std::vector<int32_t> last_write_;  // per (rank, chunk): the last round writing it, -1: none
  std::vector<int32_t> last_read_;   // per (rank, chunk): the last round reading it, -1: none
  // Per round and rank: bit 0 sending, bit 1 receiving.
  std::vector<std::vector<uint8_t>> busy_;
  std::vector<Round> rounds_;
};

}  // namespace stragglar
