// A pipeline of N ranks over NCCL point-to-point, for the link profiling check on a GPU
// (tests/nccl/link_check.sh): each rank is one process (started by the script, one GPU or
// several), every iteration runs M micro-batches forward (activations rank r -> r + 1) and
// backward (gradients r + 1 -> r), every transfer carries a pattern of its iteration, micro-batch,
// sender and direction, and the receiver checks it byte for byte. Every other iteration's forward
// transfers go in two halves, grouped at both ends, so that group timing runs too.
//
// usage: pipeline_check --rank R --ranks N --id_file FILE [--iterations 40] [--microbatches 8]
//                       [--bytes 16777216] [--device 0]
// Rank 0 writes NCCL's unique id to FILE; the others wait for it. Prints one line per rank:
//   rank R: T transfers, W wrong bytes
// and exits 1 on any wrong byte or NCCL/CUDA error.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "tests/nccl/nccl_job.h"

ABSL_FLAG(int, iterations, 40, "pipeline iterations");
ABSL_FLAG(int, microbatches, 8, "micro-batches per iteration");
ABSL_FLAG(size_t, bytes, 16 << 20, "bytes per transfer");

namespace {

// The flags of one run.
struct Options {
  NcclJob job;
  int iterations, microbatches;
  size_t bytes;
};

// The bytes of one transfer: from its iteration, micro-batch, sender and direction.
void Fill(std::vector<uint8_t>& data, int iteration, int microbatch, int sender, int gradient) {
  const uint32_t seed = iteration * 2654435761u + microbatch * 40503u + sender * 97u + gradient;
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 8));
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const Options options{.job = NcclJobFromFlags("pipeline_check"),
                        .iterations = absl::GetFlag(FLAGS_iterations),
                        .microbatches = absl::GetFlag(FLAGS_microbatches),
                        .bytes = absl::GetFlag(FLAGS_bytes)};
  if (options.bytes == 0 || options.microbatches < 1) {
    std::fprintf(stderr, "pipeline_check: --bytes and --microbatches must be positive\n");
    return 2;
  }
  ncclComm_t comm = JoinNcclJob(options.job);
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int rank = options.job.rank, last = options.job.ranks - 1;
  const int m_count = options.microbatches;
  // One device buffer per micro-batch and direction.
  std::vector<uint8_t*> in_act(m_count), out_act(m_count), in_grad(m_count), out_grad(m_count);
  for (auto* buffers : {&in_act, &out_act, &in_grad, &out_grad}) {
    for (uint8_t*& buffer : *buffers) CHECK_CUDA(cudaMalloc(&buffer, options.bytes));
  }
  std::vector<uint8_t> host(options.bytes), expected(options.bytes);
  int64_t transfers = 0, wrong = 0;
  const auto check = [&](uint8_t* device, int iteration, int m, int sender, int gradient) {
    CHECK_CUDA(cudaMemcpyAsync(host.data(), device, options.bytes, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    Fill(expected, iteration, m, sender, gradient);
    for (size_t i = 0; i < options.bytes; ++i) wrong += host[i] != expected[i];
    ++transfers;
  };
  const auto stage = [&](uint8_t* device, int iteration, int m, int gradient) {
    Fill(host, iteration, m, rank, gradient);
    CHECK_CUDA(cudaMemcpyAsync(device, host.data(), options.bytes, cudaMemcpyHostToDevice, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
  };
  for (int it = 0; it < options.iterations; ++it) {
    // Every other iteration each forward transfer goes in two halves, in one group at each end
    // (one peer: the preload times such a group as one unit).
    const bool grouped = it % 2 == 1;
    const size_t half = options.bytes / 2;
    const auto transfer = [&](bool send, uint8_t* data, int peer) {
      if (!grouped) {
        CHECK_NCCL(send ? ncclSend(data, options.bytes, ncclUint8, peer, comm, stream)
                        : ncclRecv(data, options.bytes, ncclUint8, peer, comm, stream));
        return;
      }
      CHECK_NCCL(ncclGroupStart());
      for (auto [offset, bytes] :
           {std::pair{size_t{0}, half}, std::pair{half, options.bytes - half}}) {
        CHECK_NCCL(send ? ncclSend(data + offset, bytes, ncclUint8, peer, comm, stream)
                        : ncclRecv(data + offset, bytes, ncclUint8, peer, comm, stream));
      }
      CHECK_NCCL(ncclGroupEnd());
    };
    for (int m = 0; m < m_count; ++m) {  // forward, one micro-batch after another
      if (rank > 0) {
        transfer(/*send=*/false, in_act[m], rank - 1);
        check(in_act[m], it, m, rank - 1, 0);
      }
      if (rank < last) {
        stage(out_act[m], it, m, 0);
        transfer(/*send=*/true, out_act[m], rank + 1);
        ++transfers;
      }
    }
    for (int m = 0; m < m_count; ++m) {  // backward
      if (rank < last) {
        CHECK_NCCL(ncclRecv(in_grad[m], options.bytes, ncclUint8, rank + 1, comm, stream));
        check(in_grad[m], it, m, rank + 1, 1);
      }
      if (rank > 0) {
        stage(out_grad[m], it, m, 1);
        CHECK_NCCL(ncclSend(out_grad[m], options.bytes, ncclUint8, rank - 1, comm, stream));
        ++transfers;
      }
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    if ((it + 1) % 10 == 0) {  // so that a run cut off by its time limit shows how far it got
      std::printf("rank %d: iteration %d of %d done\n", rank, it + 1, options.iterations);
      std::fflush(stdout);
    }
  }
  std::printf("rank %d: %lld transfers, %lld wrong bytes\n", rank,
              static_cast<long long>(transfers), static_cast<long long>(wrong));
  std::fflush(stdout);
  CHECK_NCCL(ncclCommDestroy(comm));
  return wrong == 0 ? 0 : 1;
}
