/* The hosts of a multi-host job: parsing --hosts and --hostfile, and placing
 * ranks on them.
 *
 *   --hosts h1:8,h2:8,[fd77::4]:2,h3
 *       a comma-separated list; ":N" gives the host N slots (default 1). An
 *       IPv6 address with a slot count goes in brackets; a bare IPv6
 *       address (more than one ':') has one slot.
 *
 *   --hostfile FILE
 *       one host per line, optionally followed by "slots=N"; blank lines and
 *       everything after '#' are ignored:
 *           # rack 1
 *           node1 slots=8
 *           node2 slots=8
 *
 * Placement is by block, in the order given: ranks 0..s1-1 on the first
 * host, the next s2 on the second, and so on, so neighbours in rank order
 * share a host (the ring and circulant schedules talk most to their
 * neighbours). A job needs no more ranks than slots; with fewer, the last
 * hosts get fewer ranks or none.
 *
 * A host named "localhost", "127.0.0.1", "::1" or this machine's own host
 * name runs its ranks directly, without SSH.
 *
 * Pure: no I/O besides reading the host file; unit tested in
 * tests/test_hosts.c.
 */
#ifndef CRNET_HOSTS_H
#define CRNET_HOSTS_H

#include <stddef.h>

#define CRNET__HOSTS_MAX 4096
#define CRNET__HOST_NAME_MAX 255

typedef struct crnet__host {
  char name[CRNET__HOST_NAME_MAX + 1]; /* without brackets */
  int slots;                           /* >= 1 */
  int first;                           /* after placing: its first rank */
  int count;                           /* after placing: ranks here, >= 0 */
  int local;                           /* runs without SSH */
} crnet__host;

typedef struct crnet__hostlist {
  crnet__host *hosts;
  int n;
  long slots; /* the sum over hosts */
} crnet__hostlist;

/* Appends the hosts of a --hosts list. On error returns -1 and writes a
 * message naming the bad item into why; hl keeps what came before. */
int crnet__hosts_parse_list(crnet__hostlist *hl, const char *spec, char *why,
                            size_t why_len);

/* Appends the hosts of a host file. -1 with why ("FILE:3: ...") on error. */
int crnet__hosts_parse_file(crnet__hostlist *hl, const char *path, char *why,
                            size_t why_len);

/* Places nranks ranks by block and marks local hosts (`self` is this
 * machine's host name, or NULL). -1 with why when the slots do not suffice
 * or the list is empty. */
int crnet__hosts_place(crnet__hostlist *hl, int nranks, const char *self,
                       char *why, size_t why_len);

/* Appends the nodes of a Slurm allocation: `nodelist` as in
 * SLURM_JOB_NODELIST ("node[01-04,07],gpu1"), each with the slots
 * `tasks_per_node` gives it, as in SLURM_TASKS_PER_NODE ("2(x3),1"). -1
 * with why when either is malformed or they disagree on the node count. */
int crnet__hosts_parse_slurm(crnet__hostlist *hl, const char *nodelist,
                             const char *tasks_per_node, char *why,
                             size_t why_len);

void crnet__hosts_free(crnet__hostlist *hl);

#endif
