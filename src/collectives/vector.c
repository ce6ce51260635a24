/* The rooted and vector collectives: crnet_gather, crnet_scatter,
 * crnet_allgatherv, crnet_alltoallv and their nonblocking twins. Each
 * checks its arguments and starts a call like the others (calls.h); the
 * schedules are rooted.c's (gather, scatter), the allgather family's
 * (allgatherv: they take irregular blocks) and alltoall.c's (alltoallv). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "calls.h"
#include "comm.h"

static int err(crnet_comm *c, const char *fmt, const char *what) {
  crnet__set_callmsg(c, fmt, what);
  return CRNET_EINVAL;
}

/* p counts of `count` each, as the builders take them. */
static uint64_t *uniform(int p, uint64_t count) {
  uint64_t *v = crnet__malloc(sizeof *v * (size_t)p);
  for (int r = 0; v != NULL && r < p; r++)
    v[r] = count;
  return v;
}

/* An array of p size_t from the program as uint64_t, the sum of its
 * entries in *sum (NULL: overflow or out of memory, *rc says which). */
static uint64_t *copy_counts(crnet_comm *c, const char *what,
                             const size_t *in, uint64_t *sum, int *rc) {
  uint64_t *v = crnet__malloc(sizeof *v * (size_t)c->size), total = 0;
  *rc = 0;
  if (v == NULL) {
    *rc = CRNET_ENOMEM;
    return NULL;
  }
  for (int r = 0; r < c->size; r++) {
    v[r] = in[r];
    if (v[r] > UINT64_MAX - total) {
      free(v);
      *rc = err(c, "%s: the counts overflow", what);
      return NULL;
    }
    total += v[r];
  }
  if (sum != NULL)
    *sum = total;
  return v;
}

/* --- gather and scatter --------------------------------------------------- */

/* root's recv gets p blocks of count elements, block r from rank r's send.
 * CRNET_IN_PLACE as send at the root: its block is in recv already. */
static int gather(crnet_comm *c, const void *send, void *recv, size_t count,
                  crnet_datatype dt, int root, bool blocking,
                  crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_GATHER, .count = count, .root = root,
                      .commutative = true, .uniform = true};
  size_t es;
  int rc = crnet__coll_check(c, "gather", dt);
  if (rc != 0)
    return rc;
  es = crnet_datatype_size(dt);
  if (root < 0 || root >= c->size) {
    crnet__set_callmsg(c, "gather: root %d out of range", root);
    return CRNET_EINVAL;
  }
  if (send == CRNET_IN_PLACE && c->rank != root)
    return err(c, "%s: CRNET_IN_PLACE is for the root only", "gather");
  if (recv == CRNET_IN_PLACE)
    return err(c, "%s: CRNET_IN_PLACE is only for the send buffer",
               "gather");
  if (count > UINT64_MAX / (uint64_t)c->size ||
      !crnet__coll_fits(count * (uint64_t)c->size, es))
    return err(c, "%s: count too large", "gather");
  if (count > 0 && (send == NULL || (c->rank == root && recv == NULL)))
    return err(c, "%s: NULL buffer", "gather");
  if (c->rank == root) {
    rc = crnet__coll_no_overlap(c, "gather", send, count * es, recv,
                                count * (size_t)c->size * es);
    if (rc != 0)
      return rc;
  }
  call.counts = uniform(c->size, count);
  if (call.counts == NULL)
    return CRNET_ENOMEM;
  call.in_place = send == CRNET_IN_PLACE;
  rc = crnet__coll_start(c, &call, send, c->rank == root ? recv : NULL, dt,
                         blocking, out);
  free((void *)call.counts);
  return rc;
}

int crnet_gather(crnet_comm *c, const void *send, void *recv, size_t count,
                 crnet_datatype dt, int root) {
  crnet_request *r = NULL;
  int rc = gather(c, send, recv, count, dt, root, true, &r);
  return rc != 0 ? rc : crnet_wait(&r);
}

int crnet_igather(crnet_comm *c, const void *send, void *recv, size_t count,
                  crnet_datatype dt, int root, crnet_request **req) {
  int rc = crnet__coll_check_req(c, "igather", req);
  return rc != 0 ? rc : gather(c, send, recv, count, dt, root, false, req);
}

/* Rank r's recv gets block r of the root's send (p blocks of count).
 * CRNET_IN_PLACE as recv at the root: its block stays in send. */
