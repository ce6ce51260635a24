/* The collectives, blocking and nonblocking: each MPI call is checked and
 * turned into crnet's arguments once (a `prep_` function), and the
 * blocking and the I-variant call crnet's twin with them.
 *
 * A call's element counts become base elements of crnet (a contiguous
 * datatype of n ints moves n times as many CRNET_INT32). Where MPI names a
 * send and a receive type, their signatures must agree (the same base,
 * the same number of base elements), as a correct MPI program's do; a
 * call whose types differ in base (a sender's 4 MPI_INT against a
 * receiver's MPI_FLOAT) is refused, since crnet moves typed elements. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

/* count elements of datatype as crnet moves them. */
typedef struct moved {
  size_t count;
  crnet_datatype dt;
  crnet_mpi_type t;
} moved;

/* holes_ok: the call stages buffers of types with holes (packs them,
 * layout.c); the others refuse such types. */
static int resolve_as(MPI_Comm comm, const char *fn, int count, MPI_Datatype dt,
                      bool holes_ok, moved *out) {
  if (count < 0)
    return crnet_mpi_fail(comm, fn, MPI_ERR_COUNT, "count %d", count);
  if (!crnet_mpi_type_get(dt, &out->t))
    return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "datatype %d does not exist or is not committed", dt);
  if (out->t.holes && !holes_ok)
    return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "datatype %d has holes (vector, indexed, struct, "
                          "resized, subarray): crnet-mpi's %s takes dense "
                          "datatypes only (docs/MPI.md)",
                          dt, fn);
  out->count = (size_t)count * out->t.n;
  out->dt = out->t.base;
  return MPI_SUCCESS;
}

static int resolve(MPI_Comm comm, const char *fn, int count, MPI_Datatype dt,
                   moved *out) {
  return resolve_as(comm, fn, count, dt, false, out);
}

static int resolve_staged(MPI_Comm comm, const char *fn, int count,
                          MPI_Datatype dt, moved *out) {
  return resolve_as(comm, fn, count, dt, true, out);
}

/* The send side of a rooted or gathering call must move what the receive
 * side expects. */
static int same_signature(MPI_Comm comm, const char *fn, const moved *s,
                          const moved *r) {
  if (s->dt != r->dt || s->count != r->count)
    return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "the send (%zu x %s) and receive (%zu x %s) type "
                          "signatures differ: crnet-mpi needs them equal",
                          s->count, crnet_datatype_name(s->dt), r->count,
                          crnet_datatype_name(r->dt));
  return MPI_SUCCESS;
}

static int reduction(MPI_Comm comm, const char *fn, int count, MPI_Datatype dt,
                     MPI_Op op, bool holes_ok, moved *m, crnet_op *cop) {
  const char *why = "";
  int rc = resolve_as(comm, fn, count, dt, holes_ok, m);
  if (rc != MPI_SUCCESS)
    return rc;
  rc = crnet_mpi_op_get(op, &m->t, cop, &why);
  if (rc != MPI_SUCCESS)
    return crnet_mpi_fail(comm, fn, rc, "operator %d on datatype %d: %s", op,
                          dt, why);
  return MPI_SUCCESS;
}

static int check_root(MPI_Comm comm, const char *fn, int root) {
  if (root < 0 || root >= crnet_comm_size(comm->c))
    return crnet_mpi_fail(comm, fn, MPI_ERR_ROOT, "root %d of %d ranks", root,
                          crnet_comm_size(comm->c));
  return MPI_SUCCESS;
}

static const void *send_of(const void *sendbuf) {
  return sendbuf == MPI_IN_PLACE ? CRNET_IN_PLACE : sendbuf;
}

int crnet_mpi_widen(MPI_Comm comm, const char *fn, int k, const int *const v[],
                    const char *const names[], int p, size_t n, size_t **out) {
  size_t *w;
  for (int a = 0; a < k; a++)
    if (v[a] == NULL)
      return crnet_mpi_fail(comm, fn, MPI_ERR_ARG, "%s is NULL", names[a]);
  w = malloc(sizeof *w * (size_t)k * (size_t)(p > 0 ? p : 1));
  if (w == NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "%s", names[0]);
  for (int a = 0; a < k; a++)
    for (int i = 0; i < p; i++) {
      if (v[a][i] < 0) {
        free(w);
        return crnet_mpi_fail(comm, fn, MPI_ERR_COUNT, "%s[%d] = %d", names[a],
                              i, v[a][i]);
      }
      w[(size_t)a * (size_t)p + (size_t)i] = (size_t)v[a][i] * n;
    }
  *out = w;
  return MPI_SUCCESS;
}

/* Packs what the call sends and makes room for what it receives where a
 * type has holes (layout.c): *sbuf (unless sbuf is NULL or *sbuf is
 * MPI_IN_PLACE) and *rbuf (likewise), each becoming what crnet is handed.
 * fill: the receive buffer holds input too (in place). 0, or the error
 * raised with nothing kept. */
