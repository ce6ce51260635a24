/* Messages between two ranks: send, receive, sendrecv and their
 * nonblocking forms, probes, with MPI_PROC_NULL (a peer that is nobody: the
 * call completes at once, a receive with an empty status). A datatype with
 * holes travels packed (layout.c): crnet's messages are bytes, so either
 * side may describe the data with any type of the same signature. */
#include <stdlib.h>

#include <string.h>

#include "mpi_internal.h"

typedef struct message {
  size_t count;
  crnet_datatype dt;
  bool holes; /* staged: packed before a send, unpacked after a receive */
} message;

/* *commp becomes the library's object behind the handle (check_comm). */
static int check(MPI_Comm *commp, const char *fn, int count, MPI_Datatype dt,
                 int peer, bool any_ok, int tag, message *out) {
  crnet_mpi_type t;
  int p, rc = crnet_mpi_check_comm(commp, fn);
  MPI_Comm comm = *commp;
  if (rc != MPI_SUCCESS)
    return rc;
  p = crnet_comm_size(comm->c);
  if (count < 0)
    return crnet_mpi_fail(comm, fn, MPI_ERR_COUNT, "count %d", count);
  if (!crnet_mpi_type_get(dt, &t))
    return crnet_mpi_fail(comm, fn, MPI_ERR_TYPE,
                          "datatype %d does not exist or is not committed", dt);
  if (peer != MPI_PROC_NULL && !(any_ok && peer == MPI_ANY_SOURCE) &&
      (peer < 0 || peer >= p))
    return crnet_mpi_fail(comm, fn, MPI_ERR_RANK, "rank %d of %d", peer, p);
  if (tag < 0 && !(any_ok && tag == MPI_ANY_TAG))
    return crnet_mpi_fail(comm, fn, MPI_ERR_TAG, "tag %d", tag);
  out->count = (size_t)count * t.n;
  out->dt = t.base;
  out->holes = t.holes;
  return MPI_SUCCESS;
}

/* The send modes: standard, synchronous (completes once the receive is
 * posted: crnet_ssend), ready (the program says the receive is posted
 * already; MPI lets it work as a standard send, which it does here). */
enum mode { STANDARD, SYNCHRONOUS, READY, BUFFERED };

static int send_mode(const void *buf, int count, MPI_Datatype datatype,
                     int dest, int tag, MPI_Comm comm, enum mode mode,
                     const char *fn) {
  message m = {0};
  crnet_mpi_stage st = {0};
  int rc = check(&comm, fn, count, datatype, dest, false, tag, &m);
  if (rc != MPI_SUCCESS || dest == MPI_PROC_NULL)
    return rc;
  if ((rc = crnet_mpi_stage_send(comm, fn, &st, datatype, buf, (size_t)count,
                                 &buf)) != MPI_SUCCESS)
    return rc;
  if (mode == BUFFERED) {
    int size = 0;
    (void)MPI_Type_size(datatype, &size); /* it exists: check said so */
    rc = crnet_mpi_bsend(comm, fn, buf, m.count, m.dt,
                         (size_t)count * (size_t)(size > 0 ? size : 0), dest,
                         tag);
  } else {
    rc = crnet_mpi_from_crnet(
        comm, fn,
        mode == SYNCHRONOUS
            ? crnet_ssend(comm->c, buf, m.count, m.dt, dest, tag)
            : crnet_send(comm->c, buf, m.count, m.dt, dest, tag));
  }
  crnet_mpi_stage_end(&st, false, 0);
  return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
             int tag, MPI_Comm comm) {
  return send_mode(buf, count, datatype, dest, tag, comm, STANDARD, "MPI_Send");
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm) {
  return send_mode(buf, count, datatype, dest, tag, comm, SYNCHRONOUS,
                   "MPI_Ssend");
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm) {
  return send_mode(buf, count, datatype, dest, tag, comm, BUFFERED,
                   "MPI_Bsend");
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm) {
  return send_mode(buf, count, datatype, dest, tag, comm, READY, "MPI_Rsend");
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
             MPI_Comm comm, MPI_Status *status) {
  message m = {0};
  crnet_mpi_stage sg = {0};
  crnet_status st;
  int rc = check(&comm, "MPI_Recv", count, datatype, source, true, tag, &m);
  if (rc != MPI_SUCCESS)
    return rc;
  if (source == MPI_PROC_NULL) {
    crnet_mpi_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0, 0);
    return MPI_SUCCESS;
  }
  if ((rc = crnet_mpi_stage_recv(comm, "MPI_Recv", &sg, datatype, buf,
                                 (size_t)count, false, &buf)) != MPI_SUCCESS)
    return rc;
  rc = crnet_recv(comm->c, buf, m.count, m.dt, source, tag, &st);
  crnet_mpi_stage_end(&sg, rc == 0, st.bytes);
  crnet_mpi_status(status, st.source, st.tag, st.error, st.bytes);
  return crnet_mpi_from_crnet(comm, "MPI_Recv", rc);
}

