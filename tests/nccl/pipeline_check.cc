// A pipeline of N ranks over NCCL point-to-point, for the link profiling check on a GPU
// (tests/nccl/link_check.sh): each rank is one process (started by the script, one GPU or
// several), every iteration runs M micro-batches forward (activations rank r -> r + 1) and
// backward (gradients r + 1 -> r), every transfer carries a pattern of its iteration, micro-batch,
// sender and direction, and the receiver checks it byte for byte. Every other iteration's forward
// transfers go in two halves, grouped at both ends, so that group timing runs too.
//
// usage: pipeline_check --rank R --ranks N --id-file FILE [--iterations 40] [--microbatches 8]
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

#include "tests/nccl/nccl_job.h"

namespace {

struct Options {
  int rank = -1, ranks = 0, iterations = 40, microbatches = 8, device = 0;
  size_t bytes = 16 << 20;
  std::string id_file;
};

Options Parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rank")
      options.rank = std::atoi(value.c_str());
    else if (flag == "--ranks")
      options.ranks = std::atoi(value.c_str());
    else if (flag == "--iterations")
      options.iterations = std::atoi(value.c_str());
    else if (flag == "--microbatches")
      options.microbatches = std::atoi(value.c_str());
    else if (flag == "--bytes")
      options.bytes = std::strtoull(value.c_str(), nullptr, 10);
    else if (flag == "--device")
      options.device = std::atoi(value.c_str());
    else if (flag == "--id-file")
      options.id_file = value;
    else {
      std::fprintf(stderr, "pipeline_check: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (options.rank < 0 || options.ranks < 2 || options.rank >= options.ranks ||
      options.id_file.empty() || options.bytes == 0 || options.microbatches < 1) {
    std::fprintf(stderr, "usage: pipeline_check --rank R --ranks N --id-file FILE ...\n");
    std::exit(2);
  }
  return options;
}

// The bytes of one transfer: from its iteration, micro-batch, sender and direction.
void Fill(std::vector<uint8_t>& data, int iteration, int microbatch, int sender, int gradient) {
  const uint32_t seed = iteration * 2654435761u + microbatch * 40503u + sender * 97u + gradient;
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 8));
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = Parse(argc, argv);
  ncclComm_t comm = JoinNcclJob(options.rank, options.ranks, options.device, options.id_file);
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int rank = options.rank, last = options.ranks - 1;
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
  }
  std::printf("rank %d: %lld transfers, %lld wrong bytes\n", rank,
              static_cast<long long>(transfers), static_cast<long long>(wrong));
  std::fflush(stdout);
  CHECK_NCCL(ncclCommDestroy(comm));
  return wrong == 0 ? 0 : 1;
}
