/* netaddr: what CRNET_IFACE selects on this host, and the reasons it gives
 * when it selects nothing. Uses only what every Linux host has: lo with
 * 127.0.0.1 (and ::1 where IPv6 is on), all of 127.0.0.0/8 bindable, and
 * no interface called eth9x nor an address in 198.51.100.0/24 (TEST-NET-2,
 * reserved for documentation). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "check_main.h"
#include "crnet.h"
#include "netaddr.h"

static char why[128];

/* The address selected for spec (family hint fam), as text; fails the test
 * if nothing is selected. */
static const char *selects(const char *spec, int fam) {
  static char ip[INET6_ADDRSTRLEN];
  struct sockaddr_storage ss;
  int rc = crnet__iface_address(spec, fam, &ss, why, sizeof why);
  ck_assert_msg(rc == 0, "%s: %s", spec, why);
  ck_assert_int_eq(crnet__addr_port((struct sockaddr *)&ss), 0);
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip);
  else
    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip,
              sizeof ip);
  return ip;
}

/* spec must select nothing, with exactly this reason. */
static void refuses(const char *spec, int fam, const char *reason) {
  struct sockaddr_storage ss;
  int rc = crnet__iface_address(spec, fam, &ss, why, sizeof why);
  ck_assert_msg(rc == CRNET_EINVAL, "%s selected something", spec);
  ck_assert_msg(strcmp(why, reason) == 0, "%s: '%s', expected '%s'", spec,
                why, reason);
}

static int have_ipv6(void) {
  struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                           .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  return crnet__addr_is_local((struct sockaddr *)&a);
}

START_TEST(interface_names) {
  ck_assert_str_eq(selects("lo", AF_UNSPEC), "127.0.0.1");
  ck_assert_str_eq(selects("lo", AF_INET), "127.0.0.1");
  if (have_ipv6())
    ck_assert_str_eq(selects("lo", AF_INET6), "::1");
  refuses("eth9x", AF_UNSPEC, "no such interface");
  refuses("eth9x", AF_INET6, "no such interface");
}
END_TEST

START_TEST(networks) {
  ck_assert_str_eq(selects("127.0.0.0/8", AF_UNSPEC), "127.0.0.1");
  ck_assert_str_eq(selects("127.0.0.0/8", AF_INET), "127.0.0.1");
  ck_assert_str_eq(selects("127.0.0.1/9", AF_INET), "127.0.0.1");
  /* One address, not listed by getifaddrs but bindable. */
  ck_assert_str_eq(selects("127.0.0.2/32", AF_INET), "127.0.0.2");
  ck_assert_str_eq(selects("127.0.0.2", AF_UNSPEC), "127.0.0.2");
  if (have_ipv6()) {
    ck_assert_str_eq(selects("::1/128", AF_INET6), "::1");
    ck_assert_str_eq(selects("::1", AF_UNSPEC), "::1");
  }
  refuses("198.51.100.0/24", AF_UNSPEC, "no local address in this network");
  refuses("198.51.100.7/32", AF_INET, "no local address in this network");
  refuses("127.0.0.0/8", AF_INET6, "not an IPv6 network");
  refuses("::1/128", AF_INET, "not an IPv4 network");
}
END_TEST

START_TEST(malformed) {
  static const char *const bad[] = {"10.0.0.0/33", "10.0.0.0/", "10.0.0/8",
                                    "fd77::/129",  "fd77::/x",  "/8",
                                    "",            "a-very-long-interface-name"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    refuses(bad[i], AF_UNSPEC,
            "not an interface name or a network such as 10.0.0.0/24 or "
            "fd00::/64");
}
END_TEST

START_TEST(address_helpers) {
  struct sockaddr_storage a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  ck_assert_int_eq(uv_ip4_addr("127.0.0.1", 80, (struct sockaddr_in *)&a), 0);
  ck_assert_int_eq(uv_ip4_addr("127.0.0.1", 81, (struct sockaddr_in *)&b), 0);
  ck_assert(crnet__addr_same_ip((struct sockaddr *)&a, (struct sockaddr *)&b));
  ck_assert(crnet__addr_is_local((struct sockaddr *)&a));
  ck_assert(!crnet__addr_is_any((struct sockaddr *)&a));
  crnet__addr_set_port(&b, 4242);
  ck_assert_int_eq(crnet__addr_port((struct sockaddr *)&b), 4242);
  ck_assert_int_eq(uv_ip6_addr("::", 0, (struct sockaddr_in6 *)&b), 0);
  ck_assert(crnet__addr_is_any((struct sockaddr *)&b));
  ck_assert(!crnet__addr_same_ip((struct sockaddr *)&a, (struct sockaddr *)&b));
  ck_assert_int_eq(uv_ip4_addr("198.51.100.7", 0, (struct sockaddr_in *)&a),
                   0);
  ck_assert(!crnet__addr_is_local((struct sockaddr *)&a));
}
END_TEST

int main(void) {
  Suite *s = suite_create("netaddr");
  TCase *t = tcase_create("netaddr");
  tcase_set_timeout(t, 30);
  tcase_add_test(t, interface_names);
  tcase_add_test(t, networks);
  tcase_add_test(t, malformed);
  tcase_add_test(t, address_helpers);
  suite_add_tcase(s, t);
  return check_run(s);
}