static int stage(MPI_Comm comm, const char *fn, crnet_mpi_stage *sg,
                 const void **sbuf, MPI_Datatype stype, size_t scount,
                 void **rbuf, MPI_Datatype rtype, size_t rcount, bool fill) {
  int rc = MPI_SUCCESS;
  if (sbuf != NULL && *sbuf != MPI_IN_PLACE)
    rc = crnet_mpi_stage_send(comm, fn, sg, stype, *sbuf, scount, sbuf);
  if (rc == MPI_SUCCESS && rbuf != NULL && *rbuf != MPI_IN_PLACE)
    rc = crnet_mpi_stage_recv(comm, fn, sg, rtype, *rbuf, rcount, fill, rbuf);
  if (rc != MPI_SUCCESS)
    crnet_mpi_stage_end(sg, false, 0);
  return rc;
}

/* A blocking call's end: its packed results unpacked, crnet's rc as MPI's. */
static int staged_end(MPI_Comm comm, const char *fn, crnet_mpi_stage *sg,
                      int rc) {
  crnet_mpi_stage_end(sg, rc == 0, SIZE_MAX);
  return crnet_mpi_from_crnet(comm, fn, rc);
}

/* A nonblocking call's staging (into its request r, made already) ended
 * with rc: on failure r is freed, the program's handle left null. */
static int staged_or_freed(struct crnet_mpi_request *r, MPI_Request *request,
                           int rc) {
  if (rc != MPI_SUCCESS) {
    crnet_mpi_request_free(r);
    *request = MPI_REQUEST_NULL;
  }
  return rc;
}

/* The staged sides of a gather (at the root p blocks are received; in
 * place, its own block is among them already) or a scatter (at the root
 * p blocks are sent; in place, it receives none). */
static int stage_rooted(MPI_Comm comm, const char *fn, crnet_mpi_stage *sg,
                        int root, bool gather, const void **sendbuf,
                        int sendcount, MPI_Datatype sendtype, void **recvbuf,
                        int recvcount, MPI_Datatype recvtype) {
  size_t p = (size_t)crnet_comm_size(comm->c);
  bool is_root = crnet_comm_rank(comm->c) == root;
  if (gather)
    return stage(comm, fn, sg,
                 is_root && *sendbuf == MPI_IN_PLACE ? NULL : sendbuf, sendtype,
                 (size_t)sendcount, is_root ? recvbuf : NULL, recvtype,
                 p * (size_t)recvcount, is_root && *sendbuf == MPI_IN_PLACE);
  return stage(comm, fn, sg, is_root ? sendbuf : NULL, sendtype,
               p * (size_t)sendcount,
               is_root && *recvbuf == MPI_IN_PLACE ? NULL : recvbuf, recvtype,
               (size_t)recvcount, false);
}

#define CHECK(expr)                                                            \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_ != MPI_SUCCESS)                                                    \
      return rc_;                                                              \
  } while (0)

/* --- barrier, bcast --- */

int MPI_Barrier(MPI_Comm comm) {
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Barrier"));
  return crnet_mpi_from_crnet(comm, "MPI_Barrier", crnet_barrier(comm->c));
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  struct crnet_mpi_request *r = NULL;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Ibarrier"));
  CHECK(crnet_mpi_request_new(comm, "MPI_Ibarrier", REQ_COLL, request, &r));
  return crnet_mpi_request_started(
      comm, "MPI_Ibarrier", crnet_ibarrier(comm->c, &r->req), r, request);
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
              MPI_Comm comm) {
  moved m = {0};
  crnet_mpi_stage sg = {0};
  bool is_root;
  const void *out = buffer;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Bcast"));
  CHECK(check_root(comm, "MPI_Bcast", root));
  CHECK(resolve_staged(comm, "MPI_Bcast", count, datatype, &m));
  /* The root's buffer is only read: it sends a packed copy. */
  is_root = crnet_comm_rank(comm->c) == root;
  CHECK(stage(comm, "MPI_Bcast", &sg, is_root ? &out : NULL, datatype,
              (size_t)count, is_root ? NULL : &buffer, datatype, (size_t)count,
              false));
  return staged_end(comm, "MPI_Bcast", &sg,
                    crnet_bcast(comm->c,
                                is_root ? (void *)(uintptr_t)out : buffer,
                                m.count, m.dt, root));
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root,
               MPI_Comm comm, MPI_Request *request) {
  moved m = {0};
  struct crnet_mpi_request *r = NULL;
  bool is_root;
  const void *out = buffer;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Ibcast"));
  CHECK(check_root(comm, "MPI_Ibcast", root));
  CHECK(resolve_staged(comm, "MPI_Ibcast", count, datatype, &m));
  CHECK(crnet_mpi_request_new(comm, "MPI_Ibcast", REQ_COLL, request, &r));
  is_root = crnet_comm_rank(comm->c) == root;
  CHECK(staged_or_freed(r, request,
                        stage(comm, "MPI_Ibcast", &r->stage,
                              is_root ? &out : NULL, datatype, (size_t)count,
                              is_root ? NULL : &buffer, datatype, (size_t)count,
                              false)));
  return crnet_mpi_request_started(
      comm, "MPI_Ibcast",
      crnet_ibcast(comm->c, is_root ? (void *)(uintptr_t)out : buffer, m.count,
                   m.dt, root, &r->req),
      r, request);
}

