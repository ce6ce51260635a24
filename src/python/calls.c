/* Every collective and message call of crnet.h as a Comm method, blocking
 * and nonblocking (comm.allreduce and comm.iallreduce, ...).
 *
 * A call goes in three steps, the same for all of them:
 *   1. parse (one function per call below): the arguments become a `call`,
 *      its buffers held (buffer.c) and checked against each other and the
 *      comm's size: every TypeError and ValueError is raised here, before
 *      anything is sent;
 *   2. dispatch: the crnet function, blocking (the GIL released, the comm
 *      marked busy so that close() from another thread is refused) or
 *      nonblocking (the GIL kept: starting a call does not wait), into a
 *      pycr_pending that keeps the buffers, counts and status until the
 *      call completes (request.c);
 *   3. the result: the output buffer object (in place: the input), a
 *      Status for a receive, None for calls without output; a crnet error
 *      raised as its crnet.Error subclass with the comm's explanation.
 *
 * In place. Without out=, a call that has an output works in place on its
 * buffer argument, with CRNET_IN_PLACE's meaning for that collective
 * (crnet.h): allgather's and gather's buffer holds all p blocks, this rank's
 * already at its place; reduce_scatter's result lands at the start of its
 * buffer; scatter's root keeps its block in its input. crnet.IN_PLACE as
 * the input with out= given means the same, and so do the same buffer
 * given twice.
 *
 * Sizes are in items of the buffers (elements of crnet's datatype times
 * the lanes of complex numbers): counts=, displs= and the like count
 * items, as a NumPy user counts them. Outputs must have exactly the size
 * the call fills, but for the v-calls, whose displacements may leave gaps
 * (at least the extent then), and receives, which take any message that
 * fits. */
#include "crnet_py.h"

#include <string.h>

enum kind {
  K_ALLREDUCE,
  K_RS_BLOCK,
  K_RS_V,
  K_ALLGATHER,
  K_ALLTOALL,
  K_BCAST,
  K_REDUCE,
  K_SCAN,
  K_EXSCAN,
  K_BARRIER,
  K_GATHER,
  K_SCATTER,
  K_ALLGATHERV,
  K_ALLTOALLV,
  K_SEND,
  K_RECV,
  K_SENDRECV,
};

typedef struct call {
  enum kind kind;
  const char *name; /* "allreduce" or "iallreduce", for messages */
  int nonblocking;
  pycr_buf *in, *out; /* held buffers (NULL: none) */
  const void *send;
  void *recv;
  size_t count;  /* crnet's count argument; send count of sendrecv */
  size_t rcount; /* receive count of sendrecv */
  crnet_datatype dt, rdt;
  crnet_op op;
  int root;
  const size_t *c1, *d1, *c2, *d2; /* counts and displacements */
  int peer, tag, rpeer, rtag;
  crnet_status *status;
  size_t itemsize; /* of the receive buffer, for Status.count */
  int is_recv;
  PyObject *result; /* borrowed: what the call returns */
} call;

/* One call of crnet, blocking (req NULL) or not. */
static int dispatch(crnet_comm *c, const call *k, crnet_request **req) {
  switch (k->kind) {
  case K_ALLREDUCE:
    return req ? crnet_iallreduce(c, k->send, k->recv, k->count, k->dt, k->op,
                                  req)
               : crnet_allreduce(c, k->send, k->recv, k->count, k->dt, k->op);
  case K_RS_BLOCK:
    return req ? crnet_ireduce_scatter_block(c, k->send, k->recv, k->count,
                                             k->dt, k->op, req)
               : crnet_reduce_scatter_block(c, k->send, k->recv, k->count,
                                            k->dt, k->op);
  case K_RS_V:
    return req ? crnet_ireduce_scatter(c, k->send, k->recv, k->c1, k->dt, k->op,
                                       req)
               : crnet_reduce_scatter(c, k->send, k->recv, k->c1, k->dt, k->op);
  case K_ALLGATHER:
    return req ? crnet_iallgather(c, k->send, k->recv, k->count, k->dt, req)
               : crnet_allgather(c, k->send, k->recv, k->count, k->dt);
  case K_ALLTOALL:
    return req ? crnet_ialltoall(c, k->send, k->recv, k->count, k->dt, req)
               : crnet_alltoall(c, k->send, k->recv, k->count, k->dt);
  case K_BCAST:
    return req ? crnet_ibcast(c, k->recv, k->count, k->dt, k->root, req)
               : crnet_bcast(c, k->recv, k->count, k->dt, k->root);
  case K_REDUCE:
    return req ? crnet_ireduce(c, k->send, k->recv, k->count, k->dt, k->op,
                               k->root, req)
               : crnet_reduce(c, k->send, k->recv, k->count, k->dt, k->op,
                              k->root);
  case K_SCAN:
    return req ? crnet_iscan(c, k->send, k->recv, k->count, k->dt, k->op, req)
               : crnet_scan(c, k->send, k->recv, k->count, k->dt, k->op);
  case K_EXSCAN:
    return req ? crnet_iexscan(c, k->send, k->recv, k->count, k->dt, k->op, req)
               : crnet_exscan(c, k->send, k->recv, k->count, k->dt, k->op);
  case K_BARRIER:
    return req ? crnet_ibarrier(c, req) : crnet_barrier(c);
  case K_GATHER:
    return req ? crnet_igather(c, k->send, k->recv, k->count, k->dt, k->root,
                               req)
               : crnet_gather(c, k->send, k->recv, k->count, k->dt, k->root);
  case K_SCATTER:
    return req ? crnet_iscatter(c, k->send, k->recv, k->count, k->dt, k->root,
                                req)
               : crnet_scatter(c, k->send, k->recv, k->count, k->dt, k->root);
  case K_ALLGATHERV:
    return req ? crnet_iallgatherv(c, k->send, k->count, k->recv, k->c1, k->d1,
                                   k->dt, req)
               : crnet_allgatherv(c, k->send, k->count, k->recv, k->c1, k->d1,
                                  k->dt);
  case K_ALLTOALLV:
    return req ? crnet_ialltoallv(c, k->send, k->c1, k->d1, k->recv, k->c2,
                                  k->d2, k->dt, req)
               : crnet_alltoallv(c, k->send, k->c1, k->d1, k->recv, k->c2,
                                 k->d2, k->dt);
  case K_SEND:
    return req ? crnet_isend(c, k->send, k->count, k->dt, k->peer, k->tag, req)
               : crnet_send(c, k->send, k->count, k->dt, k->peer, k->tag);
  case K_RECV:
    return req ? crnet_irecv(c, k->recv, k->count, k->dt, k->rpeer, k->rtag,
                             k->status, req)
               : crnet_recv(c, k->recv, k->count, k->dt, k->rpeer, k->rtag,
                            k->status);
  case K_SENDRECV:
    /* crnet.h has no nonblocking sendrecv: an isend and an irecv are. */
    return crnet_sendrecv(c, k->send, k->count, k->dt, k->peer, k->tag, k->recv,
                          k->rcount, k->rdt, k->rpeer, k->rtag, k->status);
  }
  return CRNET_EINVAL;
}

