/* The Comm type: a crnet_comm and its life.
 *
 * crnet.Comm() joins the job (crnet_comm_init, from the environment
 * contract crlaunch sets; keyword arguments override it field by field as
 * crnet_config does). A process has one such world comm open at a time;
 * split() and dup() make derived comms from any open comm.
 *
 * Closing. crnet destroys a derived comm locally in any order, and the
 * world comm last, refusing while a derived comm or a request in flight
 * is alive. The module keeps that order by construction:
 *   - a derived comm holds a strong reference to the world object until it
 *     is closed, so the garbage collector can never free the world first;
 *   - close() of the world with derived comms open raises InvalidArgument
 *     naming how many (after one gc.collect(), which frees derived comms
 *     that only a reference cycle keeps);
 *   - close() with Request objects in flight raises InvalidArgument (wait
 *     for them first), and waits for the orphans (dropped Requests) itself,
 *     the GIL released;
 *   - close() while another thread is in a call on the comm raises
 *     InvalidArgument (crnet: destroy must not run meanwhile);
 *   - a comm freed by the garbage collector without close() is destroyed
 *     then (no call can be in flight: calls in flight hold the comm);
 *   - at interpreter exit (atexit, before any object is torn down), the
 *     exit hook pycr_shutdown completes the calls in flight (an abort of
 *     the job if they do not complete within crnet.exit_grace seconds) and
 *     destroys the comms still open, derived ones first. A comm a daemon
 *     thread is still blocked in is left alone (destroying it under the
 *     thread would be a use after free); its process then ends without
 *     goodbye, which its peers see as a lost rank.
 * The sticky error a comm had is not raised by close(): its calls raised
 * it already. */
#include "crnet_py.h"

#include <string.h>

static pycr_comm *open_comms; /* the open comms, newest first */
static pycr_comm *the_world;  /* the open world comm, if any */
static int joining;           /* a thread is in crnet_comm_init */

static void link_open(pycr_comm *c) {
  c->prev = NULL;
  c->next = open_comms;
  if (open_comms != NULL)
    open_comms->prev = c;
  open_comms = c;
}

static void unlink_open(pycr_comm *c) {
  if (c->prev != NULL)
    c->prev->next = c->next;
  else if (open_comms == c)
    open_comms = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  c->prev = c->next = NULL;
}

/* A new Comm object for comm, which is the world (parent NULL) or made
 * from parent. On failure the crnet comm is destroyed. */
static pycr_comm *wrap(crnet_comm *comm, pycr_comm *parent) {
  pycr_comm *c = PyObject_New(pycr_comm, &pycr_CommType);
  if (c == NULL) {
    crnet_comm_destroy(comm);
    return NULL;
  }
  c->comm = comm;
  c->rank = crnet_comm_rank(comm);
  c->size = crnet_comm_size(comm);
  c->is_world = parent == NULL;
  c->nderived = c->busy = c->nrequests = c->norphans = 0;
  c->weakreflist = NULL;
  c->world = NULL;
  if (parent != NULL) {
    pycr_comm *world = parent->is_world ? parent : parent->world;
    Py_INCREF(world);
    c->world = world;
    world->nderived++;
  } else {
    the_world = c;
  }
  link_open(c);
  return c;
}

/* Destroys c's crnet comm (it must have nothing in flight and no thread in
 * a call) and unlinks it; returns crnet's result. */
static int destroy(pycr_comm *c) {
  crnet_comm *comm = c->comm;
  int rc;
  c->comm = NULL;
  unlink_open(c);
  if (c->is_world) {
    /* Goodbye over the links: may wait for the peers. */
    Py_BEGIN_ALLOW_THREADS
    rc = crnet_comm_destroy(comm);
    Py_END_ALLOW_THREADS
    if (the_world == c)
      the_world = NULL;
  } else {
    rc = crnet_comm_destroy(comm);
  }
  if (c->world != NULL) {
    pycr_comm *world = c->world;
    c->world = NULL;
    world->nderived--;
    Py_DECREF(world);
  }
  return rc;
}