static int scatter(crnet_comm *c, const void *send, void *recv, size_t count,
                   crnet_datatype dt, int root, bool blocking,
                   crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_SCATTER, .count = count,
                      .root = root, .commutative = true, .uniform = true};
  size_t es;
  int rc = crnet__coll_check(c, "scatter", dt);
  if (rc != 0)
    return rc;
  es = crnet_datatype_size(dt);
  if (root < 0 || root >= c->size) {
    crnet__set_callmsg(c, "scatter: root %d out of range", root);
    return CRNET_EINVAL;
  }
  if (recv == CRNET_IN_PLACE && c->rank != root)
    return err(c, "%s: CRNET_IN_PLACE is for the root only (as its receive "
                  "buffer: its block stays in send)",
               "scatter");
  if (send == CRNET_IN_PLACE)
    return err(c, "%s: CRNET_IN_PLACE is the root's receive buffer, not a "
                  "send buffer",
               "scatter");
  if (count > UINT64_MAX / (uint64_t)c->size ||
      !crnet__coll_fits(count * (uint64_t)c->size, es))
    return err(c, "%s: count too large", "scatter");
  if (count > 0 && ((c->rank == root && send == NULL) || recv == NULL))
    return err(c, "%s: NULL buffer", "scatter");
  if (c->rank == root && recv != CRNET_IN_PLACE) {
    rc = crnet__coll_no_overlap(c, "scatter", send,
                                count * (size_t)c->size * es, recv,
                                count * es);
    if (rc != 0)
      return rc;
  }
  call.counts = uniform(c->size, count);
  if (call.counts == NULL)
    return CRNET_ENOMEM;
  call.in_place = recv == CRNET_IN_PLACE;
  rc = crnet__coll_start(c, &call, c->rank == root ? send : NULL,
                         call.in_place ? NULL : recv, dt, blocking, out);
  free((void *)call.counts);
  return rc;
}

int crnet_scatter(crnet_comm *c, const void *send, void *recv, size_t count,
                  crnet_datatype dt, int root) {
  crnet_request *r = NULL;
  int rc = scatter(c, send, recv, count, dt, root, true, &r);
  return rc != 0 ? rc : crnet_wait(&r);
}

int crnet_iscatter(crnet_comm *c, const void *send, void *recv, size_t count,
                   crnet_datatype dt, int root, crnet_request **req) {
  int rc = crnet__coll_check_req(c, "iscatter", req);
  return rc != 0 ? rc : scatter(c, send, recv, count, dt, root, false, req);
}

/* --- allgatherv ------------------------------------------------------------ */

/* Whether displs puts the blocks packed, in order (then no unpack). */
static bool packed(const uint64_t *counts, const size_t *displs, int p) {
  uint64_t at = 0;
  for (int r = 0; r < p; r++) {
    if (displs[r] != at)
      return false;
    at += counts[r];
  }
  return true;
}

static int allgatherv(crnet_comm *c, const void *send, size_t sendcount,
                      void *recv, const size_t recvcounts[],
                      const size_t displs[], crnet_datatype dt, bool blocking,
                      crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_ALLGATHER, .commutative = true};
  uint64_t *counts = NULL, *d = NULL, total = 0, end = 0;
  size_t es;
  int rc = crnet__coll_check(c, "allgatherv", dt);
  if (rc != 0)
    return rc;
  es = crnet_datatype_size(dt);
  if (recvcounts == NULL)
    return err(c, "%s: recvcounts is NULL", "allgatherv");
  if (recv == CRNET_IN_PLACE)
    return err(c, "%s: CRNET_IN_PLACE is only for the send buffer",
               "allgatherv");
  counts = copy_counts(c, "allgatherv", recvcounts, &total, &rc);
  if (counts == NULL)
    return rc;
  if (send != CRNET_IN_PLACE && sendcount != counts[c->rank]) {
    crnet__set_callmsg(c,
                       "allgatherv: sendcount %zu is not recvcounts[%d] = "
                       "%zu",
                       sendcount, c->rank, recvcounts[c->rank]);
    rc = CRNET_EINVAL;
    goto out;
  }
  for (int r = 0; r < c->size; r++) {
    uint64_t at = displs != NULL ? displs[r] : 0;
    if (displs != NULL && (at > UINT64_MAX - counts[r]))
      total = UINT64_MAX;
    else if (displs != NULL && at + counts[r] > end)
      end = at + counts[r];
  }
  if (displs == NULL)
    end = total;
  if (!crnet__coll_fits(total, es) || !crnet__coll_fits(end, es)) {
    rc = err(c, "%s: counts or displacements too large", "allgatherv");
    goto out;
  }
  if ((total > 0 && recv == NULL) ||
      (counts[c->rank] > 0 && send == NULL)) {
    rc = err(c, "%s: NULL buffer", "allgatherv");
    goto out;
  }
  rc = crnet__coll_no_overlap(c, "allgatherv", send, counts[c->rank] * es,
                              recv, end * es);
  if (rc != 0)
    goto out;
  if (displs != NULL && !packed(counts, displs, c->size)) {
    d = crnet__malloc(sizeof *d * (size_t)c->size);
    if (d == NULL) {
      rc = CRNET_ENOMEM;
      goto out;
    }
    for (int r = 0; r < c->size; r++)
      d[r] = displs[r];
    call.displs = d;
  }
  call.counts = counts;
  call.count = total; /* what every rank agrees on (the frames carry it) */
  call.in_place = send == CRNET_IN_PLACE;
  rc = crnet__coll_start(c, &call, send, recv, dt, blocking, out);
out:
  free(counts);
  free(d);
  return rc;
}

int crnet_allgatherv(crnet_comm *c, const void *send, size_t sendcount,
                     void *recv, const size_t recvcounts[],
                     const size_t displs[], crnet_datatype dt) {
  crnet_request *r = NULL;
  int rc = allgatherv(c, send, sendcount, recv, recvcounts, displs, dt, true,
                      &r);
  return rc != 0 ? rc : crnet_wait(&r);
}