/* --- argument helpers ---------------------------------------------------- */

/* Items of a held buffer (crnet elements over lanes). */
static size_t items(const pycr_buf *b) { return b->count / (size_t)b->lanes; }

static int no_value(PyObject *o) { return o == NULL || o == Py_None; }

/* The input buffer `buf` and the output `out` of a call with in-place
 * semantics (see the top of the file): holds them in bufs, sets k->in,
 * k->out, k->send, k->recv and k->result. Returns 1 in place, 0 not, -1
 * with an exception. */
static int in_out(call *k, PyObject *buf, PyObject *out, int dtype,
                  pycr_buf *bufs) {
  if (no_value(out)) {
    if (buf == pycr_in_place) {
      PyErr_Format(PyExc_TypeError,
                   "%s: crnet.IN_PLACE as the input needs out=", k->name);
      return -1;
    }
    if (pycr_buf_get(buf, 1, dtype, k->name, "buf (no out=: in place)",
                     &bufs[1]) < 0)
      return -1;
    k->out = &bufs[1];
    k->send = CRNET_IN_PLACE;
    k->recv = bufs[1].ptr;
    k->result = buf;
    return 1;
  }
  if (pycr_buf_get(out, 1, dtype, k->name, "out", &bufs[1]) < 0)
    return -1;
  k->out = &bufs[1];
  k->recv = bufs[1].ptr;
  k->result = out;
  if (buf == pycr_in_place) {
    k->send = CRNET_IN_PLACE;
    return 1;
  }
  if (pycr_buf_get(buf, 0, dtype, k->name, "buf", &bufs[0]) < 0)
    return -1;
  if (pycr_buf_same_type(&bufs[0], &bufs[1], k->name) < 0)
    return -1;
  if (pycr_buf_same_memory(&bufs[0], &bufs[1])) {
    pycr_buf_release(&bufs[0]);
    k->send = CRNET_IN_PLACE;
    return 1;
  }
  k->in = &bufs[0];
  k->send = bufs[0].ptr;
  return 0;
}

static int size_error(const call *k, const char *fmt, size_t a, size_t b) {
  PyObject *msg = PyUnicode_FromFormat(fmt, a, b);
  if (msg != NULL) {
    PyErr_Format(PyExc_ValueError, "%s: %U", k->name, msg);
    Py_DECREF(msg);
  }
  return -1;
}

/* The items of a buffer split into p blocks: -1 unless they divide. */
static int blocks_of(const call *k, const pycr_buf *b, int p, const char *what,
                     size_t *count) {
  size_t n = items(b);
  if (n % (size_t)p != 0) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %s has %zu items, not a multiple of the %d ranks",
                 k->name, what, n, p);
    return -1;
  }
  *count = b->count / (size_t)p;
  return 0;
}

/* A call that only sends from buf (send, a reduce or gather away from the
 * root): buf is the whole message. */
static int send_only(call *k, PyObject *buf, int dtype, pycr_buf *bufs) {
  if (pycr_buf_get(buf, 0, dtype, k->name, "buf", &bufs[0]) < 0)
    return -1;
  k->in = &bufs[0];
  k->send = bufs[0].ptr;
  k->count = bufs[0].count;
  k->dt = bufs[0].dt;
  return 0;
}