/* --- reductions --- */

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  crnet_mpi_stage sg = {0};
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Reduce"));
  CHECK(check_root(comm, "MPI_Reduce", root));
  if (CRNET_MPI_IS_LOC(op))
    return crnet_mpi_loc(comm, "MPI_Reduce", sendbuf, recvbuf, count, NULL,
                         datatype, op, root);
  CHECK(reduction(comm, "MPI_Reduce", count, datatype, op, true, &m, &cop));
  /* The receive buffer counts at the root only. */
  void **rbp = crnet_comm_rank(comm->c) == root ? &recvbuf : NULL;
  CHECK(stage(comm, "MPI_Reduce", &sg, &sendbuf, datatype, (size_t)count, rbp,
              datatype, (size_t)count, sendbuf == MPI_IN_PLACE));
  return staged_end(comm, "MPI_Reduce", &sg,
                    crnet_reduce(comm->c, send_of(sendbuf), recvbuf, m.count,
                                 m.dt, cop, root));
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request *request) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  struct crnet_mpi_request *r = NULL;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Ireduce"));
  CHECK(check_root(comm, "MPI_Ireduce", root));
  CHECK(reduction(comm, "MPI_Ireduce", count, datatype, op, true, &m, &cop));
  CHECK(crnet_mpi_request_new(comm, "MPI_Ireduce", REQ_COLL, request, &r));
  /* The receive buffer counts at the root only. */
  void **rbp = crnet_comm_rank(comm->c) == root ? &recvbuf : NULL;
  CHECK(staged_or_freed(r, request,
                        stage(comm, "MPI_Ireduce", &r->stage, &sendbuf,
                              datatype, (size_t)count, rbp, datatype,
                              (size_t)count, sendbuf == MPI_IN_PLACE)));
  return crnet_mpi_request_started(comm, "MPI_Ireduce",
                                   crnet_ireduce(comm->c, send_of(sendbuf),
                                                 recvbuf, m.count, m.dt, cop,
                                                 root, &r->req),
                                   r, request);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  crnet_mpi_stage sg = {0};
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Allreduce"));
  if (CRNET_MPI_IS_LOC(op))
    return crnet_mpi_loc(comm, "MPI_Allreduce", sendbuf, recvbuf, count, NULL,
                         datatype, op, -1);
  CHECK(reduction(comm, "MPI_Allreduce", count, datatype, op, true, &m, &cop));
  CHECK(stage(comm, "MPI_Allreduce", &sg, &sendbuf, datatype, (size_t)count,
              &recvbuf, datatype, (size_t)count, sendbuf == MPI_IN_PLACE));
  return staged_end(
      comm, "MPI_Allreduce", &sg,
      crnet_allreduce(comm->c, send_of(sendbuf), recvbuf, m.count, m.dt, cop));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count,
                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  struct crnet_mpi_request *r = NULL;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Iallreduce"));
  CHECK(reduction(comm, "MPI_Iallreduce", count, datatype, op, true, &m, &cop));
  CHECK(crnet_mpi_request_new(comm, "MPI_Iallreduce", REQ_COLL, request, &r));
  CHECK(staged_or_freed(r, request,
                        stage(comm, "MPI_Iallreduce", &r->stage, &sendbuf,
                              datatype, (size_t)count, &recvbuf, datatype,
                              (size_t)count, sendbuf == MPI_IN_PLACE)));
  return crnet_mpi_request_started(comm, "MPI_Iallreduce",
                                   crnet_iallreduce(comm->c, send_of(sendbuf),
                                                    recvbuf, m.count, m.dt, cop,
                                                    &r->req),
                                   r, request);
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count,
             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  crnet_mpi_stage sg = {0};
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Scan"));
  CHECK(reduction(comm, "MPI_Scan", count, datatype, op, true, &m, &cop));
  CHECK(stage(comm, "MPI_Scan", &sg, &sendbuf, datatype, (size_t)count,
              &recvbuf, datatype, (size_t)count, sendbuf == MPI_IN_PLACE));
  return staged_end(
      comm, "MPI_Scan", &sg,
      crnet_scan(comm->c, send_of(sendbuf), recvbuf, m.count, m.dt, cop));
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count,
              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              MPI_Request *request) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  struct crnet_mpi_request *r = NULL;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Iscan"));
  CHECK(reduction(comm, "MPI_Iscan", count, datatype, op, true, &m, &cop));
  CHECK(crnet_mpi_request_new(comm, "MPI_Iscan", REQ_COLL, request, &r));
  CHECK(staged_or_freed(r, request,
                        stage(comm, "MPI_Iscan", &r->stage, &sendbuf, datatype,
                              (size_t)count, &recvbuf, datatype, (size_t)count,
                              sendbuf == MPI_IN_PLACE)));
  return crnet_mpi_request_started(comm, "MPI_Iscan",
                                   crnet_iscan(comm->c, send_of(sendbuf),
                                               recvbuf, m.count, m.dt, cop,
                                               &r->req),
                                   r, request);
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  crnet_mpi_stage sg = {0};
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Exscan"));
  CHECK(reduction(comm, "MPI_Exscan", count, datatype, op, true, &m, &cop));
  /* Filled always: crnet leaves rank 0's result as it was, and so must the
   * unpacking. */
  CHECK(stage(comm, "MPI_Exscan", &sg, &sendbuf, datatype, (size_t)count,
              &recvbuf, datatype, (size_t)count, true));
  return staged_end(
      comm, "MPI_Exscan", &sg,
      crnet_exscan(comm->c, send_of(sendbuf), recvbuf, m.count, m.dt, cop));
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                MPI_Request *request) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  struct crnet_mpi_request *r = NULL;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Iexscan"));
  CHECK(reduction(comm, "MPI_Iexscan", count, datatype, op, true, &m, &cop));
  CHECK(crnet_mpi_request_new(comm, "MPI_Iexscan", REQ_COLL, request, &r));
  CHECK(staged_or_freed(r, request,
                        stage(comm, "MPI_Iexscan", &r->stage, &sendbuf,
                              datatype, (size_t)count, &recvbuf, datatype,
                              (size_t)count, true)));
  return crnet_mpi_request_started(comm, "MPI_Iexscan",
                                   crnet_iexscan(comm->c, send_of(sendbuf),
                                                 recvbuf, m.count, m.dt, cop,
                                                 &r->req),
                                   r, request);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Reduce_scatter_block"));
  if (CRNET_MPI_IS_LOC(op)) {
    int p = crnet_comm_size(comm->c), rc;
    int *counts = malloc(sizeof *counts * (size_t)p);
    if (counts == NULL)
      return crnet_mpi_fail(comm, "MPI_Reduce_scatter_block", MPI_ERR_NO_MEM,
                            "recvcounts");
    for (int i = 0; i < p; i++)
      counts[i] = recvcount;
    rc = crnet_mpi_loc(comm, "MPI_Reduce_scatter_block", sendbuf, recvbuf, 0,
                       counts, datatype, op, -1);
    free(counts);
    return rc;
  }
  CHECK(reduction(comm, "MPI_Reduce_scatter_block", recvcount, datatype, op,
                  false, &m, &cop));
  return crnet_mpi_from_crnet(
      comm, "MPI_Reduce_scatter_block",
      crnet_reduce_scatter_block(comm->c, send_of(sendbuf), recvbuf, m.count,
                                 m.dt, cop));
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request *request) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  struct crnet_mpi_request *r = NULL;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Ireduce_scatter_block"));
  CHECK(reduction(comm, "MPI_Ireduce_scatter_block", recvcount, datatype, op,
                  false, &m, &cop));
  CHECK(crnet_mpi_request_new(comm, "MPI_Ireduce_scatter_block", REQ_COLL,
                              request, &r));
  return crnet_mpi_request_started(
      comm, "MPI_Ireduce_scatter_block",
      crnet_ireduce_scatter_block(comm->c, send_of(sendbuf), recvbuf, m.count,
                                  m.dt, cop, &r->req),
      r, request);
}

