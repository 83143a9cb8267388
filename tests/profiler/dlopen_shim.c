// Preloaded by the gpu_timer_test.*_libcupti checks: redirects every dlopen of libcupti, as the
// environment says. STRAGGLAR_TEST_LIBCUPTI=hidden makes it fail, as on a machine without CUPTI;
// a path loads that library (fake_cupti) instead.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread char pending[512];

void* dlopen(const char* name, int flags) {
  static void* (*real_dlopen)(const char*, int);
  if (real_dlopen == NULL) real_dlopen = (void* (*)(const char*, int))dlsym(RTLD_NEXT, "dlopen");
  const char* mode = getenv("STRAGGLAR_TEST_LIBCUPTI");
  if (name != NULL && mode != NULL && strstr(name, "libcupti") != NULL) {
    if (strcmp(mode, "hidden") != 0) return real_dlopen(mode, flags);
    snprintf(pending, sizeof pending, "%s: cannot open shared object file (hidden by the test)",
             name);
    return NULL;
  }
  return real_dlopen(name, flags);
}

char* dlerror(void) {
  static __thread char reported[512];
  static char* (*real_dlerror)(void);
  if (real_dlerror == NULL) real_dlerror = (char* (*)(void))dlsym(RTLD_NEXT, "dlerror");
  if (pending[0] != '\0') {
    memcpy(reported, pending, sizeof reported);
    pending[0] = '\0';
    return reported;
  }
  return real_dlerror();
}
