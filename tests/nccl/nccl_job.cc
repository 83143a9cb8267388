#include "tests/nccl/nccl_job.h"

#include <cstdio>
#include <cstdlib>

#include "absl/flags/flag.h"

ABSL_FLAG(int, rank, -1, "this process's rank");
ABSL_FLAG(int, ranks, 0, "the job's ranks (>= 2)");
ABSL_FLAG(int, device, 0, "the CUDA device");
ABSL_FLAG(std::string, id_file, "", "where rank 0 writes NCCL's unique id for the others");

NcclJob NcclJobFromFlags(const char* program) {
  const NcclJob job{.rank = absl::GetFlag(FLAGS_rank),
                    .ranks = absl::GetFlag(FLAGS_ranks),
                    .device = absl::GetFlag(FLAGS_device),
                    .id_file = absl::GetFlag(FLAGS_id_file)};
  if (job.rank < 0 || job.ranks < 2 || job.rank >= job.ranks || job.id_file.empty()) {
    std::fprintf(stderr, "%s: needs --rank R --ranks N (0 <= R < N, N >= 2) --id_file FILE\n",
                 program);
    std::exit(2);
  }
  return job;
}
