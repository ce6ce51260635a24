/* Local addresses for CRNET_IFACE. See netaddr.h.
 *
 * Expected workload: a handful of calls per process at init (one per
 * address family in use), each listing the host's interfaces once. */
#include "netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crnet.h"

/* A parsed network: family, address bytes (4 or 16), prefix length. */
typedef struct network {
  int family;
  uint8_t bytes[16];
  int prefix;
} network;

static size_t addr_len(int family) { return family == AF_INET ? 4 : 16; }

/* The address bytes of an AF_INET or AF_INET6 sockaddr. */
static const uint8_t *addr_bytes(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
  return (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
}

static void make_sockaddr(int family, const uint8_t *bytes,
                          struct sockaddr_storage *out) {
  memset(out, 0, sizeof *out);
  out->ss_family = (sa_family_t)family;
  memcpy((uint8_t *)addr_bytes((struct sockaddr *)out), bytes,
         addr_len(family));
}

static bool is_ip(const struct sockaddr *sa) {
  return sa != NULL && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

/* Link-local IPv6 addresses need a scope id to be reached, and the address
 * table that ranks exchange has no room for one. */
static bool is_link_local(const struct sockaddr *sa) {
  return sa->sa_family == AF_INET6 &&
         IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* "a.b.c.d/n", "x::y/n", or a bare address (the network of that address
 * alone). -1 if spec is none of these. */
static int parse_network(const char *spec, network *n) {
  char addr[INET6_ADDRSTRLEN + 1];
  const char *slash = strchr(spec, '/');
  size_t len = slash != NULL ? (size_t)(slash - spec) : strlen(spec);
  if (len == 0 || len >= sizeof addr)
    return -1;
  memcpy(addr, spec, len);
  addr[len] = '\0';
  if (inet_pton(AF_INET, addr, n->bytes) == 1)
    n->family = AF_INET;
  else if (inet_pton(AF_INET6, addr, n->bytes) == 1)
    n->family = AF_INET6;
  else
    return -1;
  n->prefix = (int)addr_len(n->family) * 8;
  if (slash != NULL) {
    char *end;
    long p;
    errno = 0;
    p = strtol(slash + 1, &end, 10);
    if (errno != 0 || end == slash + 1 || *end != '\0' || p < 0 ||
        p > n->prefix)
      return -1;
    n->prefix = (int)p;
  }
  return 0;
}

static bool in_network(const network *n, const struct sockaddr *sa) {
  const uint8_t *b = addr_bytes(sa);
  int full = n->prefix / 8, rest = n->prefix % 8;
  if (sa->sa_family != n->family)
    return false;
  if (memcmp(b, n->bytes, (size_t)full) != 0)
    return false;
  if (rest == 0)
    return true;
  return ((b[full] ^ n->bytes[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

bool crnet__addr_is_local(const struct sockaddr *addr) {
  struct sockaddr_storage probe;
  int fd;
  bool ok;
  if (!is_ip(addr))
    return false;
  make_sockaddr(addr->sa_family, addr_bytes(addr), &probe);
  if (addr->sa_family == AF_INET6)
    ((struct sockaddr_in6 *)&probe)->sin6_scope_id =
        ((const struct sockaddr_in6 *)addr)->sin6_scope_id;
  fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  /* Port 0: the probe takes no port anyone could want, and never listens. */
  ok = bind(fd, (struct sockaddr *)&probe,
            addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                       : sizeof(struct sockaddr_in6)) == 0;
  close(fd);
  return ok;
}

bool crnet__addr_is_any(const struct sockaddr *addr) {
  static const uint8_t zero[16];
  return is_ip(addr) &&
         memcmp(addr_bytes(addr), zero, addr_len(addr->sa_family)) == 0;
}

bool crnet__addr_same_ip(const struct sockaddr *a, const struct sockaddr *b) {
  return is_ip(a) && is_ip(b) && a->sa_family == b->sa_family &&
         memcmp(addr_bytes(a), addr_bytes(b), addr_len(a->sa_family)) == 0;
}

int crnet__addr_port(const struct sockaddr *addr) {
  if (addr->sa_family == AF_INET)
    return ntohs(((const struct sockaddr_in *)addr)->sin_port);
  if (addr->sa_family == AF_INET6)
    return ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
  return 0;
}

void crnet__addr_set_port(struct sockaddr_storage *addr, int port) {
  if (addr->ss_family == AF_INET)
    ((struct sockaddr_in *)addr)->sin_port = htons((uint16_t)port);
  else if (addr->ss_family == AF_INET6)
    ((struct sockaddr_in6 *)addr)->sin6_port = htons((uint16_t)port);
}

const char *crnet__family_name(int family) {
  return family == AF_INET6 ? "IPv6" : "IPv4";
}

static int fail(char *why, size_t why_len, const char *msg) {
  snprintf(why, why_len, "%s", msg);
  return CRNET_EINVAL;
}

/* The first usable address for which match(ifa, arg) holds, preferring
 * `family` (AF_UNSPEC: IPv4, then IPv6). 1 if found, 0 if not, -1 with
 * errno if the interfaces cannot be listed. */
static int find_address(bool (*match)(const struct ifaddrs *, const void *),
                        const void *arg, int family,
                        struct sockaddr_storage *out) {
  struct ifaddrs *all;
  int found = 0;
  if (getifaddrs(&all) != 0)
    return -1;
  for (int pass = 0; pass < 2 && !found; pass++) {
    int want = family != AF_UNSPEC ? family : pass == 0 ? AF_INET : AF_INET6;
    if (family != AF_UNSPEC && pass > 0)
      break;
    for (struct ifaddrs *i = all; i != NULL && !found; i = i->ifa_next) {
      if (!is_ip(i->ifa_addr) || i->ifa_addr->sa_family != want ||
          is_link_local(i->ifa_addr) || !match(i, arg))
        continue;
      make_sockaddr(want, addr_bytes(i->ifa_addr), out);
      found = 1;
    }
  }
  freeifaddrs(all);
  return found;
}

static bool match_name(const struct ifaddrs *i, const void *name) {
  return strcmp(i->ifa_name, name) == 0;
}

static bool match_network(const struct ifaddrs *i, const void *n) {
  return in_network(n, i->ifa_addr);
}

int crnet__iface_address(const char *spec, int family_hint,
                         struct sockaddr_storage *out, char *why,
                         size_t why_len) {
  network n;
  int found;
  char msg[96];
  memset(out, 0, sizeof *out);
  if (parse_network(spec, &n) == 0) {
    if (family_hint != AF_UNSPEC && family_hint != n.family) {
      snprintf(msg, sizeof msg, "not an %s network",
               crnet__family_name(family_hint));
      return fail(why, why_len, msg);
    }
    if (n.prefix == (int)addr_len(n.family) * 8) {
      /* One address: whether it is ours is best asked of bind() itself,
       * since Linux answers for all of 127.0.0.0/8 on lo, for instance,
       * while getifaddrs lists only 127.0.0.1. */
      make_sockaddr(n.family, n.bytes, out);
      if (!crnet__addr_is_local((struct sockaddr *)out)) {
        memset(out, 0, sizeof *out);
        return fail(why, why_len, "no local address in this network");
      }
      return 0;
    }
    found = find_address(match_network, &n, n.family, out);
    if (found == 0)
      return fail(why, why_len, "no local address in this network");
  } else {
    if (strchr(spec, '/') != NULL || strchr(spec, ':') != NULL ||
        strlen(spec) >= IF_NAMESIZE || spec[0] == '\0')
      return fail(why, why_len,
                  "not an interface name or a network such as 10.0.0.0/24 "
                  "or fd00::/64");
    if (if_nametoindex(spec) == 0)
      return fail(why, why_len, "no such interface");
    found = find_address(match_name, spec, family_hint, out);
    if (found == 0) {
      snprintf(msg, sizeof msg, "no %s address",
               family_hint == AF_UNSPEC ? "IP"
                                        : crnet__family_name(family_hint));
      return fail(why, why_len, msg);
    }
  }
  if (found < 0) {
    snprintf(msg, sizeof msg, "cannot list the network interfaces: %s",
             strerror(errno));
    return fail(why, why_len, msg);
  }
  return 0;
}