/* Raises InvalidArgument if c cannot be closed now; 0 if it can. */
static int refuse_close(pycr_comm *c) {
  if (c->busy > 0) {
    pycr_raise_invalid("close: another thread is in a call on this comm");
    return -1;
  }
  if (c->nrequests > 0) {
    pycr_raise_invalid("close: %d request%s in flight on this comm (rank "
                       "%d of %d): wait for %s first",
                       c->nrequests, c->nrequests == 1 ? "" : "s", c->rank,
                       c->size, c->nrequests == 1 ? "it" : "them");
    return -1;
  }
  if (c->is_world && c->nderived > 0) {
    /* Derived comms only a reference cycle keeps alive go now. */
    PyGC_Collect();
    if (c->nderived > 0) {
      pycr_raise_invalid("close: %d comm%s made from this world comm by "
                         "split() or dup() %s still open: close %s first "
                         "(crnet destroys the world comm last)",
                         c->nderived, c->nderived == 1 ? "" : "s",
                         c->nderived == 1 ? "is" : "are",
                         c->nderived == 1 ? "it" : "them");
      return -1;
    }
  }
  return 0;
}

static PyObject *comm_close(pycr_comm *self, PyObject *Py_UNUSED(arg)) {
  if (self->comm == NULL)
    Py_RETURN_NONE;
  if (refuse_close(self) < 0)
    return NULL;
  pycr_wait_orphans(self);
  if (self->comm == NULL) /* closed by another thread meanwhile */
    Py_RETURN_NONE;
  if (refuse_close(self) < 0)
    return NULL;
  int rc = destroy(self);
  if (rc == CRNET_EINVAL)
    return pycr_raise(rc, "close: crnet refused to destroy the comm", 0);
  Py_RETURN_NONE;
}

static PyObject *comm_enter(pycr_comm *self, PyObject *Py_UNUSED(arg)) {
  return Py_NewRef((PyObject *)self);
}

static PyObject *comm_exit(pycr_comm *self, PyObject *const *args,
                           Py_ssize_t nargs) {
  PyObject *r = comm_close(self, NULL);
  if (r == NULL && nargs > 0 && args[0] != Py_None) {
    /* An exception leaves the block: that one is what the program must
     * see. The comm stays open if it could not be closed; the exit hook
     * closes it. */
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  return r;
}

static void comm_dealloc(pycr_comm *self) {
  if (self->weakreflist != NULL)
    PyObject_ClearWeakRefs((PyObject *)self);
  if (self->comm != NULL) {
    /* Unreachable: no thread is in a call on it (a call holds the comm),
     * nothing is in flight (pendings hold it) and, for the world, no
     * derived comm is open (they hold it). */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    destroy(self);
    PyErr_Restore(type, value, tb);
  }
  Py_CLEAR(self->world);
  PyObject_Free(self);
}

static PyObject *comm_new(PyTypeObject *Py_UNUSED(type), PyObject *args,
                          PyObject *kwds) {
  static char *kwlist[] = {"rank",
                           "size",
                           "rendezvous",
                           "job_key",
                           "job_key_file",
                           "port_range",
                           "init_timeout",
                           "timeout",
                           "serve_rendezvous",
                           "lazy_links",
                           "progress_thread",
                           NULL};
  PyObject *rank = NULL, *size = NULL, *lazy = NULL, *progress = NULL,
           *serve = NULL, *init_timeout = NULL, *timeout = NULL;
  const char *rendezvous = NULL, *key = NULL, *key_file = NULL, *ports = NULL;
  crnet_config cfg;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOzzzzOOOOO:Comm", kwlist,
                                   &rank, &size, &rendezvous, &key, &key_file,
                                   &ports, &init_timeout, &timeout, &serve,
                                   &lazy, &progress))
    return NULL;
  if (pycr_norphans > 0)
    pycr_reap();
  if (the_world != NULL)
    return pycr_raise_invalid(
        "Comm(): this process is in the job already (rank %d of %d); a "
        "process has one world comm at a time: use it, or its dup()",
        the_world->rank, the_world->size);
  if (joining)
    return pycr_raise_invalid("Comm(): another thread of this process is "
                              "joining the job; a process has one world "
                              "comm at a time");
  crnet_config_init(&cfg);
  if (pycr_parse_int(rank, -1, 0, INT_MAX, "Comm", "rank", &cfg.rank) < 0 ||
      pycr_parse_int(size, -1, 1, INT_MAX, "Comm", "size", &cfg.size) < 0)
    return NULL;
  cfg.rendezvous = rendezvous;
  cfg.job_key_hex = key;
  cfg.job_key_file = key_file;
  cfg.port_range = ports;
  if (init_timeout != NULL && init_timeout != Py_None) {
    cfg.init_timeout = PyFloat_AsDouble(init_timeout);
    if (cfg.init_timeout == -1.0 && PyErr_Occurred())
      return NULL;
  }
  if (timeout != NULL && timeout != Py_None) {
    cfg.timeout = PyFloat_AsDouble(timeout);
    if (cfg.timeout == -1.0 && PyErr_Occurred())
      return NULL;
  }
  if (serve != NULL && serve != Py_None) {
    int v = PyObject_IsTrue(serve);
    if (v < 0)
      return NULL;
    cfg.serve_rendezvous = v;
  }
  /* lazy_links, progress_thread: True, False or 'auto' (None: the
   * environment's). */
  PyObject *tri[2] = {lazy, progress};
  int *field[2] = {&cfg.lazy_links, &cfg.progress_thread};
  for (int i = 0; i < 2; i++) {
    PyObject *o = tri[i];
    if (o == NULL || o == Py_None)
      continue;
    if (PyUnicode_Check(o)) {
      if (PyUnicode_CompareWithASCIIString(o, "auto") != 0) {
        PyErr_Format(PyExc_ValueError,
                     "Comm: %s must be True, False or 'auto', not %R",
                     i == 0 ? "lazy_links" : "progress_thread", o);
        return NULL;
      }
      *field[i] = CRNET_LAZY_LINKS_AUTO; /* = CRNET_PROGRESS_THREAD_AUTO */
      continue;
    }
    int v = PyObject_IsTrue(o);
    if (v < 0)
      return NULL;
    *field[i] = v; /* OFF = 0, ON = 1 for both */
  }
  crnet_comm *comm = NULL;
  int rc;
  joining = 1;
  Py_BEGIN_ALLOW_THREADS
  rc = crnet_comm_init(&comm, &cfg);
  Py_END_ALLOW_THREADS
  joining = 0;
  if (rc != 0)
    return pycr_raise(rc, crnet_init_errmsg(), 0);
  return (PyObject *)wrap(comm, NULL);
}