/* allgather, and gather at the root: out holds a block of buf's size from
 * each of the p ranks (in place: out is those blocks). */
static int blocks_from_each(pycr_comm *c, call *k, int in_place) {
  if (in_place)
    return blocks_of(k, k->out, c->size, "buf", &k->count);
  if (items(k->out) != (size_t)c->size * items(k->in))
    return size_error(k,
                      "out has %zu items, not the %zu of size x buf (a block "
                      "from each rank)",
                      items(k->out), (size_t)c->size * items(k->in));
  k->count = k->in->count;
  return 0;
}

/* The extent of blocks counts[r] at displs[r] (displs NULL: packed). */
static size_t extent(const size_t *counts, const size_t *displs, int p) {
  size_t end = 0, at = 0;
  for (int r = 0; r < p; r++) {
    size_t e = displs != NULL ? displs[r] + counts[r] : at + counts[r];
    at += counts[r];
    if (e > end)
      end = e;
  }
  return end;
}

static int parse_root(pycr_comm *c, const call *k, PyObject *o, int *root) {
  return pycr_parse_int(o, 0, 0, c->size - 1, k->name, "root", root);
}

/* --- one parser per call ------------------------------------------------- */

typedef int parse_fn(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, call *k, pycr_buf *bufs,
                     size_t *arrays);

/* allreduce, scan, exscan: in and out of the same size. */
static int parse_elementwise(pycr_comm *c, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames, call *k,
                             pycr_buf *bufs, size_t *arrays) {
  static const char *const names[] = {"buf", "op", "out", "dtype"};
  PyObject *a[4];
  int dtype;
  (void)c;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 4, 2, 1, a) < 0 ||
      pycr_parse_op(a[1], k->name, &k->op) < 0 ||
      pycr_parse_dtype(a[3], k->name, &dtype) < 0)
    return -1;
  int in_place = in_out(k, a[0], a[2], dtype, bufs);
  if (in_place < 0)
    return -1;
  if (!in_place && k->in->count != k->out->count)
    return size_error(k, "buf has %zu items and out %zu", items(k->in),
                      items(k->out));
  k->count = k->out->count;
  k->dt = k->out->dt;
  return pycr_check_op(k->out, k->op, k->name);
}

static int parse_reduce_scatter(pycr_comm *c, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames, call *k,
                                pycr_buf *bufs, size_t *arrays) {
  static const char *const names[] = {"buf", "op", "out", "counts", "dtype"};
  PyObject *a[5];
  int dtype;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 5, 2, 1, a) < 0 ||
      pycr_parse_op(a[1], k->name, &k->op) < 0 ||
      pycr_parse_dtype(a[4], k->name, &dtype) < 0)
    return -1;
  int in_place = in_out(k, a[0], a[2], dtype, bufs);
  if (in_place < 0)
    return -1;
  const pycr_buf *input = in_place ? k->out : k->in;
  k->dt = k->out->dt;
  if (no_value(a[3])) {
    k->kind = K_RS_BLOCK;
    if (in_place) {
      if (blocks_of(k, k->out, c->size, "buf", &k->count) < 0)
        return -1;
    } else {
      if (items(k->in) != (size_t)c->size * items(k->out))
        return size_error(k,
                          "buf has %zu items, not the %zu of size x out "
                          "(one block of out's size per rank)",
                          items(k->in), (size_t)c->size * items(k->out));
      k->count = k->out->count;
    }
  } else {
    size_t total;
    k->kind = K_RS_V;
    if (pycr_parse_counts(a[3], c->size, (size_t)k->out->lanes, k->name,
                          "counts", arrays, &total) < 0)
      return -1;
    if (input->count != total)
      return size_error(k, "buf has %zu items, not sum(counts) = %zu",
                        items(input), total / (size_t)k->out->lanes);
    if (!in_place && k->out->count != arrays[c->rank])
      return size_error(k, "out has %zu items, not counts[rank] = %zu",
                        items(k->out), arrays[c->rank] / (size_t)k->out->lanes);
    k->c1 = arrays;
  }
  return pycr_check_op(k->out, k->op, k->name);
}

/* allgather, gather (at the root): out holds p blocks of the input's size.
 * alltoall: out is the input's size, p blocks. */
static int parse_allgather(pycr_comm *c, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames, call *k,
                           pycr_buf *bufs, size_t *arrays) {
  static const char *const names[] = {"buf", "out", "dtype"};
  PyObject *a[3];
  int dtype;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 3, 1, 1, a) < 0 ||
      pycr_parse_dtype(a[2], k->name, &dtype) < 0)
    return -1;
  int in_place = in_out(k, a[0], a[1], dtype, bufs);
  if (in_place < 0)
    return -1;
  k->dt = k->out->dt;
  return blocks_from_each(c, k, in_place);
}

