// What an NCCL program sees, printed so that a run with libstragglar.so preloaded can be compared
// byte for byte with one without it: ncclGetVersion, ncclGetUniqueId, and (on a machine without a
// GPU) the failing ncclCommInitRank / ncclCommInitRankConfig with NCCL's own error code and
// message; with a GPU, a one-rank communicator and an AllReduce of 3 floats. Which library
// defines ncclAllReduce goes to stderr (it differs by design). Built twice: as a program, and as
// a module that local_load_check.cc loads with RTLD_LOCAL, as Python loads PyTorch and its NCCL.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>

namespace {

int Run() {
  Dl_info where{};
  dladdr(reinterpret_cast<void*>(&ncclAllReduce), &where);
  std::fprintf(stderr, "ncclAllReduce from %s\n", where.dli_fname ? where.dli_fname : "?");
  dladdr(reinterpret_cast<void*>(&ncclSend), &where);
  std::fprintf(stderr, "ncclSend from %s\n", where.dli_fname ? where.dli_fname : "?");
  int version = 0;
  ncclResult_t result = ncclGetVersion(&version);
  std::printf("ncclGetVersion: %d (%s), version %d\n", result, ncclGetErrorString(result), version);
  ncclUniqueId id;
  result = ncclGetUniqueId(&id);
  std::printf("ncclGetUniqueId: %d (%s)\n", result, ncclGetErrorString(result));
  ncclComm_t comm = nullptr;
  result = ncclCommInitRank(&comm, 1, id, 0);
  std::printf("ncclCommInitRank: %d (%s)\n", result, ncclGetErrorString(result));
  if (result != ncclSuccess) {
    std::printf("last error: %s\n", ncclGetLastError(nullptr));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    result = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
    std::printf("ncclCommInitRankConfig: %d (%s)\n", result, ncclGetErrorString(result));
    // Calls the preload would handle (4 MiB of floats) but on no communicator: NCCL's answer.
    for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
      result = ncclAllReduce(nullptr, nullptr, 1 << 20, ncclFloat32, op, nullptr, nullptr);
      std::printf("ncclAllReduce(no communicator): %d (%s)\n", result, ncclGetErrorString(result));
    }
    // Point-to-point, alone and in a group (the preload times them per link): NCCL's answers.
    result = ncclSend(nullptr, 1 << 20, ncclFloat32, 1, nullptr, nullptr);
    std::printf("ncclSend(no communicator): %d (%s)\n", result, ncclGetErrorString(result));
    result = ncclRecv(nullptr, 1 << 20, ncclBfloat16, 0, nullptr, nullptr);
    std::printf("ncclRecv(no communicator): %d (%s)\n", result, ncclGetErrorString(result));
    result = ncclGroupStart();
    std::printf("ncclGroupStart: %d\n", result);
    result = ncclSend(nullptr, 16, ncclInt8, 1, nullptr, nullptr);
    std::printf("ncclSend(in a group, no communicator): %d (%s)\n", result,
                ncclGetErrorString(result));
    result = ncclRecv(nullptr, 16, ncclInt8, 1, nullptr, nullptr);
    std::printf("ncclRecv(in a group, no communicator): %d (%s)\n", result,
                ncclGetErrorString(result));
    result = ncclGroupEnd();
    std::printf("ncclGroupEnd: %d (%s)\n", result, ncclGetErrorString(result));
    ncclGroupStart();
    result = ncclSend(nullptr, 16, ncclInt8, 1, nullptr, nullptr);
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    result = ncclGroupSimulateEnd(&info);
    std::printf("ncclGroupSimulateEnd: %d (%s)\n", result, ncclGetErrorString(result));
    return 0;
  }
  float* data = nullptr;
  cudaMalloc(&data, 3 * sizeof(float));
  const float host_in[3] = {1, 2, 3};
  cudaMemcpy(data, host_in, sizeof(host_in), cudaMemcpyHostToDevice);
  result = ncclAllReduce(data, data, 3, ncclFloat32, ncclSum, comm, nullptr);
  float host_out[3] = {};
  cudaMemcpy(host_out, data, sizeof(host_out), cudaMemcpyDeviceToHost);
  std::printf("ncclAllReduce: %d (%s) -> %g %g %g\n", result, ncclGetErrorString(result),
              host_out[0], host_out[1], host_out[2]);
  cudaFree(data);
  std::printf("ncclCommDestroy: %d\n", ncclCommDestroy(comm));
  return 0;
}

}  // namespace

#if defined(STRAGGLAR_PASSTHROUGH_MODULE)
extern "C" __attribute__((visibility("default"))) int PassthroughMain() { return Run(); }
#else
int main() { return Run(); }
#endif