/* An open comm, or InvalidArgument. */
static int check_open(pycr_comm *c, const char *what) {
  if (c->comm != NULL)
    return 0;
  pycr_raise_invalid("%s: the comm is closed", what);
  return -1;
}

/* How derived() makes the new comm. */
enum { DERIVE_DUP, DERIVE_SPLIT, DERIVE_SHRINK, DERIVE_GROW };

static PyObject *derived(pycr_comm *self, int how, int color, int key) {
  crnet_comm *nc = NULL;
  int rc;
  self->busy++;
  Py_BEGIN_ALLOW_THREADS
  rc = how == DERIVE_SPLIT    ? crnet_comm_split(self->comm, color, key, &nc)
       : how == DERIVE_SHRINK ? crnet_comm_shrink(self->comm, &nc)
       : how == DERIVE_GROW   ? crnet_comm_grow(self->comm, &nc)
                              : crnet_comm_dup(self->comm, &nc);
  Py_END_ALLOW_THREADS
  self->busy--;
  if (rc != 0)
    return pycr_raise_comm(self, rc);
  if (nc == NULL)
    Py_RETURN_NONE;
  return (PyObject *)wrap(nc, self);
}

static PyObject *comm_split(pycr_comm *self, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames) {
  static const char *const names[] = {"color", "key"};
  PyObject *a[2];
  int color, key;
  if (pycr_parse_args("split", args, nargs, kwnames, names, 2, 2, 1, a) < 0)
    return NULL;
  if (check_open(self, "split") < 0)
    return NULL;
  if (pycr_norphans > 0)
    pycr_reap();
  if (pycr_parse_int(a[0], CRNET_UNDEFINED, INT_MIN, INT_MAX, "split", "color",
                     &color) < 0 ||
      pycr_parse_int(a[1], 0, INT_MIN, INT_MAX, "split", "key", &key) < 0)
    return NULL;
  return derived(self, DERIVE_SPLIT, color, key);
}

static PyObject *comm_dup(pycr_comm *self, PyObject *Py_UNUSED(arg)) {
  if (check_open(self, "dup") < 0)
    return NULL;
  if (pycr_norphans > 0)
    pycr_reap();
  return derived(self, DERIVE_DUP, 0, 0);
}

/* --- surviving lost ranks (crnet.h: CRNET_ON_FAILURE=continue) ---------- */

