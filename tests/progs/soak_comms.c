/* soak_comms.c: the sub-communicators of soak (soak.c runs the program).
 *
 * Every so often (the first time before a step between 5 and 100, then
 * every 50 to 300 steps, drawn) the comms change, as drawn alike on every
 * rank, before a step:
 *   - a split of the world or of a sub-comm alive: up to three colors
 *     (0, 7, 14), each rank CRNET_UNDEFINED one time in six, and keys all
 *     0 (ties: the parent's order), small ones with negatives and ties, or
 *     the parent's order reversed; every group becomes a comm of the run;
 *   - a dup of the world or of a sub-comm (a quarter of the changes that
 *     make a comm);
 *   - the destroy of a sub-comm (a third of the changes while any is
 *     alive, and always when MAX_COMMS are): its ranks first compare the
 *     hash of the results they hold alike (as sync_point does for the
 *     world), then destroy it; a child may outlive its parent.
 * Every rank computes every comm's ranks (by key, ties by the rank in the
 * parent) and the ranks of the parent call crnet_comm_split or
 * crnet_comm_dup; each checks the size and rank of what it gets, or NULL
 * for CRNET_UNDEFINED. A rank not in the parent skips the change. Then
 * half the steps run on the world and half on a sub-comm alive, drawn:
 * its ranks run the step with their ranks and size there, the others skip
 * it, and calls of different comms interleave (in flight too). In flight,
 * the calls of a comm still in flight are completed before it is
 * destroyed (the others stay in flight meanwhile). At the end,
 * crnet_comm_destroy of the world must be refused (CRNET_EINVAL, with a
 * reason, changing nothing) on a rank that still holds a sub-comm; then
 * the sub-comms are checked and destroyed, and the world last.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crnet.h"
#include "soak.h"

#define FIRST_EVENT_MIN 5
#define FIRST_EVENT_SPAN 96
#define EVENT_MIN 50
#define EVENT_SPAN 251
#define MAX_COLORS 3

void comms_init(ctx *x) {
  comm_slot *w = &x->comms[0];
  memset(x->comms, 0, sizeof x->comms);
  w->alive = true;
  w->id = 0;
  w->parent_id = -1;
  w->made = "world";
  w->size = x->wp;
  w->rank = x->wrank;
  w->world_of = xmalloc(sizeof *w->world_of * (size_t)x->wp);
  for (int r = 0; r < x->wp; r++)
    w->world_of[r] = r;
  w->c = x->world;
  x->next_comm_id = 1;
  x->next_event = FIRST_EVENT_MIN + below(FIRST_EVENT_SPAN);
  use_comm(x, 0);
}

void use_comm(ctx *x, int slot) {
  const comm_slot *c = &x->comms[slot];
  x->cur = slot;
  x->comm = c->c;
  x->p = c->size;
  x->rank = c->rank;
}

static int alive_subs(const ctx *x) {
  int n = 0;
  for (int i = 1; i < MAX_COMMS; i++)
    n += x->comms[i].alive;
  return n;
}

/* The k-th sub-comm alive (k < alive_subs). */
static int sub_at(const ctx *x, int k) {
  for (int i = 1; i < MAX_COMMS; i++)
    if (x->comms[i].alive && k-- == 0)
      return i;
  return 0;
}

int draw_comm(ctx *x) {
  int n = alive_subs(x);
  if (n == 0 || below(2) == 0)
    return 0;
  return sub_at(x, (int)below((uint64_t)n));
}

static int free_slot(const ctx *x) {
  for (int i = 1; i < MAX_COMMS; i++)
    if (!x->comms[i].alive)
      return i;
  return -1;
}