int crnet_iallgatherv(crnet_comm *c, const void *send, size_t sendcount,
                      void *recv, const size_t recvcounts[],
                      const size_t displs[], crnet_datatype dt,
                      crnet_request **req) {
  int rc = crnet__coll_check_req(c, "iallgatherv", req);
  return rc != 0 ? rc
                 : allgatherv(c, send, sendcount, recv, recvcounts, displs,
                              dt, false, req);
}

/* --- alltoallv -------------------------------------------------------------- */

/* displs (p entries; NULL: packed by counts) as uint64_t, and the end of
 * the furthest block in *end. */
static uint64_t *copy_displs(const size_t *displs, const uint64_t *counts,
                             int p, uint64_t *end, bool *overflow) {
  uint64_t *v = crnet__malloc(sizeof *v * (size_t)p), at = 0;
  *end = 0;
  *overflow = false;
  for (int r = 0; v != NULL && r < p; r++) {
    v[r] = displs != NULL ? displs[r] : at;
    at += counts[r];
    if (v[r] > UINT64_MAX - counts[r])
      *overflow = true;
    else if (v[r] + counts[r] > *end)
      *end = v[r] + counts[r];
  }
  return v;
}

static int alltoallv(crnet_comm *c, const void *send, const size_t sendcounts[],
                     const size_t sdispls[], void *recv,
                     const size_t recvcounts[], const size_t rdispls[],
                     crnet_datatype dt, bool blocking, crnet_request **out) {
  crnet__call call = {.coll = CRNET_COLL_ALLTOALLV, .commutative = true};
  uint64_t *sc = NULL, *rc_ = NULL, *sd = NULL, *rd = NULL, stot = 0,
           rtot = 0, send_end, recv_end;
  bool o1, o2;
  size_t es;
  int rc = crnet__coll_check(c, "alltoallv", dt);
  if (rc != 0)
    return rc;
  es = crnet_datatype_size(dt);
  if (sendcounts == NULL || recvcounts == NULL)
    return err(c, "%s: sendcounts or recvcounts is NULL", "alltoallv");
  if (send == CRNET_IN_PLACE || recv == CRNET_IN_PLACE)
    return err(c, "%s: CRNET_IN_PLACE is not supported (give a send "
                  "buffer)",
               "alltoallv");
  sc = copy_counts(c, "alltoallv", sendcounts, &stot, &rc);
  if (sc != NULL)
    rc_ = copy_counts(c, "alltoallv", recvcounts, &rtot, &rc);
  if (rc_ == NULL)
    goto out;
  sd = copy_displs(sdispls, sc, c->size, &send_end, &o1);
  rd = copy_displs(rdispls, rc_, c->size, &recv_end, &o2);
  if (sd == NULL || rd == NULL) {
    rc = CRNET_ENOMEM;
    goto out;
  }
  if (o1 || o2 || !crnet__coll_fits(send_end, es) ||
      !crnet__coll_fits(recv_end, es)) {
    rc = err(c, "%s: counts or displacements too large", "alltoallv");
    goto out;
  }
  if ((stot > 0 && send == NULL) || (rtot > 0 && recv == NULL)) {
    rc = err(c, "%s: NULL buffer", "alltoallv");
    goto out;
  }
  if (sc[c->rank] != rc_[c->rank]) {
    crnet__set_callmsg(c,
                       "alltoallv: this rank sends itself %zu elements but "
                       "expects %zu",
                       sendcounts[c->rank], recvcounts[c->rank]);
    rc = CRNET_EINVAL;
    goto out;
  }
  rc = crnet__coll_no_overlap(c, "alltoallv", send, send_end * es, recv,
                              recv_end * es);
  if (rc != 0)
    goto out;
  call.counts = sc;
  call.sdispls = sd;
  call.rcounts = rc_;
  call.rdispls = rd;
  rc = crnet__coll_start(c, &call, send, recv, dt, blocking, out);
out:
  free(sc);
  free(rc_);
  free(sd);
  free(rd);
  return rc;
}

int crnet_alltoallv(crnet_comm *c, const void *send, const size_t sendcounts[],
                    const size_t sdispls[], void *recv,
                    const size_t recvcounts[], const size_t rdispls[],
                    crnet_datatype dt) {
  crnet_request *r = NULL;
  int rc = alltoallv(c, send, sendcounts, sdispls, recv, recvcounts, rdispls,
                     dt, true, &r);
  return rc != 0 ? rc : crnet_wait(&r);
}

int crnet_ialltoallv(crnet_comm *c, const void *send,
                     const size_t sendcounts[], const size_t sdispls[],
                     void *recv, const size_t recvcounts[],
                     const size_t rdispls[], crnet_datatype dt,
                     crnet_request **req) {
  int rc = crnet__coll_check_req(c, "ialltoallv", req);
  return rc != 0 ? rc
                 : alltoallv(c, send, sendcounts, sdispls, recv, recvcounts,
                             rdispls, dt, false, req);
}
