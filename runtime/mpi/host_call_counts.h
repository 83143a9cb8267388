// How many calls each rank of this host has entered on one communicator, in memory the host's
// ranks share (POSIX shared memory), so that the call watchdog can say which of them have not
// entered the library's own collective: its waits are inside the MPI library, where the preload
// cannot see whom it waits for. Ranks on other hosts would need a message; they are not counted.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace stragglar {

class HostCallCounts {
 public:
  // Collective over `comm` (two of its collectives: a gather of the segments' names, a barrier):
  // `host_ranks` are the ranks of `comm` on this host, in order, this rank among them. nullptr
  // where shared memory cannot be had (this rank then counts nothing; the others still do).
  static std::unique_ptr<HostCallCounts> Create(MPI_Comm comm, std::vector<int> host_ranks);
  ~HostCallCounts();
  HostCallCounts(const HostCallCounts&) = delete;
  HostCallCounts& operator=(const HostCallCounts&) = delete;

  // This rank has entered `calls` calls (a relaxed store; the calling thread's only cost).
  void Entered(int64_t calls);
  // The communicator ranks of this host that have entered fewer than `calls` calls.
  std::vector<int> Behind(int64_t calls) const;

 private:
  HostCallCounts(int64_t* counts, std::vector<int> comm_ranks, int self)
      : counts_(counts), comm_ranks_(std::move(comm_ranks)), self_(self) {}

  int64_t* counts_;  // mapped: one per rank of this host
  std::vector<int> comm_ranks_;
  int self_;  // this rank's place among them
};

}  // namespace stragglar