static int parse_alltoall(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames, call *k, pycr_buf *bufs,
                          size_t *arrays) {
  static const char *const names[] = {"buf", "out", "dtype"};
  PyObject *a[3];
  int dtype;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 3, 1, 1, a) < 0 ||
      pycr_parse_dtype(a[2], k->name, &dtype) < 0)
    return -1;
  int in_place = in_out(k, a[0], a[1], dtype, bufs);
  if (in_place < 0)
    return -1;
  k->dt = k->out->dt;
  if (!in_place && k->in->count != k->out->count)
    return size_error(k, "buf has %zu items and out %zu", items(k->in),
                      items(k->out));
  return blocks_of(k, k->out, c->size, in_place ? "buf" : "out", &k->count);
}

static int parse_bcast(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, call *k, pycr_buf *bufs,
                       size_t *arrays) {
  static const char *const names[] = {"buf", "root", "dtype"};
  PyObject *a[3];
  int dtype;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 3, 2, 1, a) < 0 ||
      parse_root(c, k, a[1], &k->root) < 0 ||
      pycr_parse_dtype(a[2], k->name, &dtype) < 0 ||
      pycr_buf_get(a[0], 1, dtype, k->name, "buf", &bufs[1]) < 0)
    return -1;
  k->out = &bufs[1];
  k->recv = bufs[1].ptr;
  k->count = bufs[1].count;
  k->dt = bufs[1].dt;
  k->result = a[0];
  return 0;
}

static int parse_reduce(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames, call *k, pycr_buf *bufs,
                        size_t *arrays) {
  static const char *const names[] = {"buf", "op", "root", "out", "dtype"};
  PyObject *a[5];
  int dtype;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 5, 3, 1, a) < 0 ||
      pycr_parse_op(a[1], k->name, &k->op) < 0 ||
      parse_root(c, k, a[2], &k->root) < 0 ||
      pycr_parse_dtype(a[4], k->name, &dtype) < 0)
    return -1;
  if (c->rank == k->root) {
    int in_place = in_out(k, a[0], a[3], dtype, bufs);
    if (in_place < 0)
      return -1;
    if (!in_place && k->in->count != k->out->count)
      return size_error(k, "buf has %zu items and out %zu", items(k->in),
                        items(k->out));
    k->count = k->out->count;
    k->dt = k->out->dt;
    return pycr_check_op(k->out, k->op, k->name);
  }
  /* Not the root: out is ignored, as crnet ignores recv there. */
  if (send_only(k, a[0], dtype, bufs) < 0)
    return -1;
  return pycr_check_op(k->in, k->op, k->name);
}

static int parse_gather(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames, call *k, pycr_buf *bufs,
                        size_t *arrays) {
  static const char *const names[] = {"buf", "root", "out", "dtype"};
  PyObject *a[4];
  int dtype;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 4, 2, 1, a) < 0 ||
      parse_root(c, k, a[1], &k->root) < 0 ||
      pycr_parse_dtype(a[3], k->name, &dtype) < 0)
    return -1;
  if (c->rank == k->root) {
    int in_place = in_out(k, a[0], a[2], dtype, bufs);
    if (in_place < 0)
      return -1;
    k->dt = k->out->dt;
    return blocks_from_each(c, k, in_place);
  }
  return send_only(k, a[0], dtype, bufs);
}

static int parse_scatter(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames, call *k, pycr_buf *bufs,
                         size_t *arrays) {
  static const char *const names[] = {"buf", "root", "out", "dtype"};
  PyObject *a[4];
  int dtype;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 4, 2, 0, a) < 0 ||
      parse_root(c, k, a[1], &k->root) < 0 ||
      pycr_parse_dtype(a[3], k->name, &dtype) < 0)
    return -1;
  if (c->rank == k->root) {
    if (pycr_buf_get(a[0], 0, dtype, k->name, "buf", &bufs[0]) < 0)
      return -1;
    k->in = &bufs[0];
    k->send = bufs[0].ptr;
    k->dt = bufs[0].dt;
    if (blocks_of(k, k->in, c->size, "buf", &k->count) < 0)
      return -1;
    if (no_value(a[2])) {
      /* The root's block stays in its input. */
      k->recv = CRNET_IN_PLACE;
      k->result = a[0];
      return 0;
    }
    if (pycr_buf_get(a[2], 1, dtype, k->name, "out", &bufs[1]) < 0 ||
        pycr_buf_same_type(&bufs[0], &bufs[1], k->name) < 0)
      return -1;
    k->out = &bufs[1];
    k->recv = bufs[1].ptr;
    k->result = a[2];
    if (bufs[1].count != k->count)
      return size_error(k, "out has %zu items, not buf's %zu / size",
                        items(k->out), items(k->in));
    return 0;
  }
  /* Not the root: buf is ignored (None will do), out receives. */
  if (no_value(a[2])) {
    PyErr_Format(PyExc_TypeError,
                 "%s: out= is required on rank %d (not the "
                 "root)",
                 k->name, c->rank);
    return -1;
  }
  if (pycr_buf_get(a[2], 1, dtype, k->name, "out", &bufs[1]) < 0)
    return -1;
  k->out = &bufs[1];
  k->recv = bufs[1].ptr;
  k->count = bufs[1].count;
  k->dt = bufs[1].dt;
  k->result = a[2];
  return 0;
}

