/* flowcap: caps every TCP connection a process makes at a rate, to measure
 * crnet the way clouds deliver their networks: most cap the bandwidth of
 * each flow (one TCP connection) well below what the host's link carries,
 * so that one connection per pair of ranks cannot fill it. This machine's
 * kernel has no traffic-control qdiscs, but TCP paces a socket itself once
 * SO_MAX_PACING_RATE is set on it, on loopback too.
 *
 *   LD_PRELOAD=build/tools/libflowcap.so FLOWCAP_MBIT=400 \
 *     crlaunch -n 4 crbench -c allreduce -b 16M -e 16M
 *
 * Every TCP socket the process opens (connected ones, and listening ones,
 * whose accepted connections inherit the cap) is capped at FLOWCAP_MBIT
 * megabits per second. Not part of crnet: a benchmark tool, like iperf3's
 * --fq-rate.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

/* Exported in spite of the project's hidden default visibility: this is
 * the symbol the preload puts in front of libc's. */
__attribute__((visibility("default"))) int socket(int domain, int type,
                                                  int protocol) {
  static int (*next)(int, int, int);
  const char *mbit = getenv("FLOWCAP_MBIT");
  int fd;
  if (next == NULL)
    next = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
  fd = next(domain, type, protocol);
  if (fd >= 0 && mbit != NULL && (domain == AF_INET || domain == AF_INET6) &&
      (type & 0xf) == SOCK_STREAM) {
    /* bytes per second; the option is 32 bits wide on older kernels */
    uint64_t rate = strtoull(mbit, NULL, 10) * 1000000 / 8;
    unsigned int r32 = rate > UINT32_MAX ? UINT32_MAX : (unsigned int)rate;
    setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &r32, sizeof r32);
  }
  return fd;
}