/* recvcounts as crnet's, in *out (to be freed). */
static int prep_reduce_scatter(MPI_Comm comm, const char *fn,
                               const int recvcounts[], MPI_Datatype datatype,
                               MPI_Op op, moved *m, crnet_op *cop,
                               size_t **out) {
  static const char *const names[] = {"recvcounts"};
  CHECK(reduction(comm, fn, 1, datatype, op, false, m, cop));
  return crnet_mpi_widen(comm, fn, 1, (const int *const[]){recvcounts}, names,
                         crnet_comm_size(comm->c), m->t.n, out);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
                       const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  size_t *counts;
  int rc;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Reduce_scatter"));
  if (CRNET_MPI_IS_LOC(op)) {
    if (recvcounts == NULL)
      return crnet_mpi_fail(comm, "MPI_Reduce_scatter", MPI_ERR_ARG,
                            "recvcounts is NULL");
    return crnet_mpi_loc(comm, "MPI_Reduce_scatter", sendbuf, recvbuf, 0,
                         recvcounts, datatype, op, -1);
  }
  CHECK(prep_reduce_scatter(comm, "MPI_Reduce_scatter", recvcounts, datatype,
                            op, &m, &cop, &counts));
  rc = crnet_reduce_scatter(comm->c, send_of(sendbuf), recvbuf, counts, m.dt,
                            cop);
  free(counts);
  return crnet_mpi_from_crnet(comm, "MPI_Reduce_scatter", rc);
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
                        const int recvcounts[], MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  moved m = {0};
  crnet_op cop = CRNET_SUM;
  struct crnet_mpi_request *r = NULL;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Ireduce_scatter"));
  CHECK(crnet_mpi_request_new(comm, "MPI_Ireduce_scatter", REQ_COLL, request,
                              &r));
  int rc = prep_reduce_scatter(comm, "MPI_Ireduce_scatter", recvcounts,
                               datatype, op, &m, &cop, &r->arrays);
  if (rc != MPI_SUCCESS) {
    crnet_mpi_request_free(r);
    return rc;
  }
  return crnet_mpi_request_started(
      comm, "MPI_Ireduce_scatter",
      crnet_ireduce_scatter(comm->c, send_of(sendbuf), recvbuf, r->arrays, m.dt,
                            cop, &r->req),
      r, request);
}

/* --- gathering and scattering --- */

/* MPI's send and receive sides of an allgather or alltoall as one crnet
 * count: the receive side's, which the send side must match unless it is
 * in place. */
