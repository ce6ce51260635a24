/* MPI_Gatherv and MPI_Scatterv, blocking and not: the root exchanges a
 * message with every other rank (MPI's "linear" algorithm), its own block
 * is a copy.
 *
 * crnet has no collective for them: only the root knows every count, and
 * crnet's calls are checked alike on every rank. The messages go on a dup
 * of the communicator made at its first such call (every rank makes that
 * call at the same point of the comm's collectives), so that no receive
 * of the program's own (MPI_ANY_TAG) can take one. Successive calls match
 * in order: messages between two ranks with one tag do not overtake.
 * A count that disagrees with the root's gets the receive's truncation
 * error at the root (gatherv) or the rank (scatterv).
 *
 * Refused arguments. Only the root checks the counts and displacements,
 * only each rank its own block: a rank that refuses its arguments would
 * leave the others waiting for its messages. So every rank makes the dup
 * first, whatever its arguments, and a rank that refuses still takes part
 * (refuse): it sends an empty message with CRNET_MPI_TAG_REFUSED where it
 * would have sent its block, and drops the blocks it would have received.
 * Receives take any tag from their peer, and a refusal fails the request
 * naming that rank (requests.c). Calls still match in order: each pair's
 * messages of a call come in the order of the calls. */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

enum { TAG_GATHERV = 1, TAG_SCATTERV = 2 };
_Static_assert(CRNET_MPI_TAG_REFUSED != TAG_GATHERV &&
                   CRNET_MPI_TAG_REFUSED != TAG_SCATTERV,
               "a refusal's tag is its own");

int crnet_mpi_hidden_free(MPI_Comm comm) {
  int rc = 0;
  if (comm->hidden != NULL)
    rc = crnet_comm_destroy(comm->hidden);
  if (rc != CRNET_EINVAL) /* refused while its messages are in flight */
    comm->hidden = NULL;
  return rc;
}

static int hidden_of(MPI_Comm comm, const char *fn) {
  int rc;
  if (comm->hidden != NULL)
    return MPI_SUCCESS;
  rc = crnet_comm_dup(comm->c, &comm->hidden);
  return crnet_mpi_from_crnet(comm, fn, rc);
}

/* What one call moves: the root's per-rank counts and displacements in
 * base elements, this rank's own count, the element type. */
typedef struct vcall {
  crnet_datatype dt;
  size_t esize, own;
  size_t *counts, *displs; /* the root's, else NULL */
  int p, me, root;
} vcall;

static int prep(MPI_Comm comm, const char *fn, bool gather, const void *sbuf,
                int scount, MPI_Datatype stype, const void *rbuf,
                const int counts[], const int displs[], MPI_Datatype rtype,
                int rcount, int root, vcall *v) {
  crnet_mpi_type own, roots;
  int rc;
  memset(v, 0, sizeof *v);
  v->p = crnet_comm_size(comm->c);
  v->me = crnet_comm_rank(comm->c);
  v->root = root;
  /* This rank's own side: the send of gatherv, the receive of scatterv;
   * at the root in place, none. */
  bool in_place = v->me == root && (gather ? sbuf : rbuf) == MPI_IN_PLACE;
  MPI_Datatype odt = gather ? stype : rtype;
  int ocount = gather ? scount : rcount;
  if (!in_place) {
    if (ocount < 0)
      return crnet_mpi_fail(comm, fn, MPI_ERR_COUNT, "count %d", ocount);
    if (!crnet_mpi_type_get(odt, &own))
      return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                            "datatype %d does not exist or is not committed",
                            odt);
    if (own.holes)
      return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                            "datatype %d has holes: crnet-mpi's %s takes "
                            "dense datatypes only (docs/MPI.md)",
                            odt, fn);
    v->dt = own.base;
    v->own = (size_t)ocount * own.n;
  }
  if (v->me != root)
    return MPI_SUCCESS;
  MPI_Datatype vdt = gather ? rtype : stype;
  if (!crnet_mpi_type_get(vdt, &roots))
    return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "datatype %d does not exist or is not committed",
                          vdt);
  if (roots.holes)
    return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "datatype %d has holes: crnet-mpi's %s takes dense "
                          "datatypes only (docs/MPI.md)",
                          vdt, fn);
  if (!in_place && roots.base != v->dt)
    return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "the root's own block is %s, its %s side %s: "
                          "crnet-mpi needs them alike",
                          crnet_datatype_name(v->dt),
                          gather ? "receive" : "send",
                          crnet_datatype_name(roots.base));
  v->dt = roots.base;
  static const char *const names[] = {"counts", "displs"};
  rc = crnet_mpi_widen(comm, fn, 2, (const int *const[]){counts, displs}, names,
                       v->p, roots.n, &v->counts);
  if (rc != MPI_SUCCESS)
    return rc;
  v->displs = v->counts + v->p;
  if (!in_place && v->own != v->counts[root]) {
    size_t want = v->counts[root];
    free(v->counts);
    return crnet_mpi_fail(comm, fn, MPI_ERR_TRUNCATE,
                          "the root's own block has %zu elements, its counts "
                          "say %zu",
                          v->own, want);
  }
  v->esize = crnet_datatype_size(v->dt);
  return MPI_SUCCESS;
}

/* Starts the call's messages as parts of request r; the root copies its
 * own block. */