/* Displacements (a sequence, or None: packed) into out[0..p), scaled. */
static int parse_displs(pycr_comm *c, const call *k, PyObject *o, size_t scale,
                        const char *what, size_t *out, const size_t **res) {
  if (no_value(o)) {
    *res = NULL;
    return 0;
  }
  if (pycr_parse_counts(o, c->size, scale, k->name, what, out, NULL) < 0)
    return -1;
  *res = out;
  return 0;
}

static int parse_allgatherv(pycr_comm *c, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames, call *k,
                            pycr_buf *bufs, size_t *arrays) {
  static const char *const names[] = {"buf", "counts", "out", "displs",
                                      "dtype"};
  PyObject *a[5];
  int dtype;
  int p = c->size;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 5, 2, 2, a) < 0 ||
      pycr_parse_dtype(a[4], k->name, &dtype) < 0)
    return -1;
  int in_place = in_out(k, a[0], a[2], dtype, bufs);
  if (in_place < 0)
    return -1;
  size_t lanes = (size_t)k->out->lanes;
  k->dt = k->out->dt;
  if (pycr_parse_counts(a[1], p, lanes, k->name, "counts", arrays, NULL) < 0 ||
      parse_displs(c, k, a[3], lanes, "displs", arrays + p, &k->d1) < 0)
    return -1;
  k->c1 = arrays;
  k->count = arrays[c->rank];
  if (!in_place && k->in->count != k->count)
    return size_error(k, "buf has %zu items, not counts[rank] = %zu",
                      items(k->in), k->count / lanes);
  size_t end = extent(arrays, k->d1, p);
  if (k->out->count < end)
    return size_error(k,
                      "the output has %zu items, less than the %zu its "
                      "blocks span",
                      items(k->out), end / lanes);
  return 0;
}

static int parse_alltoallv(pycr_comm *c, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames, call *k,
                           pycr_buf *bufs, size_t *arrays) {
  static const char *const names[] = {
      "buf", "sendcounts", "out", "recvcounts", "sdispls", "rdispls", "dtype"};
  PyObject *a[7];
  int dtype;
  int p = c->size;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 7, 4, 4, a) < 0 ||
      pycr_parse_dtype(a[6], k->name, &dtype) < 0)
    return -1;
  if (a[0] == pycr_in_place) {
    PyErr_Format(PyExc_TypeError, "%s: crnet has no in-place alltoallv",
                 k->name);
    return -1;
  }
  if (pycr_buf_get(a[0], 0, dtype, k->name, "buf", &bufs[0]) < 0 ||
      pycr_buf_get(a[2], 1, dtype, k->name, "out", &bufs[1]) < 0 ||
      pycr_buf_same_type(&bufs[0], &bufs[1], k->name) < 0)
    return -1;
  k->in = &bufs[0];
  k->out = &bufs[1];
  k->send = bufs[0].ptr;
  k->recv = bufs[1].ptr;
  k->result = a[2];
  k->dt = bufs[1].dt;
  size_t lanes = (size_t)bufs[1].lanes;
  if (pycr_parse_counts(a[1], p, lanes, k->name, "sendcounts", arrays, NULL) <
          0 ||
      parse_displs(c, k, a[4], lanes, "sdispls", arrays + p, &k->d1) < 0 ||
      pycr_parse_counts(a[3], p, lanes, k->name, "recvcounts", arrays + 2 * p,
                        NULL) < 0 ||
      parse_displs(c, k, a[5], lanes, "rdispls", arrays + 3 * p, &k->d2) < 0)
    return -1;
  k->c1 = arrays;
  k->c2 = arrays + 2 * p;
  size_t send_end = extent(k->c1, k->d1, p), recv_end = extent(k->c2, k->d2, p);
  if (bufs[0].count < send_end)
    return size_error(k, "buf has %zu items, less than the %zu its blocks span",
                      items(&bufs[0]), send_end / lanes);
  if (bufs[1].count < recv_end)
    return size_error(k, "out has %zu items, less than the %zu its blocks span",
                      items(&bufs[1]), recv_end / lanes);
  return 0;
}

static int parse_send(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames, call *k, pycr_buf *bufs,
                      size_t *arrays) {
  static const char *const names[] = {"buf", "dest", "tag", "dtype"};
  PyObject *a[4];
  int dtype;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 4, 3, 2, a) < 0 ||
      pycr_parse_int(a[1], 0, 0, c->size - 1, k->name, "dest", &k->peer) < 0 ||
      pycr_parse_int(a[2], 0, 0, CRNET_TAG_MAX, k->name, "tag", &k->tag) < 0 ||
      pycr_parse_dtype(a[3], k->name, &dtype) < 0)
    return -1;
  return send_only(k, a[0], dtype, bufs);
}

