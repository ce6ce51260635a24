/* Local addresses: which address of this host a socket should use.
 *
 * CRNET_IFACE names either an interface ("eth0", "lo") or a network in CIDR
 * notation ("10.77.0.0/24", "fd77::/64"); a bare address ("10.77.0.5",
 * "127.0.0.2") is the network of that one address. Every socket a rank opens
 * (rank 0's rendezvous server, the connection to the rendezvous, the mesh
 * listener and the mesh connections) is bound to the address selected here,
 * and crlaunch uses the same function for its own rendezvous, so that the
 * launcher and the library read the variable alike.
 *
 * Plain functions of the host's configuration: no libuv, no state, may be
 * called from any thread. They do block briefly (getifaddrs asks the kernel
 * over netlink; a bind probe opens and closes a socket).
 */
#ifndef CRNET_NETADDR_H
#define CRNET_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The address CRNET_IFACE=`spec` selects, with port 0, into *out.
 *
 * family_hint is AF_INET or AF_INET6 when the caller needs that family (the
 * family of the rendezvous address it will connect to), or AF_UNSPEC.
 *   - An interface name gives that interface's first address of the family
 *     (of either family with AF_UNSPEC, IPv4 first). IPv6 link-local
 *     addresses (fe80::/10) are never chosen: they need a scope that the
 *     rendezvous table does not carry.
 *   - A network gives the first address of a local interface inside it. A
 *     network of one address (/32, /128, or a bare address) gives that
 *     address if this host can bind it, which also covers addresses that
 *     no interface lists, such as all of 127.0.0.0/8 on Linux. A network
 *     of the other family than family_hint is an error.
 *
 * Returns 0, or CRNET_EINVAL with the reason in why (NUL-terminated, at
 * most why_len bytes), without the "CRNET_IFACE=spec: " prefix so that each
 * caller can name its own setting and add context:
 *   "no such interface"
 *   "no IPv4 address" / "no IPv6 address" / "no IP address"
 *                                                     (interface, family)
 *   "no local address in this network"                (network)
 *   "not an IPv6 network" / "not an IPv4 network"     (network, family)
 *   "not an interface name or a network such as 10.0.0.0/24 or fd00::/64"
 *   "cannot list the network interfaces: <errno text>"
 * spec, out and why must not be NULL. */
int crnet__iface_address(const char *spec, int family_hint,
                         struct sockaddr_storage *out, char *why,
                         size_t why_len);

/* True if a TCP socket can bind addr (any port given is ignored): it is one
 * of this host's addresses, or the wildcard of an enabled family. */
bool crnet__addr_is_local(const struct sockaddr *addr);

/* True for 0.0.0.0 and ::. */
bool crnet__addr_is_any(const struct sockaddr *addr);

/* True if a and b are the same IP address (ports are not compared). */
bool crnet__addr_same_ip(const struct sockaddr *a, const struct sockaddr *b);

/* The port of an AF_INET or AF_INET6 address (host order), and setting it. */
int crnet__addr_port(const struct sockaddr *addr);
void crnet__addr_set_port(struct sockaddr_storage *addr, int port);

/* "IPv4" or "IPv6", for messages. */
const char *crnet__family_name(int family);

#endif