static int prep_pair(MPI_Comm comm, const char *fn, const void *sendbuf,
                     int sendcount, MPI_Datatype sendtype, int recvcount,
                     MPI_Datatype recvtype, moved *r) {
  moved s = {0};
  CHECK(resolve_staged(comm, fn, recvcount, recvtype, r));
  if (sendbuf == MPI_IN_PLACE)
    return MPI_SUCCESS;
  CHECK(resolve_staged(comm, fn, sendcount, sendtype, &s));
  return same_signature(comm, fn, &s, r);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm) {
  moved m = {0};
  crnet_mpi_stage sg = {0};
  size_t p;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Allgather"));
  CHECK(prep_pair(comm, "MPI_Allgather", sendbuf, sendcount, sendtype,
                  recvcount, recvtype, &m));
  p = (size_t)crnet_comm_size(comm->c);
  CHECK(stage(comm, "MPI_Allgather", &sg, &sendbuf, sendtype, (size_t)sendcount,
              &recvbuf, recvtype, p * (size_t)recvcount,
              sendbuf == MPI_IN_PLACE));
  return staged_end(
      comm, "MPI_Allgather", &sg,
      crnet_allgather(comm->c, send_of(sendbuf), recvbuf, m.count, m.dt));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, int recvcount, MPI_Datatype recvtype,
                   MPI_Comm comm, MPI_Request *request) {
  moved m = {0};
  struct crnet_mpi_request *r = NULL;
  size_t p;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Iallgather"));
  CHECK(prep_pair(comm, "MPI_Iallgather", sendbuf, sendcount, sendtype,
                  recvcount, recvtype, &m));
  CHECK(crnet_mpi_request_new(comm, "MPI_Iallgather", REQ_COLL, request, &r));
  p = (size_t)crnet_comm_size(comm->c);
  CHECK(staged_or_freed(r, request,
                        stage(comm, "MPI_Iallgather", &r->stage, &sendbuf,
                              sendtype, (size_t)sendcount, &recvbuf, recvtype,
                              p * (size_t)recvcount, sendbuf == MPI_IN_PLACE)));
  return crnet_mpi_request_started(comm, "MPI_Iallgather",
                                   crnet_iallgather(comm->c, send_of(sendbuf),
                                                    recvbuf, m.count, m.dt,
                                                    &r->req),
                                   r, request);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 MPI_Comm comm) {
  moved m = {0};
  crnet_mpi_stage sg = {0};
  size_t p;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Alltoall"));
  CHECK(prep_pair(comm, "MPI_Alltoall", sendbuf, sendcount, sendtype, recvcount,
                  recvtype, &m));
  p = (size_t)crnet_comm_size(comm->c);
  CHECK(stage(comm, "MPI_Alltoall", &sg, &sendbuf, sendtype,
              (size_t)p * (size_t)sendcount, &recvbuf, recvtype,
              p * (size_t)recvcount, sendbuf == MPI_IN_PLACE));
  return staged_end(
      comm, "MPI_Alltoall", &sg,
      crnet_alltoall(comm->c, send_of(sendbuf), recvbuf, m.count, m.dt));
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm, MPI_Request *request) {
  moved m = {0};
  struct crnet_mpi_request *r = NULL;
  size_t p;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Ialltoall"));
  CHECK(prep_pair(comm, "MPI_Ialltoall", sendbuf, sendcount, sendtype,
                  recvcount, recvtype, &m));
  CHECK(crnet_mpi_request_new(comm, "MPI_Ialltoall", REQ_COLL, request, &r));
  p = (size_t)crnet_comm_size(comm->c);
  CHECK(staged_or_freed(r, request,
                        stage(comm, "MPI_Ialltoall", &r->stage, &sendbuf,
                              sendtype, (size_t)p * (size_t)sendcount, &recvbuf,
                              recvtype, p * (size_t)recvcount,
                              sendbuf == MPI_IN_PLACE)));
  return crnet_mpi_request_started(comm, "MPI_Ialltoall",
                                   crnet_ialltoall(comm->c, send_of(sendbuf),
                                                   recvbuf, m.count, m.dt,
                                                   &r->req),
                                   r, request);
}

/* Rooted calls: the root's receive (gather) or send (scatter) side names
 * the per-rank count; the other ranks' own side must be the same. `own`
 * is this rank's side, `rootside` the root's. */