/* MPI_Sendrecv's and MPI_Sendrecv_replace's exchange, their arguments
 * checked (s and r): sendbuf is what crnet sends (a copy in sg, if it was
 * staged), the receive is staged here, and sg ends here. */
static int exchange(MPI_Comm comm, const char *fn, crnet_mpi_stage *sg,
                    const void *sendbuf, const message *s, int dest,
                    int sendtag, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, const message *r, int source,
                    int recvtag, MPI_Status *status) {
  crnet_status st;
  int rc = MPI_SUCCESS;
  if (source == MPI_PROC_NULL) {
    crnet_mpi_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0, 0);
    if (dest != MPI_PROC_NULL)
      rc = crnet_mpi_from_crnet(
          comm, fn,
          crnet_send(comm->c, sendbuf, s->count, s->dt, dest, sendtag));
    crnet_mpi_stage_end(sg, false, 0);
    return rc;
  }
  if ((rc = crnet_mpi_stage_recv(comm, fn, sg, recvtype, recvbuf,
                                 (size_t)recvcount, false, &recvbuf)) !=
      MPI_SUCCESS) {
    crnet_mpi_stage_end(sg, false, 0);
    return rc;
  }
  if (dest == MPI_PROC_NULL)
    rc = crnet_recv(comm->c, recvbuf, r->count, r->dt, source, recvtag, &st);
  else
    rc = crnet_sendrecv(comm->c, sendbuf, s->count, s->dt, dest, sendtag,
                        recvbuf, r->count, r->dt, source, recvtag, &st);
  crnet_mpi_stage_end(sg, rc == 0, st.bytes);
  crnet_mpi_status(status, st.source, st.tag, st.error, st.bytes);
  return crnet_mpi_from_crnet(comm, fn, rc);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 int dest, int sendtag, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                 MPI_Status *status) {
  static const char fn[] = "MPI_Sendrecv";
  message s = {0}, r = {0};
  crnet_mpi_stage sg = {0};
  int rc = check(&comm, fn, sendcount, sendtype, dest, false, sendtag, &s);
  if (rc == MPI_SUCCESS)
    rc = check(&comm, fn, recvcount, recvtype, source, true, recvtag, &r);
  if (rc == MPI_SUCCESS && dest != MPI_PROC_NULL)
    rc = crnet_mpi_stage_send(comm, fn, &sg, sendtype, sendbuf,
                              (size_t)sendcount, &sendbuf);
  if (rc != MPI_SUCCESS)
    return rc;
  return exchange(comm, fn, &sg, sendbuf, &s, dest, sendtag, recvbuf, recvcount,
                  recvtype, &r, source, recvtag, status);
}

/* The send goes from a copy (a type with holes packs into one; a dense
 * one is copied), and the receive lands in buf. */
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest,
                         int sendtag, int source, int recvtag, MPI_Comm comm,
                         MPI_Status *status) {
  static const char fn[] = "MPI_Sendrecv_replace";
  message s = {0}, r = {0};
  crnet_mpi_stage sg = {0};
  const void *copy = NULL;
  int rc = check(&comm, fn, count, datatype, dest, false, sendtag, &s);
  if (rc == MPI_SUCCESS)
    rc = check(&comm, fn, count, datatype, source, true, recvtag, &r);
  if (rc == MPI_SUCCESS && dest != MPI_PROC_NULL && s.holes)
    rc = crnet_mpi_stage_send(comm, fn, &sg, datatype, buf, (size_t)count,
                              &copy);
  else if (rc == MPI_SUCCESS && dest != MPI_PROC_NULL) {
    size_t bytes = s.count * crnet_datatype_size(s.dt);
    if ((sg.send = malloc(bytes > 0 ? bytes : 1)) == NULL)
      rc = crnet_mpi_fail(comm, fn, MPI_ERR_NO_MEM, "%zu bytes", bytes);
    else
      copy = memcpy(sg.send, buf, bytes);
  }
  if (rc != MPI_SUCCESS)
    return rc;
  return exchange(comm, fn, &sg, copy, &s, dest, sendtag, buf, count, datatype,
                  &r, source, recvtag, status);
}

static int isend_mode(const void *buf, int count, MPI_Datatype datatype,
                      int dest, int tag, MPI_Comm comm, MPI_Request *request,
                      enum mode mode, const char *fn) {
  message m = {0};
  struct crnet_mpi_request *r = NULL;
  int rc = check(&comm, fn, count, datatype, dest, false, tag, &m);
  if (rc == MPI_SUCCESS)
    rc = crnet_mpi_request_new(comm, fn,
                               dest == MPI_PROC_NULL ? REQ_NULL_PEER : REQ_SEND,
                               request, &r);
  if (rc != MPI_SUCCESS)
    return rc;
  if (dest == MPI_PROC_NULL) {
    r->done = true;
    *request = r;
    return MPI_SUCCESS;
  }
  if ((rc = crnet_mpi_stage_send(comm, fn, &r->stage, datatype, buf,
                                 (size_t)count, &buf)) != MPI_SUCCESS) {
    crnet_mpi_request_free(r);
    *request = MPI_REQUEST_NULL;
    return rc;
  }
  return crnet_mpi_request_started(
      comm, fn,
      mode == SYNCHRONOUS
          ? crnet_issend(comm->c, buf, m.count, m.dt, dest, tag, &r->req)
          : crnet_isend(comm->c, buf, m.count, m.dt, dest, tag, &r->req),
      r, request);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm, MPI_Request *request) {
  return isend_mode(buf, count, datatype, dest, tag, comm, request, STANDARD,
                    "MPI_Isend");
}