static PyObject *comm_shrink(pycr_comm *self, PyObject *Py_UNUSED(arg)) {
  if (check_open(self, "shrink") < 0)
    return NULL;
  if (pycr_norphans > 0)
    pycr_reap();
  return derived(self, DERIVE_SHRINK, 0, 0);
}

static PyObject *comm_grow(pycr_comm *self, PyObject *Py_UNUSED(arg)) {
  if (check_open(self, "grow") < 0)
    return NULL;
  if (pycr_norphans > 0)
    pycr_reap();
  return derived(self, DERIVE_GROW, 0, 0);
}

static PyObject *comm_revoke(pycr_comm *self, PyObject *Py_UNUSED(arg)) {
  int rc;
  if (check_open(self, "revoke") < 0)
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  rc = crnet_comm_revoke(self->comm);
  Py_END_ALLOW_THREADS
  if (rc != 0)
    return pycr_raise_comm(self, rc);
  Py_RETURN_NONE;
}

static PyObject *comm_lost(pycr_comm *self, PyObject *Py_UNUSED(arg)) {
  int *ranks, n;
  PyObject *list;
  if (check_open(self, "lost") < 0)
    return NULL;
  ranks = PyMem_Malloc(sizeof *ranks * (size_t)self->size);
  if (ranks == NULL)
    return PyErr_NoMemory();
  n = crnet_comm_lost(self->comm, ranks, self->size);
  list = n >= 0 ? PyList_New(n) : NULL;
  for (int i = 0; list != NULL && i < n; i++) {
    PyObject *r = PyLong_FromLong(ranks[i]);
    if (r == NULL) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, i, r);
  }
  PyMem_Free(ranks);
  if (n < 0)
    return pycr_raise_comm(self, n);
  return list;
}

static PyObject *comm_ack_lost(pycr_comm *self, PyObject *Py_UNUSED(arg)) {
  int n;
  if (check_open(self, "ack_lost") < 0)
    return NULL;
  n = crnet_comm_ack_lost(self->comm, NULL, 0);
  if (n < 0)
    return pycr_raise_comm(self, n);
  return PyLong_FromLong(n);
}

static PyObject *comm_agree(pycr_comm *self, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames) {
  static const char *const names[] = {"flag"};
  PyObject *a[1];
  int flag, rc;
  if (pycr_parse_args("agree", args, nargs, kwnames, names, 1, 1, 0, a) < 0)
    return NULL;
  flag = a[0] == NULL ? 1 : PyObject_IsTrue(a[0]);
  if (flag < 0 || check_open(self, "agree") < 0)
    return NULL;
  self->busy++;
  Py_BEGIN_ALLOW_THREADS
  rc = crnet_comm_agree(self->comm, &flag);
  Py_END_ALLOW_THREADS
  self->busy--;
  if (rc == CRNET_EPEER) {
    /* Agreed, and a loss not acknowledged yet: PeerLost, carrying the
     * agreed flag. */
    PyObject *type, *value, *tb, *f;
    pycr_raise_comm(self, rc);
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    f = PyBool_FromLong(flag);
    if (value != NULL && f != NULL)
      PyObject_SetAttrString(value, "flag", f);
    Py_XDECREF(f);
    PyErr_Restore(type, value, tb);
    return NULL;
  }
  if (rc != 0)
    return pycr_raise_comm(self, rc);
  return PyBool_FromLong(flag);
}

static PyObject *comm_abort(pycr_comm *self, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames) {
  static const char *const names[] = {"code"};
  PyObject *a[1];
  int code, rc;
  if (pycr_parse_args("abort", args, nargs, kwnames, names, 1, 1, 0, a) < 0 ||
      pycr_parse_int(a[0], 1, INT_MIN, INT_MAX, "abort", "code", &code) < 0)
    return NULL;
  if (check_open(self, "abort") < 0)
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  rc = crnet_comm_abort(self->comm, code);
  Py_END_ALLOW_THREADS
  if (rc != 0 && rc != CRNET_EABORTED)
    return pycr_raise_comm(self, rc);
  Py_RETURN_NONE;
}