/* The receive half of recv and sendrecv. */
static int recv_half(pycr_comm *c, call *k, PyObject *buf, PyObject *source,
                     PyObject *tag, int dtype, pycr_buf *b) {
  if (pycr_parse_int(source, CRNET_ANY_SOURCE, CRNET_ANY_SOURCE, c->size - 1,
                     k->name, "source", &k->rpeer) < 0 ||
      pycr_parse_int(tag, CRNET_ANY_TAG, CRNET_ANY_TAG, CRNET_TAG_MAX, k->name,
                     "tag", &k->rtag) < 0 ||
      pycr_buf_get(buf, 1, dtype, k->name, "buf", b) < 0)
    return -1;
  k->out = b;
  k->recv = b->ptr;
  k->is_recv = 1;
  k->itemsize = dtype != PYCR_NO_DTYPE
                    ? crnet_datatype_size((crnet_datatype)dtype)
                    : (size_t)b->view.itemsize;
  return 0;
}

static int parse_recv(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames, call *k, pycr_buf *bufs,
                      size_t *arrays) {
  static const char *const names[] = {"buf", "source", "tag", "dtype"};
  PyObject *a[4];
  int dtype;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 4, 3, 1, a) < 0 ||
      pycr_parse_dtype(a[3], k->name, &dtype) < 0 ||
      recv_half(c, k, a[0], a[1], a[2], dtype, &bufs[1]) < 0)
    return -1;
  k->count = bufs[1].count;
  k->dt = bufs[1].dt;
  return 0;
}

static int parse_sendrecv(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames, call *k, pycr_buf *bufs,
                          size_t *arrays) {
  static const char *const names[] = {"sendbuf", "dest",    "recvbuf", "source",
                                      "sendtag", "recvtag", "dtype"};
  PyObject *a[7];
  int dtype;
  (void)arrays;
  if (pycr_parse_args(k->name, args, nargs, kwnames, names, 7, 4, 3, a) < 0 ||
      pycr_parse_int(a[1], 0, 0, c->size - 1, k->name, "dest", &k->peer) < 0 ||
      pycr_parse_int(a[4], 0, 0, CRNET_TAG_MAX, k->name, "sendtag", &k->tag) <
          0 ||
      pycr_parse_dtype(a[6], k->name, &dtype) < 0 ||
      pycr_buf_get(a[0], 0, dtype, k->name, "sendbuf", &bufs[0]) < 0 ||
      recv_half(c, k, a[2], a[3], a[5], dtype, &bufs[1]) < 0)
    return -1;
  k->in = &bufs[0];
  k->send = bufs[0].ptr;
  k->count = bufs[0].count;
  k->dt = bufs[0].dt;
  k->rcount = bufs[1].count;
  k->rdt = bufs[1].dt;
  return 0;
}

static int parse_barrier(pycr_comm *c, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames, call *k, pycr_buf *bufs,
                         size_t *arrays) {
  (void)c;
  (void)bufs;
  (void)arrays;
  return pycr_parse_args(k->name, args, nargs, kwnames, NULL, 0, 0, 0, NULL);
}

/* --- the entry points ---------------------------------------------------- */

typedef struct entry {
  const char *name, *iname;
  enum kind kind; /* parse may change it (reduce_scatter) */
  parse_fn *parse;
  int arrays; /* size_t per rank the call's counts need */
} entry;

enum {
  E_ALLREDUCE,
  E_REDUCE_SCATTER,
  E_ALLGATHER,
  E_ALLTOALL,
  E_BCAST,
  E_REDUCE,
  E_SCAN,
  E_EXSCAN,
  E_BARRIER,
  E_GATHER,
  E_SCATTER,
  E_ALLGATHERV,
  E_ALLTOALLV,
  E_SEND,
  E_RECV,
  E_SENDRECV,
};

static const entry entries[] = {
    [E_ALLREDUCE] = {"allreduce", "iallreduce", K_ALLREDUCE, parse_elementwise,
                     0},
    [E_REDUCE_SCATTER] = {"reduce_scatter", "ireduce_scatter", K_RS_BLOCK,
                          parse_reduce_scatter, 1},
    [E_ALLGATHER] = {"allgather", "iallgather", K_ALLGATHER, parse_allgather,
                     0},
    [E_ALLTOALL] = {"alltoall", "ialltoall", K_ALLTOALL, parse_alltoall, 0},
    [E_BCAST] = {"bcast", "ibcast", K_BCAST, parse_bcast, 0},
    [E_REDUCE] = {"reduce", "ireduce", K_REDUCE, parse_reduce, 0},
    [E_SCAN] = {"scan", "iscan", K_SCAN, parse_elementwise, 0},
    [E_EXSCAN] = {"exscan", "iexscan", K_EXSCAN, parse_elementwise, 0},
    [E_BARRIER] = {"barrier", "ibarrier", K_BARRIER, parse_barrier, 0},
    [E_GATHER] = {"gather", "igather", K_GATHER, parse_gather, 0},
    [E_SCATTER] = {"scatter", "iscatter", K_SCATTER, parse_scatter, 0},
    [E_ALLGATHERV] = {"allgatherv", "iallgatherv", K_ALLGATHERV,
                      parse_allgatherv, 2},
    [E_ALLTOALLV] = {"alltoallv", "ialltoallv", K_ALLTOALLV, parse_alltoallv,
                     4},
    [E_SEND] = {"send", "isend", K_SEND, parse_send, 0},
    [E_RECV] = {"recv", "irecv", K_RECV, parse_recv, 0},
    [E_SENDRECV] = {"sendrecv", NULL, K_SENDRECV, parse_sendrecv, 0},
};