int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest,
               int tag, MPI_Comm comm, MPI_Request *request) {
  return isend_mode(buf, count, datatype, dest, tag, comm, request, SYNCHRONOUS,
                    "MPI_Issend");
}

/* The message is copied and on its way: the request is complete at once. */
int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest,
               int tag, MPI_Comm comm, MPI_Request *request) {
  struct crnet_mpi_request *r = NULL;
  MPI_Comm c = comm;
  int rc = crnet_mpi_check_comm(&c, "MPI_Ibsend");
  /* The request first: once the message is on its way, nothing may fail. */
  if (rc == MPI_SUCCESS)
    rc = crnet_mpi_request_new(c, "MPI_Ibsend",
                               dest == MPI_PROC_NULL ? REQ_NULL_PEER : REQ_SEND,
                               request, &r);
  if (rc != MPI_SUCCESS)
    return rc;
  rc = send_mode(buf, count, datatype, dest, tag, comm, BUFFERED, "MPI_Ibsend");
  if (rc != MPI_SUCCESS) {
    crnet_mpi_request_free(r);
    return rc;
  }
  r->done = true;
  *request = r;
  return MPI_SUCCESS;
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest,
               int tag, MPI_Comm comm, MPI_Request *request) {
  return isend_mode(buf, count, datatype, dest, tag, comm, request, READY,
                    "MPI_Irsend");
}

int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
              MPI_Comm comm, MPI_Request *request) {
  message m = {0};
  struct crnet_mpi_request *r = NULL;
  int rc = check(&comm, "MPI_Irecv", count, datatype, source, true, tag, &m);
  if (rc == MPI_SUCCESS)
    rc = crnet_mpi_request_new(
        comm, "MPI_Irecv", source == MPI_PROC_NULL ? REQ_NULL_PEER : REQ_RECV,
        request, &r);
  if (rc != MPI_SUCCESS)
    return rc;
  if (source == MPI_PROC_NULL) {
    r->done = true;
    *request = r;
    return MPI_SUCCESS;
  }
  if ((rc = crnet_mpi_stage_recv(comm, "MPI_Irecv", &r->stage, datatype, buf,
                                 (size_t)count, false, &buf)) != MPI_SUCCESS) {
    crnet_mpi_request_free(r);
    *request = MPI_REQUEST_NULL;
    return rc;
  }
  return crnet_mpi_request_started(
      comm, "MPI_Irecv",
      crnet_irecv(comm->c, buf, m.count, m.dt, source, tag, &r->st, &r->req), r,
      request);
}

/* A probe's arguments; MPI_PROC_NULL is answered here, at once, with the
 * empty status MPI gives it (*answered). */
static int check_probe(MPI_Comm *commp, const char *fn, int source, int tag,
                       MPI_Status *status, bool *answered) {
  message m = {0};
  int rc = check(commp, fn, 0, MPI_BYTE, source, true, tag, &m);
  *answered = rc == MPI_SUCCESS && source == MPI_PROC_NULL;
  if (*answered)
    crnet_mpi_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0, 0);
  return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  crnet_status st;
  bool answered;
  int rc = check_probe(&comm, "MPI_Probe", source, tag, status, &answered);
  if (rc != MPI_SUCCESS || answered)
    return rc;
  rc = crnet_probe(comm->c, source, tag, &st);
  if (rc == 0)
    crnet_mpi_status(status, st.source, st.tag, 0, st.bytes);
  return crnet_mpi_from_crnet(comm, "MPI_Probe", rc);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag,
               MPI_Status *status) {
  crnet_status st;
  bool answered;
  int rc = check_probe(&comm, "MPI_Iprobe", source, tag, status, &answered);
  if (rc == MPI_SUCCESS && flag == NULL)
    rc = crnet_mpi_fail(comm, "MPI_Iprobe", MPI_ERR_ARG, "flag is NULL");
  if (rc != MPI_SUCCESS)
    return rc;
  if (answered) {
    *flag = 1;
    return MPI_SUCCESS;
  }
  rc = crnet_iprobe(comm->c, source, tag, flag, &st);
  if (rc == 0 && *flag)
    crnet_mpi_status(status, st.source, st.tag, 0, st.bytes);
  return crnet_mpi_from_crnet(comm, "MPI_Iprobe", rc);
}