static PyObject *comm_set_schedule(pycr_comm *self, PyObject *const *args,
                                   Py_ssize_t nargs, PyObject *kwnames) {
  static const char *const names[] = {"coll", "name"};
  PyObject *a[2];
  crnet_collective coll;
  if (pycr_parse_args("set_schedule", args, nargs, kwnames, names, 2, 2, 2, a) <
          0 ||
      pycr_parse_collective(a[0], &coll) < 0)
    return NULL;
  if (!PyUnicode_Check(a[1])) {
    PyErr_Format(PyExc_TypeError,
                 "set_schedule: name must be a str, not %.100s",
                 Py_TYPE(a[1])->tp_name);
    return NULL;
  }
  const char *name = PyUnicode_AsUTF8(a[1]);
  if (name == NULL || check_open(self, "set_schedule") < 0)
    return NULL;
  int rc = crnet_comm_set_schedule(self->comm, coll, name);
  if (rc != 0)
    return pycr_raise_comm(self, rc);
  Py_RETURN_NONE;
}

static PyObject *comm_last_schedule(pycr_comm *self, PyObject *arg) {
  crnet_collective coll;
  if (pycr_parse_collective(arg, &coll) < 0 ||
      check_open(self, "last_schedule") < 0)
    return NULL;
  const char *name = crnet_comm_last_schedule(self->comm, coll);
  if (name == NULL)
    Py_RETURN_NONE;
  return PyUnicode_FromString(name);
}

static PyObject *comm_coll_stats(pycr_comm *self, PyObject *arg) {
  crnet_collective coll;
  crnet_coll_stats s;
  if (pycr_parse_collective(arg, &coll) < 0 ||
      check_open(self, "coll_stats") < 0)
    return NULL;
  int rc = crnet_comm_coll_stats(self->comm, coll, &s);
  if (rc != 0)
    return pycr_raise_comm(self, rc);
  return Py_BuildValue(
      "{sKsKsKsKsKsdsdsd}", "calls", (unsigned long long)s.calls, "failed",
      (unsigned long long)s.failed, "rounds", (unsigned long long)s.rounds,
      "bytes_sent", (unsigned long long)s.bytes_sent, "bytes_received",
      (unsigned long long)s.bytes_received, "seconds", s.seconds,
      "wait_seconds", s.wait_seconds, "reduce_seconds", s.reduce_seconds);
}

static PyObject *comm_peer_stats(pycr_comm *self, PyObject *arg) {
  int peer;
  crnet_peer_stats s;
  if (check_open(self, "peer_stats") < 0 ||
      pycr_parse_int(arg, 0, 0, self->size - 1, "peer_stats", "peer", &peer) <
          0)
    return NULL;
  int rc = crnet_comm_peer_stats(self->comm, peer, &s);
  if (rc != 0)
    return pycr_raise_comm(self, rc);
  return Py_BuildValue("{sKsKsKsK}", "bytes_sent",
                       (unsigned long long)s.bytes_sent, "bytes_received",
                       (unsigned long long)s.bytes_received, "messages_sent",
                       (unsigned long long)s.messages_sent, "messages_received",
                       (unsigned long long)s.messages_received);
}

static PyObject *comm_peer_link(pycr_comm *self, PyObject *arg) {
  static const char *const names[] = {"none", "tcp", "shm", "self"};
  int peer;
  crnet_link_kind k;
  if (check_open(self, "peer_link") < 0 ||
      pycr_parse_int(arg, 0, 0, self->size - 1, "peer_link", "peer", &peer) <
          0)
    return NULL;
  int rc = crnet_comm_peer_link(self->comm, peer, &k);
  if (rc != 0)
    return pycr_raise_comm(self, rc);
  return PyUnicode_FromString(names[k]);
}

static PyObject *comm_job_rank(pycr_comm *self, PyObject *arg) {
  int rank;
  if (check_open(self, "job_rank") < 0 ||
      pycr_parse_int(arg, 0, 0, self->size - 1, "job_rank", "rank", &rank) < 0)
    return NULL;
  return PyLong_FromLong(crnet_comm_job_rank(self->comm, rank));
}

static PyObject *comm_stats_reset(pycr_comm *self, PyObject *Py_UNUSED(arg)) {
  if (check_open(self, "stats_reset") < 0)
    return NULL;
  int rc = crnet_comm_stats_reset(self->comm);
  if (rc != 0)
    return pycr_raise_comm(self, rc);
  Py_RETURN_NONE;
}

static PyObject *comm_get_rank(pycr_comm *self, void *Py_UNUSED(closure)) {
  return PyLong_FromLong(self->rank);
}

