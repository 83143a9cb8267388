#include "tools/system_probes.h"

#include <dlfcn.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

// dlerror's message, or `fallback` when it has none.
std::string LoaderError(const std::string& fallback) {
  const char* error = dlerror();
  return error != nullptr ? error : fallback;
}

// Where the loader found the library that defines `symbol`.
std::string PathOf(void* symbol) {
  Dl_info info{};
  if (symbol != nullptr && dladdr(symbol, &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "";
}

// Opens the first of `names` that loads; nullptr (and `error`) when none does.
void* OpenFirst(const std::vector<std::string>& names, std::string& error) {
  for (const std::string& name : names) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL); handle != nullptr) {
      return handle;
    }
    if (error.empty()) error = LoaderError(name + ": cannot be opened");
  }
  return nullptr;
}

}  // namespace

LibraryFound ProbeNccl() {
  LibraryFound result;
  void* nccl = OpenFirst({"libnccl.so.2"}, result.error);
  if (nccl == nullptr) return result;
  using GetVersion = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersion>(dlsym(nccl, "ncclGetVersion"));
  result.path = PathOf(reinterpret_cast<void*>(get_version));
  int code = 0;
  if (get_version == nullptr || get_version(&code) != 0 || code <= 0) {
    result.error = "ncclGetVersion failed";
    return result;
  }
  result.found = true;
  result.error.clear();
  result.version = absl::StrCat(code / 10000, ".", code / 100 % 100, ".", code % 100);
  return result;
}

LibraryFound ProbeCupti() {
  LibraryFound result;
  void* cupti = OpenFirst({"libcupti.so.13", "libcupti.so"}, result.error);
  if (cupti == nullptr) return result;
  void* subscribe = dlsym(cupti, "cuptiSubscribe");
  if (subscribe == nullptr) {
    result.error = "libcupti has no cuptiSubscribe";
    return result;
  }
  result.found = true;
  result.error.clear();
  result.path = PathOf(subscribe);
  return result;
}

LibraryFound ProbeMpi() {
  LibraryFound result;
  void* mpi = OpenFirst({"libmpi.so.40"}, result.error);
  if (mpi == nullptr) return result;
  using GetLibraryVersion = int (*)(char*, int*);
  auto get_version = reinterpret_cast<GetLibraryVersion>(dlsym(mpi, "MPI_Get_library_version"));
  result.path = PathOf(reinterpret_cast<void*>(get_version));
  // MPI_MAX_LIBRARY_VERSION_STRING is 256 in OpenMPI and 8192 in MPICH: take the larger.
  std::string text(8192, '\0');
  int length = 0;
  if (get_version == nullptr || get_version(text.data(), &length) != 0 || length <= 0) {
    result.error = "MPI_Get_library_version failed";
    return result;
  }
  text.resize(static_cast<size_t>(length));
  result.found = true;
  result.error.clear();
  result.version = text.substr(0, text.find_first_of(",\n"));
  return result;
}

LibraryFound ProbePreload(const std::string& path) {
  LibraryFound result;
  result.path = path;
  if (access(path.c_str(), R_OK) != 0) {
    result.error = absl::StrCat(path, ": ", std::strerror(errno));
    return result;
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    result.error = LoaderError(path + ": cannot be loaded");
    return result;
  }
  dlclose(handle);
  result.found = true;
  return result;
}

CudaDriverFound ProbeCudaDriver() {
  CudaDriverFound result;
  void* cuda = OpenFirst({"libcuda.so.1"}, result.error);
  if (cuda == nullptr) return result;
  // The driver API's signatures; CUresult 0 is CUDA_SUCCESS.
  using Init = int (*)(unsigned);
  using GetInt = int (*)(int*);
  using DeviceGet = int (*)(int*, int);
  using DeviceGetName = int (*)(char*, int, int);
  using ErrorString = int (*)(int, const char**);
  auto init = reinterpret_cast<Init>(dlsym(cuda, "cuInit"));
  auto driver_version = reinterpret_cast<GetInt>(dlsym(cuda, "cuDriverGetVersion"));
  auto device_count = reinterpret_cast<GetInt>(dlsym(cuda, "cuDeviceGetCount"));
  auto device_get = reinterpret_cast<DeviceGet>(dlsym(cuda, "cuDeviceGet"));
  auto device_name = reinterpret_cast<DeviceGetName>(dlsym(cuda, "cuDeviceGetName"));
  auto error_string = reinterpret_cast<ErrorString>(dlsym(cuda, "cuGetErrorString"));
  if (!init || !driver_version || !device_count || !device_get || !device_name) {
    result.error = "libcuda.so.1 lacks the driver API";
    return result;
  }
  result.found = true;
  result.error.clear();
  int version = 0;
  if (driver_version(&version) == 0) {
    result.version = absl::StrCat(version / 1000, ".", version % 1000 / 10);
  }
  if (int code = init(0); code != 0) {
    const char* text = nullptr;
    if (error_string != nullptr) error_string(code, &text);
    result.error = absl::StrCat("cuInit: ", text != nullptr ? text : "error ", code);
    return result;
  }
  int count = 0;
  if (device_count(&count) != 0) count = 0;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    int device = 0;
    char name[256] = {};
    if (device_get(&device, ordinal) != 0 || device_name(name, sizeof(name), device) != 0) {
      result.devices.push_back("(unnamed)");
    } else {
      result.devices.push_back(name);
    }
  }
  if (count == 0) result.error = "no CUDA device";
  return result;
}

PortsInUse ProbePorts(const std::string& address, int first, int count) {
  PortsInUse result;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  for (int port = first; port < first + count; ++port) {
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (int code = getaddrinfo(address.c_str(), service.c_str(), &hints, &found); code != 0) {
      result.error = absl::StrCat(address, ": ", gai_strerror(code));
      return result;
    }
    // As the metrics server binds: SO_REUSEADDR, so a port only in TIME_WAIT counts as free.
    const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    const int on = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        bind(fd, found->ai_addr, found->ai_addrlen) != 0) {
      result.ports.emplace_back(port, std::strerror(errno));
    }
    if (fd >= 0) close(fd);
    freeaddrinfo(found);
  }
  return result;
}

}  // namespace stragglar
