/* A slow wire for the link profiling check (tests/nccl/link_check.sh), preloaded into one rank of
 * a pipeline whose ranks share one GPU and talk over loopback sockets (NCCL_NET=Socket): from
 * SLOW_SOCKET_AFTER_S seconds after the process starts, every send() or sendmsg() of at least
 * 64 KiB (NCCL's data, not its bootstrap) first sleeps SLOW_SOCKET_US microseconds. The
 * transfers out of that rank then take longer on both ends, as over a degraded link; a spin
 * before ncclSend would instead make the sender late, which is not a slow link.
 * With SLOW_SOCKET_HOSTID set, only the process whose NCCL_HOSTID equals it is slowed: preloaded
 * into every rank that stragglar-bench starts (tests/nccl/slow_link_check.sh), it slows one. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double start_s = -1;

static void MaybeWait(size_t bytes) {
  const char* us = getenv("SLOW_SOCKET_US");
  const char* after = getenv("SLOW_SOCKET_AFTER_S");
  if (us == NULL || bytes < 65536) return;
  const char* only = getenv("SLOW_SOCKET_HOSTID");
  const char* mine = getenv("NCCL_HOSTID");
  if (only != NULL && (mine == NULL || strcmp(only, mine) != 0)) return;
  if (start_s < 0) start_s = Now();
  if (after != NULL && Now() - start_s < atof(after)) return;
  usleep((useconds_t)atoi(us));
}

__attribute__((constructor)) static void Start(void) { start_s = Now(); }

ssize_t send(int fd, const void* data, size_t bytes, int flags) {
  static ssize_t (*real)(int, const void*, size_t, int) = NULL;
  if (real == NULL) real = (ssize_t(*)(int, const void*, size_t, int))dlsym(RTLD_NEXT, "send");
  MaybeWait(bytes);
  return real(fd, data, bytes, flags);
}

ssize_t sendmsg(int fd, const struct msghdr* message, int flags) {
  static ssize_t (*real)(int, const struct msghdr*, int) = NULL;
  if (real == NULL) real = (ssize_t(*)(int, const struct msghdr*, int))dlsym(RTLD_NEXT, "sendmsg");
  size_t bytes = 0;
  for (size_t i = 0; i < message->msg_iovlen; ++i) bytes += message->msg_iov[i].iov_len;
  MaybeWait(bytes);
  return real(fd, message, flags);
}