/* The results its ranks hold alike must be alike; then the destroy. */
static void destroy_sub(ctx *x, int slot, const char *where, drain_fn *drain,
                        void *arg) {
  comm_slot *c = &x->comms[slot];
  if (c->c != NULL) {
    uint64_t h[2], hmax[2];
    int rc;
    if (drain != NULL)
      drain(x, slot, arg);
    if (x->broken)
      return;
    h[0] = c->shared_hash;
    h[1] = ~c->shared_hash;
    rc = crnet_allreduce(c->c, h, hmax, 2, CRNET_UINT64, CRNET_MAX);
    if (rc != 0) {
      report_at(x, where, "comm #%d: the allreduce of its results' hash "
                          "returned %s: %s",
                c->id, crnet_err_name(rc), crnet_comm_errmsg(c->c));
      x->broken = true;
      return;
    }
    if (hmax[0] != h[0] || hmax[1] != h[1])
      report_at(x, where, "comm #%d (%d ranks): results its ranks should "
                          "hold alike (allreduce, allgather, bcast, "
                          "allgatherv) differ between them (the MAX of "
                          "{%016" PRIx64 ", ~} is {%016" PRIx64 ", %016" PRIx64
                          "})",
                c->id, c->size, h[0], hmax[0], hmax[1]);
    rc = crnet_comm_destroy(c->c);
    if (rc != 0) {
      report_at(x, where, "crnet_comm_destroy of comm #%d returned %s: %s",
                c->id, crnet_err_name(rc), crnet_comm_errmsg(c->c));
      x->broken = true;
      return;
    }
  }
  c->alive = false;
  c->c = NULL;
  free(c->world_of);
  c->world_of = NULL;
  x->freed++;
}

typedef struct member {
  int key, prank;
} member;

static int by_key(const void *a, const void *b) {
  const member *u = a, *v = b;
  if (u->key != v->key)
    return u->key < v->key ? -1 : 1;
  return (u->prank > v->prank) - (u->prank < v->prank);
}

/* A split (or a dup) of the comm in slot `parent`, into at most
 * `room` comms. */
static void split(ctx *x, int parent, int room, bool dup, const char *where) {
  comm_slot *pc = &x->comms[parent];
  const int q = pc->size;
  int *color = xmalloc(sizeof *color * (size_t)q);
  int *key = xmalloc(sizeof *key * (size_t)q);
  member *m = xmalloc(sizeof *m * (size_t)q);
  int ncolors = 1, mine = -1, rc = 0;
  crnet_comm *nc = NULL;

  if (dup) {
    for (int r = 0; r < q; r++) {
      color[r] = 0;
      key[r] = r;
    }
  } else {
    uint64_t keys = below(3);
    ncolors = 1 + (int)below((uint64_t)(room < MAX_COLORS ? room : MAX_COLORS));
    for (int r = 0; r < q; r++) {
      color[r] = below(6) == 0 ? CRNET_UNDEFINED
                               : 7 * (int)below((uint64_t)ncolors);
      key[r] = keys == 0 ? 0 : keys == 1 ? (int)below(7) - 3 : q - r;
    }
  }
  if (pc->rank >= 0) {
    rc = dup ? crnet_comm_dup(pc->c, &nc)
             : crnet_comm_split(pc->c, color[pc->rank], key[pc->rank], &nc);
    if (rc != 0) {
      report_at(x, where, "%s of comm #%d returned %s: %s",
                dup ? "crnet_comm_dup" : "crnet_comm_split", pc->id,
                crnet_err_name(rc), crnet_comm_errmsg(pc->c));
      x->broken = true;
      goto out;
    }
  }
  /* Every group a comm of the run, in the order of the colors. */
  for (int col = 0; col < ncolors; col++) {
    int n = 0, slot, rank = -1;
    comm_slot *c;
    for (int r = 0; r < q; r++)
      if (color[r] == 7 * col)
        m[n++] = (member){key[r], r};
    if (n == 0)
      continue;
    qsort(m, (size_t)n, sizeof *m, by_key);
    slot = free_slot(x);
    c = &x->comms[slot];
    memset(c, 0, sizeof *c);
    c->alive = true;
    c->id = x->next_comm_id++;
    c->parent_id = pc->id;
    c->made = dup ? "dup" : "split";
    c->size = n;
    c->world_of = xmalloc(sizeof *c->world_of * (size_t)n);
    for (int i = 0; i < n; i++) {
      c->world_of[i] = pc->world_of[m[i].prank];
      if (m[i].prank == pc->rank)
        rank = i;
    }
    c->rank = rank;
    if (rank >= 0) {
      mine = slot;
      c->c = nc;
      if (nc == NULL || crnet_comm_size(nc) != n ||
          crnet_comm_rank(nc) != rank) {
        report_at(x, where, "%s of comm #%d into comm #%d: got %s of size "
                            "%d and rank %d, not %d and %d",
                  dup ? "crnet_comm_dup" : "crnet_comm_split", pc->id, c->id,
                  nc == NULL ? "NULL" : "a comm",
                  nc == NULL ? -1 : crnet_comm_size(nc),
                  nc == NULL ? -1 : crnet_comm_rank(nc), n, rank);
        x->broken = true;
      }
    }
    if (dup)
      x->dups++;
    else
      x->splits++;
  }
  if (pc->rank >= 0 && mine < 0 && nc != NULL) {
    report_at(x, where, "crnet_comm_split of comm #%d with CRNET_UNDEFINED "
                        "made a comm",
              pc->id);
    x->broken = true;
  }
out:
  free(color);
  free(key);
  free(m);
}