static int prep_rooted(MPI_Comm comm, const char *fn, int root, bool gather,
                       const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, const void *recvbuf,
                       int recvcount, MPI_Datatype recvtype, moved *m) {
  moved s = {0}, r = {0};
  int me = crnet_comm_rank(comm->c);
  CHECK(check_root(comm, fn, root));
  if (me != root) { /* only this rank's own side counts */
    if (gather)
      return resolve_staged(comm, fn, sendcount, sendtype, m);
    return resolve_staged(comm, fn, recvcount, recvtype, m);
  }
  if (gather) {
    CHECK(resolve_staged(comm, fn, recvcount, recvtype, &r));
    *m = r;
    if (sendbuf == MPI_IN_PLACE)
      return MPI_SUCCESS;
    CHECK(resolve_staged(comm, fn, sendcount, sendtype, &s));
    return same_signature(comm, fn, &s, &r);
  }
  CHECK(resolve_staged(comm, fn, sendcount, sendtype, &s));
  *m = s;
  if (recvbuf == MPI_IN_PLACE)
    return MPI_SUCCESS;
  CHECK(resolve_staged(comm, fn, recvcount, recvtype, &r));
  return same_signature(comm, fn, &s, &r);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
               MPI_Comm comm) {
  moved m = {0};
  crnet_mpi_stage sg = {0};
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Gather"));
  CHECK(prep_rooted(comm, "MPI_Gather", root, true, sendbuf, sendcount,
                    sendtype, recvbuf, recvcount, recvtype, &m));
  CHECK(stage_rooted(comm, "MPI_Gather", &sg, root, true, &sendbuf, sendcount,
                     sendtype, &recvbuf, recvcount, recvtype));
  return staged_end(
      comm, "MPI_Gather", &sg,
      crnet_gather(comm->c, send_of(sendbuf), recvbuf, m.count, m.dt, root));
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm, MPI_Request *request) {
  moved m = {0};
  struct crnet_mpi_request *r = NULL;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Igather"));
  CHECK(prep_rooted(comm, "MPI_Igather", root, true, sendbuf, sendcount,
                    sendtype, recvbuf, recvcount, recvtype, &m));
  CHECK(crnet_mpi_request_new(comm, "MPI_Igather", REQ_COLL, request, &r));
  CHECK(staged_or_freed(r, request,
                        stage_rooted(comm, "MPI_Igather", &r->stage, root, true,
                                     &sendbuf, sendcount, sendtype, &recvbuf,
                                     recvcount, recvtype)));
  return crnet_mpi_request_started(comm, "MPI_Igather",
                                   crnet_igather(comm->c, send_of(sendbuf),
                                                 recvbuf, m.count, m.dt, root,
                                                 &r->req),
                                   r, request);
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
  moved m = {0};
  crnet_mpi_stage sg = {0};
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Scatter"));
  CHECK(prep_rooted(comm, "MPI_Scatter", root, false, sendbuf, sendcount,
                    sendtype, recvbuf, recvcount, recvtype, &m));
  CHECK(stage_rooted(comm, "MPI_Scatter", &sg, root, false, &sendbuf, sendcount,
                     sendtype, &recvbuf, recvcount, recvtype));
  return staged_end(
      comm, "MPI_Scatter", &sg,
      crnet_scatter(comm->c, sendbuf,
                    recvbuf == MPI_IN_PLACE ? CRNET_IN_PLACE : recvbuf, m.count,
                    m.dt, root));
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request *request) {
  moved m = {0};
  struct crnet_mpi_request *r = NULL;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Iscatter"));
  CHECK(prep_rooted(comm, "MPI_Iscatter", root, false, sendbuf, sendcount,
                    sendtype, recvbuf, recvcount, recvtype, &m));
  CHECK(crnet_mpi_request_new(comm, "MPI_Iscatter", REQ_COLL, request, &r));
  CHECK(staged_or_freed(r, request,
                        stage_rooted(comm, "MPI_Iscatter", &r->stage, root,
                                     false, &sendbuf, sendcount, sendtype,
                                     &recvbuf, recvcount, recvtype)));
  return crnet_mpi_request_started(
      comm, "MPI_Iscatter",
      crnet_iscatter(comm->c, sendbuf,
                     recvbuf == MPI_IN_PLACE ? CRNET_IN_PLACE : recvbuf,
                     m.count, m.dt, root, &r->req),
      r, request);
}

/* --- the v-variants --- */

/* allgatherv: counts and displacements, both in *arrays (p each). */
static int prep_allgatherv(MPI_Comm comm, const char *fn, const void *sendbuf,
                           int sendcount, MPI_Datatype sendtype,
                           const int recvcounts[], const int displs[],
                           MPI_Datatype recvtype, moved *m, size_t *own,
                           size_t **arrays) {
  int p = crnet_comm_size(comm->c), me = crnet_comm_rank(comm->c), rc;
  static const char *const names[] = {"recvcounts", "displs"};
  CHECK(resolve(comm, fn, 1, recvtype, m));
  CHECK(crnet_mpi_widen(comm, fn, 2, (const int *const[]){recvcounts, displs},
                        names, p, m->t.n, arrays));
  *own = (*arrays)[me];
  if (sendbuf != MPI_IN_PLACE) {
    moved s;
    rc = resolve(comm, fn, sendcount, sendtype, &s);
    if (rc == MPI_SUCCESS && (s.dt != m->dt || s.count != *own))
      rc = crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "this rank sends %zu x %s but recvcounts[%d] says "
                          "%zu x %s",
                          s.count, crnet_datatype_name(s.dt), me, *own,
                          crnet_datatype_name(m->dt));
    if (rc != MPI_SUCCESS) {
      free(*arrays);
      return rc;
    }
  }
  return MPI_SUCCESS;
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int displs[],
                   MPI_Datatype recvtype, MPI_Comm comm) {
  moved m = {0};
  size_t own, *arrays;
  int rc, p;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Allgatherv"));
  CHECK(prep_allgatherv(comm, "MPI_Allgatherv", sendbuf, sendcount, sendtype,
                        recvcounts, displs, recvtype, &m, &own, &arrays));
  p = crnet_comm_size(comm->c);
  rc = crnet_allgatherv(comm->c, send_of(sendbuf), own, recvbuf, arrays,
                        arrays + p, m.dt);
  free(arrays);
  return crnet_mpi_from_crnet(comm, "MPI_Allgatherv", rc);
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                    void *recvbuf, const int recvcounts[], const int displs[],
                    MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request *request) {
  moved m = {0};
  size_t own;
  struct crnet_mpi_request *r = NULL;
  int rc, p;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Iallgatherv"));
  CHECK(crnet_mpi_request_new(comm, "MPI_Iallgatherv", REQ_COLL, request, &r));
  rc = prep_allgatherv(comm, "MPI_Iallgatherv", sendbuf, sendcount, sendtype,
                       recvcounts, displs, recvtype, &m, &own, &r->arrays);
  if (rc != MPI_SUCCESS) {
    crnet_mpi_request_free(r);
    return rc;
  }
  p = crnet_comm_size(comm->c);
  return crnet_mpi_request_started(
      comm, "MPI_Iallgatherv",
      crnet_iallgatherv(comm->c, send_of(sendbuf), own, recvbuf, r->arrays,
                        r->arrays + p, m.dt, &r->req),
      r, request);
}