static PyObject *run(pycr_comm *self, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, const entry *e, int nonblocking) {
  call k;
  pycr_buf stack_bufs[2];
  crnet_status status;
  size_t *arrays = NULL;
  pycr_pending *pend = NULL;
  pycr_buf *bufs = stack_bufs;
  int rc;

  memset(&k, 0, sizeof k);
  k.kind = e->kind;
  k.name = nonblocking ? e->iname : e->name;
  k.nonblocking = nonblocking;
  if (self->comm == NULL)
    return pycr_raise_invalid("%s: the comm is closed", k.name);
  if (pycr_norphans > 0)
    pycr_reap();
  size_t narrays = (size_t)e->arrays * (size_t)self->size;
  if (nonblocking) {
    pend = pycr_pending_new(narrays);
    if (pend == NULL)
      return NULL;
    bufs = pend->bufs;
    arrays = pend->arrays;
    k.status = &pend->status;
  } else {
    if (narrays > 0) {
      arrays = PyMem_Malloc(narrays * sizeof *arrays);
      if (arrays == NULL)
        return PyErr_NoMemory();
    }
    k.status = &status;
  }
  bufs[0].held = bufs[1].held = 0;
  if (e->parse(self, args, nargs, kwnames, &k, bufs, arrays) < 0)
    goto fail;
  if (self->comm == NULL) {
    /* Parsing may run Python code (__index__, a buffer export), and
     * another thread may have closed the comm meanwhile. */
    pycr_raise_invalid("%s: the comm is closed", k.name);
    goto fail;
  }

  if (nonblocking) {
    pycr_request *r = pycr_request_alloc(self, k.name);
    if (r == NULL)
      goto fail;
    rc = dispatch(self->comm, &k, &pend->req);
    if (rc != 0) {
      pycr_raise_comm(self, rc);
      Py_DECREF(r);
      goto fail;
    }
    pend->is_recv = k.is_recv;
    pend->itemsize = k.itemsize;
    pycr_request_attach(r, pend, k.is_recv ? NULL : k.result);
    return (PyObject *)r;
  }

  self->busy++;
  Py_BEGIN_ALLOW_THREADS
  rc = dispatch(self->comm, &k, NULL);
  Py_END_ALLOW_THREADS
  self->busy--;
  pycr_buf_release(&bufs[0]);
  pycr_buf_release(&bufs[1]);
  PyMem_Free(arrays);
  if (rc != 0)
    return pycr_raise_comm(self, rc);
  if (k.is_recv)
    return pycr_status_new(&status, k.itemsize);
  if (k.result == NULL)
    Py_RETURN_NONE;
  return Py_NewRef(k.result);

fail:
  if (nonblocking) {
    pycr_pending_discard(pend);
  } else {
    pycr_buf_release(&bufs[0]);
    pycr_buf_release(&bufs[1]);
    PyMem_Free(arrays);
  }
  return NULL;
}

#define PYCR_CALL(E, fn)                                                       \
  static PyObject *m_##fn(pycr_comm *s, PyObject *const *a, Py_ssize_t n,      \
                          PyObject *kw) {                                      \
    return run(s, a, n, kw, &entries[E], 0);                                   \
  }                                                                            \
  static PyObject *m_i##fn(pycr_comm *s, PyObject *const *a, Py_ssize_t n,     \
                           PyObject *kw) {                                     \
    return run(s, a, n, kw, &entries[E], 1);                                   \
  }

PYCR_CALL(E_ALLREDUCE, allreduce)
PYCR_CALL(E_REDUCE_SCATTER, reduce_scatter)
PYCR_CALL(E_ALLGATHER, allgather)
PYCR_CALL(E_ALLTOALL, alltoall)
PYCR_CALL(E_BCAST, bcast)
PYCR_CALL(E_REDUCE, reduce)
PYCR_CALL(E_SCAN, scan)
PYCR_CALL(E_EXSCAN, exscan)
PYCR_CALL(E_BARRIER, barrier)
PYCR_CALL(E_GATHER, gather)
PYCR_CALL(E_SCATTER, scatter)
PYCR_CALL(E_ALLGATHERV, allgatherv)
PYCR_CALL(E_ALLTOALLV, alltoallv)
PYCR_CALL(E_SEND, send)
PYCR_CALL(E_RECV, recv)

static PyObject *m_sendrecv(pycr_comm *s, PyObject *const *a, Py_ssize_t n,
                            PyObject *kw) {
  return run(s, a, n, kw, &entries[E_SENDRECV], 0);
}

/* Docstrings: the blocking call's, and the nonblocking twin's. */
#define PAIR(fn, sig, doc)                                                     \
  {#fn, PYCR_FASTCALL(m_##fn), METH_FASTCALL | METH_KEYWORDS,                  \
   #fn "($self, /, " sig ")\n--\n\n" doc                                       \
       "\n\nThe GIL is released while it runs. Its nonblocking twin is i" #fn  \
       "."},                                                                   \
  {                                                                            \
    "i" #fn, PYCR_FASTCALL(m_i##fn), METH_FASTCALL | METH_KEYWORDS,            \
        "i" #fn "($self, /, " sig ")\n--\n\n"                                  \
        "Starts " #fn " (see its help) without waiting and returns a "         \
        "crnet.Request, whose wait() returns what " #fn                        \
        " returns. The buffers "                                               \
        "belong to crnet until it completes: do not write the input nor "      \
        "touch "                                                               \
        "the output before then."                                              \
  }

