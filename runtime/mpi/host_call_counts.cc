#include "runtime/mpi/host_call_counts.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

constexpr int kNameBytes = 64;

}  // namespace

std::unique_ptr<HostCallCounts> HostCallCounts::Create(MPI_Comm node, std::vector<int> comm_ranks) {
  int self = 0;
  PMPI_Comm_rank(node, &self);
  const size_t bytes = comm_ranks.size() * sizeof(int64_t);
  // The host's lowest rank makes the segment and names it; every rank maps it, then it is
  // unlinked, so that nothing is left behind whatever happens to the job.
  char name[kNameBytes] = {};
  int fd = -1;
  if (self == 0) {
    static std::atomic<int> made{0};
    const std::string chosen = absl::StrCat("/stragglar-calls-", getpid(), "-", made++);
    fd = shm_open(chosen.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
      std::strncpy(name, chosen.c_str(), kNameBytes - 1);
    }
  }
  PMPI_Bcast(name, kNameBytes, MPI_CHAR, 0, node);
  if (self != 0 && name[0] != '\0') fd = shm_open(name, O_RDWR, 0600);
  void* mapped = MAP_FAILED;
  if (fd >= 0 && name[0] != '\0') {
    mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (fd >= 0) close(fd);
  PMPI_Barrier(node);  // every rank has opened it
  if (self == 0 && name[0] != '\0') shm_unlink(name);
  if (mapped == MAP_FAILED) return nullptr;
  return std::unique_ptr<HostCallCounts>(
      new HostCallCounts(static_cast<int64_t*>(mapped), std::move(comm_ranks), self));
}

HostCallCounts::~HostCallCounts() { munmap(counts_, comm_ranks_.size() * sizeof(int64_t)); }

void HostCallCounts::Entered(int64_t calls) {
  std::atomic_ref<int64_t>(counts_[self_]).store(calls, std::memory_order_relaxed);
}

std::vector<int> HostCallCounts::Behind(int64_t calls) const {
  std::vector<int> behind;
  for (size_t i = 0; i < comm_ranks_.size(); ++i) {
    if (std::atomic_ref<int64_t>(counts_[i]).load(std::memory_order_relaxed) < calls) {
      behind.push_back(comm_ranks_[i]);
    }
  }
  return behind;
}

}  // namespace stragglar
