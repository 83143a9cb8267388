// What `stragglar doctor` looks for on this machine, each probe on its own: the collective
// libraries and drivers the preloads run over, found the way a job finds them (the dynamic
// loader's search path), and whether the metrics ports are free. Nothing here needs CUDA or MPI
// at build time: every library is opened with dlopen, so the doctor runs on any machine.
#pragma once

#include <string>
#include <vector>

namespace stragglar {

// A shared library opened with dlopen (RTLD_LOCAL, so nothing of it leaks into the doctor).
struct LibraryFound {
  bool found = false;
  std::string path;     // where the loader found it (dladdr), when found
  std::string version;  // e.g. "2.28.9" or "Open MPI v4.1.4"; empty when the library cannot say
  std::string error;    // dlerror() or the failed call, when not found or not usable
};

// libnccl.so.2 and ncclGetVersion.
LibraryFound ProbeNccl();
// libcupti (the names the profiler tries, newest first).
LibraryFound ProbeCupti();
// libmpi.so.40 (OpenMPI's soname, which the MPI preload links) and MPI_Get_library_version,
// which MPI allows before MPI_Init.
LibraryFound ProbeMpi();
// Opens a preload library the way LD_PRELOAD would (all its dependencies resolved), then closes
// it: `error` names what is missing.
LibraryFound ProbePreload(const std::string& path);

// The CUDA driver (libcuda.so.1): its version and devices.
struct CudaDriverFound {
  bool found = false;
  std::string version;               // e.g. "13.0"
  std::vector<std::string> devices;  // device names, in CUDA's order
  std::string error;                 // why there is no driver or no device
};
CudaDriverFound ProbeCudaDriver();

// The ports of [first, first + count) that cannot be bound on `address` now (in use, or not
// permitted), each with the reason. Empty when all are free; `error` set when `address` itself
// does not resolve.
struct PortsInUse {
  std::vector<std::pair<int, std::string>> ports;
  std::string error;
};
PortsInUse ProbePorts(const std::string& address, int first, int count);

}  // namespace stragglar