static int start(MPI_Comm comm, bool gather, const void *sbuf, void *rbuf,
                 const vcall *v, struct crnet_mpi_request *r) {
  int rc = 0;
  crnet_comm *h = comm->hidden;
  int tag = gather ? TAG_GATHERV : TAG_SCATTERV;
  r->kind = REQ_PARTS;
  r->parts = calloc((size_t)v->p, sizeof *r->parts);
  if (r->parts == NULL)
    return CRNET_ENOMEM;
  /* A received part's status says whether its sender refused. */
  if (gather == (v->me == v->root)) {
    r->part_st = calloc((size_t)v->p, sizeof *r->part_st);
    if (r->part_st == NULL)
      return CRNET_ENOMEM;
  }
  if (v->me != v->root) {
    r->nparts = 1;
    return gather
               ? crnet_isend(h, sbuf, v->own, v->dt, v->root, tag, &r->parts[0])
               : crnet_irecv(h, rbuf, v->own, v->dt, v->root, CRNET_ANY_TAG,
                             &r->part_st[0], &r->parts[0]);
  }
  for (int q = 0; q < v->p && rc == 0; q++) {
    size_t at = v->displs[q] * v->esize;
    if (q == v->me) {
      if (gather && sbuf != MPI_IN_PLACE)
        memmove((char *)rbuf + at, sbuf, v->own * v->esize);
      else if (!gather && rbuf != MPI_IN_PLACE)
        memmove(rbuf, (const char *)sbuf + at, v->own * v->esize);
      continue;
    }
    rc = gather ? crnet_irecv(h, (char *)rbuf + at, v->counts[q], v->dt, q,
                              CRNET_ANY_TAG, &r->part_st[r->nparts],
                              &r->parts[r->nparts])
                : crnet_isend(h, (const char *)sbuf + at, v->counts[q], v->dt,
                              q, tag, &r->parts[r->nparts]);
    if (rc == 0)
      r->nparts++;
  }
  return rc;
}

/* This rank refused its arguments (its error is raised already), but the
 * others exchange this call's messages with it all the same: it tells
 * those that wait for a block of it, and drops the blocks it would have
 * received (an empty receive: a block is dropped whole, and its sender's
 * send completes). It waits for those blocks: their senders are in this
 * call too. */
static void refuse(MPI_Comm comm, bool gather, int root) {
  crnet_comm *h = comm->hidden;
  int me = crnet_comm_rank(h), p = crnet_comm_size(h);
  bool tell = (me == root) != gather; /* else drop */
  for (int q = 0; q < p; q++) {
    if (q == me || (me != root && q != root))
      continue;
    if (tell)
      (void)crnet_send(h, NULL, 0, CRNET_BYTE, q, CRNET_MPI_TAG_REFUSED);
    else
      (void)crnet_recv(h, NULL, 0, CRNET_BYTE, q, CRNET_ANY_TAG, NULL);
  }
}

/* The whole call: blocking waits here, nonblocking hands the request
 * over. A start that failed halfway still completes what it started. */
static int vrooted(MPI_Comm comm, const char *fn, bool gather, const void *sbuf,
                   int scount, MPI_Datatype stype, void *rbuf,
                   const int counts[], const int displs[], MPI_Datatype rtype,
                   int rcount, int root, bool nonblocking,
                   MPI_Request *request) {
  struct crnet_mpi_request *r = NULL;
  vcall v;
  int rc;
  rc = crnet_mpi_check_comm(&comm, fn);
  if (rc != MPI_SUCCESS)
    return rc;
  if (root < 0 || root >= crnet_comm_size(comm->c))
    return crnet_mpi_fail(comm, fn, MPI_ERR_ROOT, "root %d of %d ranks", root,
                          crnet_comm_size(comm->c));
  rc = hidden_of(comm, fn);
  if (rc != MPI_SUCCESS)
    return rc;
  if (nonblocking && request == NULL)
    rc = crnet_mpi_fail(comm, fn, MPI_ERR_ARG, "request is NULL");
  else
    rc = prep(comm, fn, gather, sbuf, scount, stype, rbuf, counts, displs,
              rtype, rcount, root, &v);
  if (rc == MPI_SUCCESS) {
    rc = crnet_mpi_request_new(
        comm, fn, REQ_PARTS, request != NULL ? request : &(MPI_Request){0}, &r);
    if (rc != MPI_SUCCESS)
      free(v.counts);
  }
  if (rc != MPI_SUCCESS) {
    refuse(comm, gather, root);
    return rc;
  }
  int started = start(comm, gather, sbuf, rbuf, &v, r);
  free(v.counts);
  if (r->nparts == 0) /* the root of one rank: its copy was all */
    r->done = true;
  if (started != 0 || request == NULL) {
    /* Every message that began must end before its buffer is given
     * back. */
    MPI_Request all = r;
    int wrc = MPI_Wait(&all, MPI_STATUS_IGNORE);
    if (started != 0)
      return crnet_mpi_from_crnet(comm, fn, started);
    return wrc;
  }
  *request = r;
  return MPI_SUCCESS;
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, const int recvcounts[], const int displs[],
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return vrooted(comm, "MPI_Gatherv", true, sendbuf, sendcount, sendtype,
                 recvbuf, recvcounts, displs, recvtype, 0, root, false, NULL);
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, const int recvcounts[], const int displs[],
                 MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request *request) {
  return vrooted(comm, "MPI_Igatherv", true, sendbuf, sendcount, sendtype,
                 recvbuf, recvcounts, displs, recvtype, 0, root, true, request);
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[],
                 const int displs[], MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root,
                 MPI_Comm comm) {
  return vrooted(comm, "MPI_Scatterv", false, sendbuf, 0, sendtype, recvbuf,
                 sendcounts, displs, recvtype, recvcount, root, false, NULL);
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[],
                  const int displs[], MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                  MPI_Request *request) {
  return vrooted(comm, "MPI_Iscatterv", false, sendbuf, 0, sendtype, recvbuf,
                 sendcounts, displs, recvtype, recvcount, root, true, request);
}
