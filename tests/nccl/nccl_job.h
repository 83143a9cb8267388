// What the GPU checks' multi-process NCCL programs share (tests/nccl/pipeline_check.cc,
// tests/nccl/watchdog_check.cc): the job's flags (--rank, --ranks, --device, --id_file; Abseil
// flags, defined in nccl_job.cc), exits on CUDA and NCCL errors (77 without a device), and the
// job's communicator, its NCCL unique id passed through a file (rank 0 writes it; the others wait
// for it, at most 60 s).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#define CHECK_CUDA(call)                                                     \
  do {                                                                       \
    cudaError_t e = (call);                                                  \
    if (e != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e)); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)
#define CHECK_NCCL(call)                                                     \
  do {                                                                       \
    ncclResult_t r = (call);                                                 \
    if (r != ncclSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, ncclGetErrorString(r)); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

// This process's place in the job, from its flags (after absl::ParseCommandLine); exits 2 with
// one line naming `program` when they do not make one.
struct NcclJob {
  int rank = -1;
  int ranks = 0;
  int device = 0;
  std::string id_file;
};
NcclJob NcclJobFromFlags(const char* program);

inline ncclUniqueId SharedNcclId(int rank, const std::string& id_file) {
  ncclUniqueId id;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    const std::string temporary = id_file + ".tmp";
    std::ofstream(temporary, std::ios::binary).write(id.internal, sizeof(id.internal));
    std::rename(temporary.c_str(), id_file.c_str());
    return id;
  }
  for (int wait = 0; wait < 6000; ++wait) {
    std::ifstream in(id_file, std::ios::binary);
    if (in.read(id.internal, sizeof(id.internal))) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::fprintf(stderr, "rank %d: no unique id in %s after 60 s\n", rank, id_file.c_str());
  std::exit(1);
}

// `job`'s rank on its device, joined to the job's communicator (the id through its id file,
// removed by rank 0 once it is in). Without a CUDA device, one line "SKIP: no CUDA device (...)"
// and exit 77, which the checks' scripts and ctest take as a skip.
inline ncclComm_t JoinNcclJob(const NcclJob& job) {
  int devices = 0;
  const cudaError_t found = cudaGetDeviceCount(&devices);
  if (found != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n",
                cudaGetErrorString(found != cudaSuccess ? found : cudaErrorNoDevice));
    std::exit(77);
  }
  CHECK_CUDA(cudaSetDevice(job.device));
  const ncclUniqueId id = SharedNcclId(job.rank, job.id_file);
  ncclComm_t comm = nullptr;
  CHECK_NCCL(ncclCommInitRank(&comm, job.ranks, id, job.rank));
  if (job.rank == 0) std::remove(job.id_file.c_str());
  return comm;
}