/* alltoallv: sendcounts, sdispls, recvcounts, rdispls in *arrays (p
 * each). In place, crnet needs a send buffer: a copy of the receive
 * buffer's blocks in *temp, sent by the receive side's counts. */
/* In place, an alltoallv's blocks to send are the receive buffer's as the
 * call begins: *temp becomes their copy, up to the end of the last block
 * (arrays: crnet_alltoallv's four, receive counts and displacements in
 * elements of es bytes). On failure *arrays is freed too, and NULL. */
static int copy_in_place(MPI_Comm comm, const char *fn, const void *recvbuf,
                         size_t p, size_t es, size_t **arrays, void **temp) {
  size_t end = 0;
  for (size_t j = 0; j < p; j++) {
    size_t e = (*arrays)[3 * p + j] + (*arrays)[2 * p + j];
    end = e > end ? e : end;
  }
  *temp = malloc(end * es > 0 ? end * es : 1);
  if (*temp == NULL) {
    free(*arrays);
    *arrays = NULL; /* a request that holds them frees them too */
    return crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "%zu bytes", end * es);
  }
  memcpy(*temp, recvbuf, end * es);
  return MPI_SUCCESS;
}

/* crnet's alltoallv over prepared arrays (prep_alltoallv, prep_alltoallw),
 * from temp when in place: blocking (frees the arrays and temp), or
 * started as r (which owns them). */
static int alltoallv_run(MPI_Comm comm, const char *fn, size_t *a, void *temp,
                         const void *sendbuf, void *recvbuf,
                         crnet_datatype dt) {
  int p = crnet_comm_size(comm->c);
  int rc = crnet_alltoallv(comm->c, temp != NULL ? temp : sendbuf, a, a + p,
                           recvbuf, a + 2 * p, a + 3 * p, dt);
  free(a);
  free(temp);
  return crnet_mpi_from_crnet(comm, fn, rc);
}

static int alltoallv_start(MPI_Comm comm, const char *fn,
                           struct crnet_mpi_request *r, const void *sendbuf,
                           void *recvbuf, crnet_datatype dt,
                           MPI_Request *request) {
  int p = crnet_comm_size(comm->c);
  size_t *a = r->arrays;
  return crnet_mpi_request_started(
      comm, fn,
      crnet_ialltoallv(comm->c, r->temp != NULL ? r->temp : sendbuf, a, a + p,
                       recvbuf, a + 2 * p, a + 3 * p, dt, &r->req),
      r, request);
}

static int prep_alltoallv(MPI_Comm comm, const char *fn, const void *sendbuf,
                          const int sendcounts[], const int sdispls[],
                          MPI_Datatype sendtype, const void *recvbuf,
                          const int recvcounts[], const int rdispls[],
                          MPI_Datatype recvtype, moved *m, size_t **arrays,
                          void **temp) {
  int p = crnet_comm_size(comm->c);
  bool in_place = sendbuf == MPI_IN_PLACE;
  moved s = {0};
  const int *v[4] = {in_place ? recvcounts : sendcounts,
                     in_place ? rdispls : sdispls, recvcounts, rdispls};
  static const char *const names[4] = {"sendcounts", "sdispls", "recvcounts",
                                       "rdispls"};
  *temp = NULL;
  CHECK(resolve(comm, fn, 1, recvtype, m));
  if (!in_place) {
    CHECK(resolve(comm, fn, 1, sendtype, &s));
    if (s.dt != m->dt || s.count != m->count)
      return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                            "sendtype and recvtype differ (%zu x %s against "
                            "%zu x %s): crnet-mpi needs them alike",
                            s.count, crnet_datatype_name(s.dt), m->count,
                            crnet_datatype_name(m->dt));
  }
  CHECK(crnet_mpi_widen(comm, fn, 4, v, names, p, m->t.n, arrays));
  return in_place ? copy_in_place(comm, fn, recvbuf, (size_t)p,
                                  crnet_datatype_size(m->dt), arrays, temp)
                  : MPI_SUCCESS;
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
                  const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                  const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  moved m = {0};
  size_t *a;
  void *temp;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Alltoallv"));
  CHECK(prep_alltoallv(comm, "MPI_Alltoallv", sendbuf, sendcounts, sdispls,
                       sendtype, recvbuf, recvcounts, rdispls, recvtype, &m, &a,
                       &temp));
  return alltoallv_run(comm, "MPI_Alltoallv", a, temp, sendbuf, recvbuf, m.dt);
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[],
                   const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int rdispls[],
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
  moved m = {0};
  struct crnet_mpi_request *r = NULL;
  int rc;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Ialltoallv"));
  CHECK(crnet_mpi_request_new(comm, "MPI_Ialltoallv", REQ_COLL, request, &r));
  rc = prep_alltoallv(comm, "MPI_Ialltoallv", sendbuf, sendcounts, sdispls,
                      sendtype, recvbuf, recvcounts, rdispls, recvtype, &m,
                      &r->arrays, &r->temp);
  if (rc != MPI_SUCCESS) {
    crnet_mpi_request_free(r);
    return rc;
  }
  return alltoallv_start(comm, "MPI_Ialltoallv", r, sendbuf, recvbuf, m.dt,
                         request);
}

