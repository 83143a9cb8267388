#include "runtime/mpi/host_call_counts.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

constexpr int kNameBytes = 64;

}  // namespace

std::unique_ptr<HostCallCounts> HostCallCounts::Create(MPI_Comm comm, std::vector<int> host_ranks) {
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  const int self =
      static_cast<int>(std::find(host_ranks.begin(), host_ranks.end(), rank) - host_ranks.begin());
  const size_t bytes = host_ranks.size() * sizeof(int64_t);
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
  // Every host's name in one gather of the communicator, each rank reading its host's.
  std::vector<char> names(static_cast<size_t>(size) * kNameBytes);
  PMPI_Allgather(name, kNameBytes, MPI_CHAR, names.data(), kNameBytes, MPI_CHAR, comm);
  const char* leaders = names.data() + static_cast<size_t>(host_ranks.front()) * kNameBytes;
  if (self != 0 && leaders[0] != '\0') fd = shm_open(leaders, O_RDWR, 0600);
  void* mapped = MAP_FAILED;
  if (fd >= 0 && leaders[0] != '\0') {
    mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (fd >= 0) close(fd);
  PMPI_Barrier(comm);  // every rank has opened it
  if (self == 0 && name[0] != '\0') shm_unlink(name);
  if (mapped == MAP_FAILED) return nullptr;
  return std::unique_ptr<HostCallCounts>(
      new HostCallCounts(static_cast<int64_t*>(mapped), std::move(host_ranks), self));
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