void comm_events(ctx *x, uint64_t n, drain_fn *drain, void *arg) {
  char where[64];
  int nsub, room;
  if (n != x->next_event)
    return;
  x->next_event = n + EVENT_MIN + below(EVENT_SPAN);
  snprintf(where, sizeof where, "before step %" PRIu64, n);
  nsub = alive_subs(x);
  room = MAX_COMMS - 1 - nsub;
  if (nsub > 0 && (room == 0 || below(3) == 0)) {
    int slot = sub_at(x, (int)below((uint64_t)nsub));
    if (x->trace && x->wrank == 0)
      printf("soak: %s: destroy comm #%d\n", where, x->comms[slot].id);
    destroy_sub(x, slot, where, drain, arg);
  } else {
    int parent = nsub == 0 || below(3) != 0
                     ? 0
                     : sub_at(x, (int)below((uint64_t)nsub));
    bool dup = below(4) == 0;
    if (x->trace && x->wrank == 0)
      printf("soak: %s: %s comm #%d\n", where, dup ? "dup" : "split",
             x->comms[parent].id);
    split(x, parent, room, dup, where);
  }
  if (x->trace && x->wrank == 0)
    fflush(stdout);
}

void comms_end(ctx *x) {
  int held = 0;
  for (int i = 1; i < MAX_COMMS; i++)
    held += x->comms[i].alive && x->comms[i].c != NULL;
  if (held > 0) {
    int rc = crnet_comm_destroy(x->world);
    if (rc == 0) {
      /* The world is gone: nothing more can be said to the others. */
      fprintf(stderr, "soak: FAIL rank %d: seed %" PRIu64 " p %d at the end: "
                      "crnet_comm_destroy of the world succeeded while this "
                      "rank held %d sub-comms\n",
              x->wrank, x->seed, x->wp, held);
      exit(1);
    }
    if (rc != CRNET_EINVAL || crnet_comm_errmsg(x->world)[0] == '\0')
      report_at(x, "at the end", "crnet_comm_destroy of the world while this "
                                 "rank holds %d sub-comms returned %s (%s), "
                                 "not CRNET_EINVAL with a reason",
                held, crnet_err_name(rc), crnet_comm_errmsg(x->world));
  }
  for (int i = 1; i < MAX_COMMS && !x->broken; i++)
    if (x->comms[i].alive)
      destroy_sub(x, i, "at the end", NULL, NULL);
  use_comm(x, 0);
}

void comms_free(ctx *x) {
  for (int i = 0; i < MAX_COMMS; i++) {
    free(x->comms[i].world_of);
    x->comms[i].world_of = NULL;
  }
}
