// Runs passthrough_check.cc's checks from a module loaded with dlopen(RTLD_LOCAL), the way Python
// imports PyTorch: the module's NCCL is then outside the global scope, where dlsym(RTLD_NEXT)
// cannot see it, while the module's NCCL calls still bind to libstragglar.so's definitions.
// The output must be NCCL's own with and without the preload (tests/nccl/passthrough_check.sh).
// usage: local_load_check MODULE
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODULE\n", argv[0]);
    return 2;
  }
  void* module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  if (dlsym(RTLD_DEFAULT, "pncclAllReduce") != nullptr) {
    std::fprintf(stderr, "NCCL is in the global scope; this check needs it loaded privately\n");
    return 2;
  }
  auto* run = reinterpret_cast<int (*)()>(dlsym(module, "PassthroughMain"));
  if (run == nullptr) {
    std::fprintf(stderr, "dlsym: %s\n", dlerror());
    return 2;
  }
  return run();
}
