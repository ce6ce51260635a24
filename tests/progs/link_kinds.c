/* link_kinds: every link of the job is carried the way CRNET_TRANSPORT
 * says: shared memory between ranks of one node, TCP between nodes (and
 * everywhere with CRNET_TRANSPORT=tcp or CRNET_ENCRYPT=1).
 *
 *   crlaunch -n P link_kinds
 *   crlaunch --hosts A:2,B:2 link_kinds     (the namespace test bed)
 *
 * Each rank works out its node as the library does (the kernel's boot id
 * and the inode of its network namespace), and the ranks allgather them,
 * so each knows which peers share its node. The switch to shared memory
 * happens in the background after init, so the ranks run barriers and
 * 64 KiB allreduces (checked) until every link is what it should be, for
 * at most 10 s by rank 0's clock (the ranks agree each turn whether to go
 * on), and then once more to show that the links carry traffic.
 * Exits 0 when every rank's links are as expected, 1 (saying which link is
 * wrong) otherwise. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "crnet.h"

#define COUNT 16384 /* int32: 64 KiB */

typedef struct node {
  char boot[40];
  uint64_t netns;
} node;

static void my_node(node *n) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  struct stat st;
  memset(n, 0, sizeof *n);
  if (f != NULL) {
    if (fgets(n->boot, sizeof n->boot, f) == NULL)
      n->boot[0] = '\0';
    fclose(f);
  }
  if (stat("/proc/self/ns/net", &st) == 0)
    n->netns = (uint64_t)st.st_ino;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *kind_name(crnet_link_kind k) {
  switch (k) {
  case CRNET_LINK_NONE:
    return "none";
  case CRNET_LINK_TCP:
    return "tcp";
  case CRNET_LINK_SHM:
    return "shm";
  case CRNET_LINK_SELF:
    return "self";
  }
  return "?";
}

/* How many links differ from what they should be; the first one named in
 * why. */
static int wrong_links(crnet_comm *c, const node *nodes, bool shm_wanted,
                       char *why, size_t n) {
  int rank = crnet_comm_rank(c), p = crnet_comm_size(c), wrong = 0;
  for (int r = 0; r < p; r++) {
    crnet_link_kind k, want;
    if (crnet_comm_peer_link(c, r, &k) != 0)
      return p;
    if (r == rank)
      want = CRNET_LINK_SELF;
    else if (shm_wanted && memcmp(&nodes[r], &nodes[rank], sizeof(node)) == 0)
      want = CRNET_LINK_SHM;
    else
      want = CRNET_LINK_TCP;
    if (k != want && wrong++ == 0)
      snprintf(why, n, "rank %d: the link to rank %d is %s, not %s", rank, r,
               kind_name(k), kind_name(want));
  }
  return wrong;
}

static int traffic(crnet_comm *c, int32_t *in, int32_t *out) {
  int rank = crnet_comm_rank(c), p = crnet_comm_size(c), rc;
  for (int i = 0; i < COUNT; i++)
    in[i] = rank + i;
  rc = crnet_allreduce(c, in, out, COUNT, CRNET_INT32, CRNET_SUM);
  if (rc != 0)
    return rc;
  for (int i = 0; i < COUNT; i++)
    if (out[i] != p * (p - 1) / 2 + p * i)
      return -1000;
  return crnet_barrier(c);
}

/* crnet_comm_host agrees with the nodes the ranks worked out: ranks of one
 * node, and only those, share a host number, and hosts are numbered in
 * the order of their first rank. 0, or 1 with why set. */
static int wrong_hosts(crnet_comm *c, const node *nodes, char *why,
                       size_t whylen) {
  int p = crnet_comm_size(c), next = 0;
  for (int r = 0; r < p; r++) {
    int h = crnet_comm_host(c, r), want = next;
    for (int q = 0; q < r; q++)
      if (memcmp(&nodes[q], &nodes[r], sizeof(node)) == 0) {
        want = crnet_comm_host(c, q);
        break;
      }
    if (want == next)
      next++;
    if (h != want) {
      snprintf(why, whylen,
               "crnet_comm_host says rank %d is on host %d, "
               "its node says %d",
               r, h, want);
      return 1;
    }
  }
  if (crnet_comm_host(c, p) != CRNET_EINVAL ||
      crnet_comm_host(NULL, 0) != CRNET_EINVAL) {
    snprintf(why, whylen, "crnet_comm_host of no rank");
    return 1;
  }
  return 0;
}