/* alltoallw: each block its own type, displacements in bytes. A crnet call
 * moves one type, so the blocks go as bytes, each its count times its
 * type's size: a block's length is still checked against the receive
 * that takes it (MPI_ERR_TRUNCATE, or a mismatch), its type is not. The
 * arrays in *arrays are the four of crnet_alltoallv in bytes; in place,
 * *temp holds the blocks to send, copied from recvbuf. */
static int prep_alltoallw(MPI_Comm comm, const char *fn, const void *sendbuf,
                          const int sendcounts[], const int sdispls[],
                          const MPI_Datatype sendtypes[], const void *recvbuf,
                          const int recvcounts[], const int rdispls[],
                          const MPI_Datatype recvtypes[], size_t **arrays,
                          void **temp) {
  size_t p = (size_t)crnet_comm_size(comm->c), *a;
  bool in_place = sendbuf == MPI_IN_PLACE;
  const int *counts[2] = {in_place ? recvcounts : sendcounts, recvcounts};
  const int *displs[2] = {in_place ? rdispls : sdispls, rdispls};
  const MPI_Datatype *types[2] = {in_place ? recvtypes : sendtypes, recvtypes};
  *temp = NULL;
  for (int k = 0; k < 2; k++)
    if (counts[k] == NULL || displs[k] == NULL || types[k] == NULL)
      return crnet_mpi_fail(comm, fn, MPI_ERR_ARG, "the %s arrays are NULL",
                            k == 0 ? "send" : "receive");
  if ((a = malloc(sizeof *a * 4 * p)) == NULL)
    return crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "%zu counts", 4 * p);
  for (int k = 0; k < 2; k++)
    for (size_t j = 0; j < p; j++) {
      moved m;
      int rc = resolve(comm, fn, counts[k][j], types[k][j], &m);
      if (rc == MPI_SUCCESS && displs[k][j] < 0)
        rc = crnet_mpi_fail(comm, fn, MPI_ERR_ARG, "%s[%zu] is %d",
                            k == 0 ? "sdispls" : "rdispls", j, displs[k][j]);
      if (rc != MPI_SUCCESS) {
        free(a);
        return rc;
      }
      a[2 * k * p + j] = m.count * crnet_datatype_size(m.dt);
      a[(2 * k + 1) * p + j] = (size_t)displs[k][j];
    }
  *arrays = a;
  return in_place ? copy_in_place(comm, fn, recvbuf, p, 1, arrays, temp)
                  : MPI_SUCCESS;
}

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[],
                  const int sdispls[], const MPI_Datatype sendtypes[],
                  void *recvbuf, const int recvcounts[], const int rdispls[],
                  const MPI_Datatype recvtypes[], MPI_Comm comm) {
  size_t *a;
  void *temp;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Alltoallw"));
  CHECK(prep_alltoallw(comm, "MPI_Alltoallw", sendbuf, sendcounts, sdispls,
                       sendtypes, recvbuf, recvcounts, rdispls, recvtypes, &a,
                       &temp));
  return alltoallv_run(comm, "MPI_Alltoallw", a, temp, sendbuf, recvbuf,
                       CRNET_UINT8);
}

int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[],
                   const int sdispls[], const MPI_Datatype sendtypes[],
                   void *recvbuf, const int recvcounts[], const int rdispls[],
                   const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request *request) {
  struct crnet_mpi_request *r = NULL;
  int rc;
  CHECK(crnet_mpi_check_comm(&comm, "MPI_Ialltoallw"));
  CHECK(crnet_mpi_request_new(comm, "MPI_Ialltoallw", REQ_COLL, request, &r));
  rc = prep_alltoallw(comm, "MPI_Ialltoallw", sendbuf, sendcounts, sdispls,
                      sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                      &r->arrays, &r->temp);
  if (rc != MPI_SUCCESS) {
    crnet_mpi_request_free(r);
    return rc;
  }
  return alltoallv_start(comm, "MPI_Ialltoallw", r, sendbuf, recvbuf,
                         CRNET_UINT8, request);
}