PyMethodDef pycr_call_methods[] = {
    PAIR(allreduce, "buf, op='sum', *, out=None, dtype=None",
         "Every rank gets the reduction of every rank's buf, element by "
         "element, bitwise identical everywhere. Without out=, in place in "
         "buf. op: 'sum', 'prod', 'min', 'max', 'band', 'bor', 'bxor', "
         "'land', 'lor' or crnet.SUM, ... Returns the output buffer."),
    PAIR(reduce_scatter, "buf, op='sum', *, out=None, counts=None, dtype=None",
         "Rank r gets the reduction of every rank's block r. Without counts, "
         "buf holds size blocks of out's size; with counts (one per rank), "
         "rank r's block has counts[r] items and out holds counts[rank]. "
         "Without out=, in place: the result lands at the start of buf. "
         "Returns the output buffer."),
    PAIR(allgather, "buf, *, out=None, dtype=None",
         "out = every rank's buf, in rank order (size times buf's items). "
         "Without out=, in place: buf holds all the blocks, this rank's "
         "already at its place. Returns the output buffer."),
    PAIR(alltoall, "buf, *, out=None, dtype=None",
         "Block j of buf (size blocks) goes to rank j; block j of out comes "
         "from rank j. Without out=, in place in buf. Returns the output "
         "buffer."),
    PAIR(bcast, "buf, root=0, *, dtype=None",
         "Every rank's buf = root's buf. Returns buf."),
    PAIR(reduce, "buf, op='sum', root=0, *, out=None, dtype=None",
         "The root gets the reduction of every rank's buf (in out, or in "
         "place in buf without out=); out is ignored elsewhere. Returns the "
         "output buffer at the root, None elsewhere."),
    PAIR(scan, "buf, op='sum', *, out=None, dtype=None",
         "Inclusive prefix reduction in rank order: rank r gets buf_0 op ... "
         "op buf_r. Without out=, in place. Returns the output buffer."),
    PAIR(exscan, "buf, op='sum', *, out=None, dtype=None",
         "Exclusive prefix reduction: rank r gets buf_0 op ... op buf_{r-1}; "
         "rank 0's output is left untouched. Without out=, in place. Returns "
         "the output buffer."),
    PAIR(barrier, "", "Returns once every rank has entered it. Returns None."),
    PAIR(gather, "buf, root=0, *, out=None, dtype=None",
         "The root's out gets every rank's buf in rank order (size blocks); "
         "at the root without out=, in place: buf holds all the blocks, the "
         "root's at its place. Elsewhere out is ignored. Returns the output "
         "at the root, None elsewhere."),
    PAIR(scatter, "buf, root=0, *, out=None, dtype=None",
         "Rank r's out gets block r of the root's buf (size blocks). buf is "
         "ignored elsewhere (None will do); out= is required but at the "
         "root, whose block may stay in buf (in place). Returns the output "
         "buffer."),
    PAIR(allgatherv, "buf, counts, *, out=None, displs=None, dtype=None",
         "Every rank's out gets counts[r] items from rank r at displs[r] "
         "(None: packed in rank order); buf has counts[rank] items. Without "
         "out=, in place: buf is the output, this rank's block at its "
         "place. Returns the output buffer."),
    PAIR(alltoallv,
         "buf, sendcounts, out, recvcounts, *, sdispls=None, rdispls=None, "
         "dtype=None",
         "This rank sends sendcounts[j] items from buf at sdispls[j] to rank "
         "j and receives recvcounts[j] items from rank j into out at "
         "rdispls[j] (None: packed by the counts). Every pair must agree. "
         "Returns out."),
    PAIR(send, "buf, dest, tag=0, *, dtype=None",
         "Sends buf to rank dest with tag (0 to crnet.TAG_MAX); returns once "
         "buf may be reused. Messages from one rank to another arrive in "
         "order. Returns None."),
    PAIR(recv, "buf, source=-1, tag=-1, *, dtype=None",
         "Receives a message into buf (source and tag -1, crnet.ANY_SOURCE and "
         "crnet.ANY_TAG, match "
         "any) and returns its Status (source, tag, count, bytes). A message "
         "larger than buf raises crnet.Truncated and is dropped whole."),
    {"sendrecv", PYCR_FASTCALL(m_sendrecv), METH_FASTCALL | METH_KEYWORDS,
     "sendrecv($self, /, sendbuf, dest, recvbuf, source=-1, *, "
     "sendtag=0, recvtag=-1, dtype=None)\n--\n\n"
     "Sends sendbuf to dest and receives into recvbuf at once (neither "
     "waits for the other to start); returns the receive's Status. No "
     "nonblocking twin: isend and irecv are."},
    {NULL, NULL, 0, NULL},
};