int main(void) {
  crnet_comm *c;
  node me, *nodes;
  const char *transport = getenv("CRNET_TRANSPORT");
  const char *encrypt = getenv("CRNET_ENCRYPT");
  bool shm_wanted = !(transport != NULL && strcmp(transport, "tcp") == 0) &&
                    !(encrypt != NULL && strcmp(encrypt, "1") == 0);
  int32_t *in = malloc(COUNT * sizeof *in), *out = malloc(COUNT * sizeof *out);
  char why[160] = "";
  int rc, p, rank, wrong, total = 0;
  double until;
  if (in == NULL || out == NULL) {
    free(in);
    free(out);
    return 2;
  }
  rc = crnet_comm_init(&c, NULL);
  if (rc != 0) {
    fprintf(stderr, "link_kinds: init: %s\n", crnet_strerror(rc));
    free(in);
    free(out);
    return 2;
  }
  p = crnet_comm_size(c);
  rank = crnet_comm_rank(c);
  my_node(&me);
  nodes = calloc((size_t)p, sizeof *nodes);
  if (nodes == NULL) {
    crnet_comm_abort(c, 2);
    crnet_comm_destroy(c);
    free(in);
    free(out);
    return 2;
  }
  rc = crnet_allgather(c, &me, nodes, sizeof me, CRNET_BYTE);
  /* Rank 0's clock alone sets the deadline, and the ranks agree each turn
   * whether to go on (one allreduce): ranks whose links move at different
   * moments still run the same number of collectives. */
  until = now_s() + 10;
  for (;;) {
    int32_t mine[2], any[2];
    if (rc == 0)
      rc = traffic(c, in, out);
    if (rc != 0)
      break;
    wrong = wrong_links(c, nodes, shm_wanted, why, sizeof why);
    mine[0] = wrong > 0;
    mine[1] = rank == 0 && now_s() >= until;
    rc = crnet_allreduce(c, mine, any, 2, CRNET_INT32, CRNET_MAX);
    if (rc != 0 || any[0] == 0 || any[1] != 0)
      break;
  }
  if (rc == 0)
    rc = traffic(c, in, out);
  if (rc != 0) {
    fprintf(stderr, "link_kinds: rank %d: %s\n", rank,
            rc == -1000 ? "a wrong sum" : crnet_strerror(rc));
    if (crnet_comm_abort_code(c) == 0)
      crnet_comm_abort(c, 1);
    crnet_comm_destroy(c);
    free(nodes);
    free(in);
    free(out);
    return 1;
  }
  if (wrong > 0)
    fprintf(stderr, "link_kinds: %s (%d link(s) wrong after 10 s)\n", why,
            wrong);
  else if ((wrong = wrong_hosts(c, nodes, why, sizeof why)) > 0)
    fprintf(stderr, "link_kinds: rank %d: %s\n", rank, why);
  /* Every rank's verdict, so that rank 0 can say it for the job. */
  rc = crnet_allreduce(c, &wrong, &total, 1, CRNET_INT32, CRNET_SUM);
  if (rc == 0 && rank == 0 && total == 0) {
    int shm = 0;
    for (int r = 0; r < p; r++) {
      crnet_link_kind k;
      crnet_comm_peer_link(c, r, &k);
      shm += k == CRNET_LINK_SHM;
    }
    printf("link_kinds: p=%d: every link as expected (rank 0: %d on shared "
           "memory, %d on TCP), and every rank's host\n",
           p, shm, p - 1 - shm);
  }
  crnet_comm_destroy(c);
  free(nodes);
  free(in);
  free(out);
  return rc == 0 && total == 0 ? 0 : 1;
}