static PyObject *comm_get_size(pycr_comm *self, void *Py_UNUSED(closure)) {
  return PyLong_FromLong(self->size);
}

static PyObject *comm_get_closed(pycr_comm *self, void *Py_UNUSED(closure)) {
  return PyBool_FromLong(self->comm == NULL);
}

static PyObject *comm_get_is_world(pycr_comm *self, void *Py_UNUSED(closure)) {
  return PyBool_FromLong(self->is_world);
}

static PyObject *comm_get_errmsg(pycr_comm *self, void *Py_UNUSED(closure)) {
  return PyUnicode_FromString(self->comm != NULL ? crnet_comm_errmsg(self->comm)
                                                 : "");
}

static PyObject *comm_get_abort_code(pycr_comm *self,
                                     void *Py_UNUSED(closure)) {
  return PyLong_FromLong(self->comm != NULL ? crnet_comm_abort_code(self->comm)
                                            : 0);
}

static PyObject *comm_get_joined(pycr_comm *self, void *Py_UNUSED(closure)) {
  return PyBool_FromLong(self->comm != NULL &&
                         crnet_comm_joined(self->comm) == 1);
}

static PyObject *comm_get_revoked(pycr_comm *self, void *Py_UNUSED(closure)) {
  return PyBool_FromLong(self->comm != NULL &&
                         crnet_comm_is_revoked(self->comm) == 1);
}

static PyObject *comm_repr(pycr_comm *self) {
  return PyUnicode_FromFormat("<crnet.Comm %s rank %d of %d%s>",
                              self->is_world ? "world" : "derived", self->rank,
                              self->size, self->comm == NULL ? ", closed" : "");
}

PyObject *pycr_shutdown(PyObject *Py_UNUSED(module), PyObject *arg) {
  double grace = PyFloat_AsDouble(arg);
  if (grace == -1.0 && PyErr_Occurred())
    return NULL;
  pycr_drain(grace);
  /* Derived comms first, then the world. A comm a thread is still in a
   * call on (a daemon thread) stays open, and so does the world then. */
  for (;;) {
    pycr_comm *c = open_comms;
    while (c != NULL &&
           (c->is_world || c->busy > 0 || c->nrequests > 0 || c->norphans > 0))
      c = c->next;
    if (c == NULL)
      break;
    destroy(c);
  }
  pycr_comm *w = the_world;
  if (w != NULL && w->busy == 0 && w->nrequests == 0 && w->norphans == 0 &&
      w->nderived == 0)
    destroy(w);
  Py_RETURN_NONE;
}

static PyMethodDef comm_methods[] = {
    {"split", PYCR_FASTCALL(comm_split), METH_FASTCALL | METH_KEYWORDS,
     "split($self, /, color, key=0)\n--\n\n"
     "A new comm of the ranks that pass the same color (>= 0), numbered by "
     "key, ties by their rank here; None for color crnet.UNDEFINED (or "
     "None). Collective: every rank of this comm calls it, in the same "
     "order as its other calls. The GIL is released meanwhile."},
    {"dup", (PyCFunction)comm_dup, METH_NOARGS,
     "dup($self, /)\n--\n\n"
     "A new comm of the same ranks in the same order, with its own calls, "
     "schedule choices (copied), counters and sticky error. Collective."},
    {"close", (PyCFunction)comm_close, METH_NOARGS,
     "close($self, /)\n--\n\n"
     "Destroys the comm (the world comm: leaves the job in order). Comms "
     "made by split() and dup() must be closed before the world comm, and "
     "requests in flight waited for: else raises InvalidArgument and "
     "changes nothing. Closing twice does nothing; the comm's sticky error "
     "is not raised again. A comm the program drops is closed by the "
     "garbage collector, and one still open at exit by the exit hook."},
    {"__enter__", (PyCFunction)comm_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturns the comm."},
    {"__exit__", PYCR_FASTCALL(comm_exit), METH_FASTCALL,
     "__exit__($self, exc_type, exc, tb, /)\n--\n\n"
     "Closes the comm. When an exception leaves the block, a close that is "
     "refused does not replace it (the exit hook closes the comm then)."},
    {"abort", PYCR_FASTCALL(comm_abort), METH_FASTCALL | METH_KEYWORDS,
     "abort($self, /, code=1)\n--\n\n"
     "Fails every rank of the job fast: their calls raise crnet.Aborted "
     "with abort_code = code. Returns; the program should then exit. "
     "Under crlaunch, crlaunch exits with the code."},
    {"set_schedule", PYCR_FASTCALL(comm_set_schedule),
     METH_FASTCALL | METH_KEYWORDS,
     "set_schedule($self, /, coll, name)\n--\n\n"
     "Chooses the schedule of a collective on this comm: coll is a name "
     "('allreduce', 'reduce_scatter', 'scan', 'alltoall', 'allgather', "
     "'bcast', 'reduce', 'barrier', 'gather', 'scatter', 'alltoallv') or a "
     "crnet.COLL_* constant, name 'auto', 'circulant', 'ring', ... Every "
     "rank must choose alike. InvalidArgument for an unknown name, "
     "Unsupported for one that cannot serve this comm's size."},
    {"last_schedule", (PyCFunction)comm_last_schedule, METH_O,
     "last_schedule($self, coll, /)\n--\n\n"
     "The schedule the last call of a collective on this comm ran: the one "
     "set_schedule chose, or what 'auto' picked for that call; None before "
     "the first call."},
    {"coll_stats", (PyCFunction)comm_coll_stats, METH_O,
     "coll_stats($self, coll, /)\n--\n\n"
     "The counters of a collective on this comm as a dict: calls, failed, "
     "rounds, bytes_sent, bytes_received, seconds, wait_seconds, "
     "reduce_seconds."},
    {"peer_stats", (PyCFunction)comm_peer_stats, METH_O,
     "peer_stats($self, peer, /)\n--\n\n"
     "This rank's traffic with rank `peer` as a dict: bytes_sent, "
     "bytes_received, messages_sent, messages_received."},
    {"peer_link", (PyCFunction)comm_peer_link, METH_O,
     "peer_link($self, peer, /)\n--\n\n"
     "What carries this rank's frames to rank `peer` now: 'shm' (shared "
     "memory, ranks on one node), 'tcp', 'none' (no link yet or any more) "
     "or 'self'."},
    {"job_rank", (PyCFunction)comm_job_rank, METH_O,
     "job_rank($self, rank, /)\n--\n\n"
     "The job rank (the world comm's rank; for a restarted rank, its slot "
     "after the world's) of this comm's rank `rank`."},
    {"revoke", (PyCFunction)comm_revoke, METH_NOARGS,
     "revoke($self, /)\n--\n\n"
     "Every member's pending and later calls on this comm raise "
     "crnet.Revoked, even those waiting on a live rank; only agree, "
     "shrink, lost, ack_lost and close still work on it. Needs "
     "CRNET_ON_FAILURE=continue (crlaunch --keep-going) to be of use."},
    {"lost", (PyCFunction)comm_lost, METH_NOARGS,
     "lost($self, /)\n--\n\n"
     "The ranks of this comm this process knows to be lost, ascending."},
    {"ack_lost", (PyCFunction)comm_ack_lost, METH_NOARGS,
     "ack_lost($self, /)\n--\n\n"
     "Acknowledges the ranks lost() gives now (agree no longer raises for "
     "them); returns how many."},
    {"agree", PYCR_FASTCALL(comm_agree), METH_FASTCALL | METH_KEYWORDS,
     "agree($self, /, flag=True)\n--\n\n"
     "A fault-tolerant agreement among the survivors of this comm (which "
     "may have failed or been revoked): returns the AND of every "
     "survivor's flag, alike everywhere, even when ranks die during it. "
     "Raises crnet.PeerLost, whose .flag is the agreed value, on every "
     "survivor when a rank was lost that not every survivor had "
     "acknowledged (ack_lost). Collective "
     "over the survivors; the GIL is released meanwhile."},
    {"shrink", (PyCFunction)comm_shrink, METH_NOARGS,
     "shrink($self, /)\n--\n\n"
     "A new comm of this comm's survivors, in their order here, with its "
     "own schedules; works on a failed or revoked comm. Collective over "
     "the survivors."},
    {"grow", (PyCFunction)comm_grow, METH_NOARGS,
     "grow($self, /)\n--\n\n"
     "As shrink(), and after the survivors every restarted rank waiting to "
     "join (crlaunch --restart), in the order they joined the job: their "
     "crnet.Comm() returns this comm to them (joined is True there). With "
     "nobody waiting, what shrink() makes. Collective over the survivors."},
    {"stats_reset", (PyCFunction)comm_stats_reset, METH_NOARGS,
     "stats_reset($self, /)\n--\n\nSets every counter of the comm to zero."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef comm_getset[] = {
    {"rank", (getter)comm_get_rank, NULL, "This process's rank in the comm.",
     NULL},
    {"size", (getter)comm_get_size, NULL, "The number of ranks of the comm.",
     NULL},
    {"closed", (getter)comm_get_closed, NULL, "True once closed.", NULL},
    {"is_world", (getter)comm_get_is_world, NULL,
     "True for the comm of crnet.Comm(), False for split() and dup() ones.",
     NULL},
    {"errmsg", (getter)comm_get_errmsg, NULL,
     "The comm's explanation of its sticky error (which peer, which "
     "collective, which round); without one, why this thread's last call "
     "on the comm was refused; else \"\".",
     NULL},
    {"abort_code", (getter)comm_get_abort_code, NULL,
     "The code a rank gave to abort(), or 0.", NULL},
    {"joined", (getter)comm_get_joined, NULL,
     "True on a restarted rank (crlaunch --restart) for the comm crnet.Comm() "
     "returned it: a survivors' grow admitted it to a running job, whose "
     "state the survivors hold.",
     NULL},
    {"revoked", (getter)comm_get_revoked, NULL,
     "Whether this process has heard of a revoke() of the comm.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef *all_methods(void);

PyTypeObject pycr_CommType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "crnet.Comm",
    .tp_basicsize = sizeof(pycr_comm),
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_repr = (reprfunc)comm_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_weaklistoffset = offsetof(pycr_comm, weakreflist),
    .tp_new = comm_new,
    .tp_getset = comm_getset,
    .tp_doc =
        "Comm(*, rank=None, size=None, rendezvous=None, job_key=None, "
        "job_key_file=None, port_range=None, init_timeout=None, "
        "timeout=None, serve_rendezvous=None, lazy_links=None, "
        "progress_thread=None)\n--\n\n"
        "A crnet communicator.\n\n"
        "Comm() joins the job as crnet_comm_init does: rendezvous, links, "
        "authentication, from the environment crlaunch sets (so "
        "`crlaunch -n 4 python3 app.py` just works; run directly, it is a "
        "job of one). Keyword arguments override the environment field by "
        "field (see crnet.h, crnet_config): timeout is CRNET_TIMEOUT in "
        "seconds, lazy_links and progress_thread are True, False or "
        "'auto'. The GIL is released while it waits for the other ranks. "
        "One world comm per process at a time; split() and dup() make "
        "more.\n\n"
        "Buffers: any object with the buffer protocol (NumPy arrays, "
        "array.array, bytearray, memoryview, torch CPU tensors through "
        ".numpy()), C-contiguous; the element type comes from its format "
        "(int8..int64, uint8..uint64, float16, float32, float64, bool, "
        "complex), or dtype= names one (e.g. 'bfloat16'). Without out= a "
        "call works in place (crnet.IN_PLACE); crnet.IN_PLACE as the input "
        "with out= is the same. Every call checks its buffers before "
        "anything is sent (TypeError, ValueError) and raises crnet.Error "
        "subclasses for crnet's errors. Every call that can wait releases "
        "the GIL. The i-calls return a Request.\n\n"
        "Use it as a context manager, or close() it; comms made by split() "
        "and dup() are closed before the world comm.",
};

/* The type's methods: its own and the calls (calls.c), in one table made
 * at module init. */
int pycr_comm_type_init(void) {
  if (pycr_CommType.tp_methods != NULL)
    return 0;
  PyMethodDef *all = all_methods();
  if (all == NULL)
    return -1;
  pycr_CommType.tp_methods = all;
  return 0;
}

static PyMethodDef *all_methods(void) {
  size_t n1 = 0, n2 = 0;
  while (comm_methods[n1].ml_name != NULL)
    n1++;
  while (pycr_call_methods[n2].ml_name != NULL)
    n2++;
  PyMethodDef *all = PyMem_RawCalloc(n1 + n2 + 1, sizeof *all);
  if (all == NULL) {
    PyErr_NoMemory();
    return NULL;
  }
  memcpy(all, comm_methods, n1 * sizeof *all);
  memcpy(all + n1, pycr_call_methods, n2 * sizeof *all);
  return all;
}
