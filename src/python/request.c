/* Calls in flight and the Request type.
 *
 * A nonblocking call (comm.iallreduce(...), comm.irecv(...)) makes a
 * pycr_pending: crnet's request, the Py_buffer exports of its buffers, the
 * crnet_status an irecv fills, the count arrays of a v-call, and a strong
 * reference to its comm. It lives in one list, the calls in flight, from
 * its start until crnet completes it, and only then are the buffers
 * released: whatever happens to the Python objects, the memory crnet
 * writes into stays valid (NumPy arrays and bytearrays stay exported, so a
 * bytearray cannot be resized meanwhile, and so on).
 *
 * The Request object owns its pending while it lives. Dropping a Request
 * whose call is still in flight does not wait (a finalizer that waits for
 * the network can deadlock: think of an irecv dropped before the send its
 * peer makes only after its own irecv completes). The pending becomes an
 * orphan instead: it stays in the list, holding its buffers and its comm,
 * and is tested at the start of every later call of the module (cheaply:
 * nothing happens while there are no orphans), waited for by close() of its
 * comm, and at the latest by the exit hook. Its result is lost; a failure
 * of the comm is sticky and shows in the next call anyway.
 *
 * Waiting releases the GIL. A pending a thread waits for is marked
 * `waiting`, and nothing else touches its crnet request meanwhile (crnet:
 * a request is waited for by one thread only). */
#include "crnet_py.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static pycr_pending *inflight; /* the calls in flight, newest first */
int pycr_norphans;

pycr_pending *pycr_pending_new(size_t narrays) {
  pycr_pending *p = PyMem_RawCalloc(1, sizeof *p + narrays * sizeof(size_t));
  if (p == NULL)
    PyErr_NoMemory();
  return p;
}

void pycr_pending_discard(pycr_pending *p) {
  if (p == NULL)
    return;
  pycr_buf_release(&p->bufs[0]);
  pycr_buf_release(&p->bufs[1]);
  PyMem_RawFree(p);
}

pycr_request *pycr_request_alloc(pycr_comm *c, const char *what) {
  pycr_request *r = PyObject_New(pycr_request, &pycr_RequestType);
  if (r == NULL)
    return NULL;
  r->pend = NULL;
  Py_INCREF(c);
  r->comm = c;
  r->what = what;
  r->result = NULL;
  r->rc = 0;
  r->errmsg = NULL;
  r->abort_code = 0;
  return r;
}

void pycr_request_attach(pycr_request *r, pycr_pending *p, PyObject *result) {
  p->owner = r;
  p->what = r->what;
  Py_INCREF(r->comm);
  p->comm = r->comm;
  p->prev = NULL;
  p->next = inflight;
  if (inflight != NULL)
    inflight->prev = p;
  inflight = p;
  r->comm->nrequests++;
  r->pend = p;
  Py_XINCREF(result);
  r->result = result;
}

pycr_comm *pycr_pending_done(pycr_pending *p, int rc, char *errmsg,
                             int abort_code) {
  pycr_comm *c = p->comm;
  pycr_request *r = p->owner;
  pycr_buf_release(&p->bufs[0]);
  pycr_buf_release(&p->bufs[1]);
  if (r != NULL) {
    r->rc = rc;
    r->errmsg = errmsg;
    r->abort_code = abort_code;
    if (rc == 0 && p->is_recv) {
      PyObject *st = pycr_status_new(&p->status, p->itemsize);
      if (st == NULL)
        PyErr_Clear(); /* wait() makes it again */
      Py_XSETREF(r->result, st);
    }
    r->pend = NULL;
    c->nrequests--;
  } else {
    PyMem_RawFree(errmsg);
    c->norphans--;
    pycr_norphans--;
  }
  if (p->prev != NULL)
    p->prev->next = p->next;
  else
    inflight = p->next;
  if (p->next != NULL)
    p->next->prev = p->prev;
  PyMem_RawFree(p);
  return c;
}

/* Completes p after crnet_test said done with rc (GIL held, this thread:
 * the comm's explanation is still the one of that call). */
static void done_now(pycr_pending *p, int rc) {
  char *msg = rc != 0 ? pycr_errmsg_copy(p->comm->comm) : NULL;
  int code = rc == CRNET_EABORTED ? crnet_comm_abort_code(p->comm->comm) : 0;
  Py_DECREF(pycr_pending_done(p, rc, msg, code));
}

void pycr_reap(void) {
  pycr_pending *p = inflight;
  while (p != NULL) {
    if (p->owner != NULL || p->waiting) {
      p = p->next;
      continue;
    }
    int done = 0;
    int rc = crnet_test(&p->req, &done);
    if (!done) {
      p = p->next;
      continue;
    }
    /* Releasing the comm may free it, and its weak references' callbacks
     * may run any code, this module's calls included: start over. */
    done_now(p, rc);
    p = inflight;
  }
}

/* Waits (GIL released) for the n pendings of ps and completes them. */
static void wait_all(pycr_pending **ps, int n) {
  int *rcs = PyMem_Calloc((size_t)n, sizeof *rcs);
  char **msgs = PyMem_Calloc((size_t)n, sizeof *msgs);
  int *codes = PyMem_Calloc((size_t)n, sizeof *codes);
  pycr_comm **comms = PyMem_Calloc((size_t)n, sizeof *comms);
  if (rcs == NULL || msgs == NULL || codes == NULL || comms == NULL) {
    /* No room to wait for them together: one by one. */
    PyMem_Free(rcs);
    PyMem_Free(msgs);
    PyMem_Free(codes);
    PyMem_Free(comms);
    for (int i = 0; i < n; i++)
      wait_all(&ps[i], 1);
    return;
  }
  for (int i = 0; i < n; i++) {
    ps[i]->waiting = 1;
    ps[i]->comm->busy++;
  }
  Py_BEGIN_ALLOW_THREADS
  for (int i = 0; i < n; i++) {
    rcs[i] = crnet_wait(&ps[i]->req);
    if (rcs[i] != 0) {
      msgs[i] = pycr_errmsg_copy(ps[i]->comm->comm);
      if (rcs[i] == CRNET_EABORTED)
        codes[i] = crnet_comm_abort_code(ps[i]->comm->comm);
    }
  }
  Py_END_ALLOW_THREADS
  /* The comms are released after every pending is done with: releasing
   * one may run code (weak reference callbacks) that touches the others.
   */
  for (int i = 0; i < n; i++) {
    ps[i]->waiting = 0;
    ps[i]->comm->busy--;
  }
  for (int i = 0; i < n; i++)
    comms[i] = pycr_pending_done(ps[i], rcs[i], msgs[i], codes[i]);
  for (int i = 0; i < n; i++)
    Py_DECREF(comms[i]);
  PyMem_Free(rcs);
  PyMem_Free(msgs);
  PyMem_Free(codes);
  PyMem_Free(comms);
}

/* The pendings no thread waits for (of comm c, or of any comm when c is
 * NULL; orphans only if orphans_only) into a new array; -1 with an
 * exception if there is no memory. */
static int collect(pycr_comm *c, int orphans_only, pycr_pending ***out) {
  int n = 0;
  for (pycr_pending *p = inflight; p != NULL; p = p->next)
    if (!p->waiting && (c == NULL || p->comm == c) &&
        (!orphans_only || p->owner == NULL))
      n++;
  *out = NULL;
  if (n == 0)
    return 0;
  pycr_pending **ps = PyMem_Malloc((size_t)n * sizeof *ps);
  if (ps == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  int i = 0;
  for (pycr_pending *p = inflight; p != NULL; p = p->next)
    if (!p->waiting && (c == NULL || p->comm == c) &&
        (!orphans_only || p->owner == NULL))
      ps[i++] = p;
  *out = ps;
  return n;
}

void pycr_wait_orphans(pycr_comm *c) {
  if (c->norphans == 0)
    return;
  pycr_pending **ps;
  int n = collect(c, 1, &ps);
  if (n < 0) {
    PyErr_Clear();
    /* One at a time, then. */
    for (pycr_pending *p = inflight; p != NULL; p = inflight) {
      while (p != NULL && !(p->comm == c && p->owner == NULL && !p->waiting))
        p = p->next;
      if (p == NULL)
        break;
      wait_all(&p, 1);
    }
    return;
  }
  if (n > 0)
    wait_all(ps, n);
  PyMem_Free(ps);
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
}

void pycr_drain(double grace) {
  double deadline = pycr_now() + grace;
  for (;;) {
    /* Test each; after a completion start over (see pycr_reap). */
    int left = 0;
    pycr_pending *p = inflight;
    while (p != NULL) {
      int done = 0;
      int rc = p->waiting ? 0 : crnet_test(&p->req, &done);
      if (done) {
        done_now(p, rc);
        p = inflight;
        left = 0;
        continue;
      }
      left += !p->waiting;
      p = p->next;
    }
    if (left == 0 || pycr_now() >= deadline)
      break;
    Py_BEGIN_ALLOW_THREADS
    sleep_ms(1);
    Py_END_ALLOW_THREADS
  }
  pycr_pending **ps;
  int n = collect(NULL, 0, &ps);
  if (n <= 0) {
    if (n < 0)
      PyErr_Clear();
    return;
  }
  /* Calls that will not complete by themselves (a receive whose message
   * never comes, a collective some rank never joins): the job cannot end
   * in order. Abort it, which completes them all with CRNET_EABORTED. */
  fprintf(stderr,
          "crnet: at exit, %d call%s still in flight after %g s (%s on a "
          "comm of %d ranks, ...): aborting the job\n",
          n, n == 1 ? "" : "s", grace, ps[0]->what, ps[0]->comm->size);
  fflush(stderr);
  crnet_comm *any = ps[0]->comm->comm;
  Py_BEGIN_ALLOW_THREADS
  crnet_comm_abort(any, 1);
  Py_END_ALLOW_THREADS
  wait_all(ps, n);
  PyMem_Free(ps);
}

/* --- the Request type ---------------------------------------------------- */

/* What wait() gives for a complete request: its result, or its error
 * raised. */
static PyObject *outcome(pycr_request *r) {
  if (r->rc != 0)
    return pycr_raise(r->rc, r->errmsg, r->abort_code);
  if (r->result == NULL)
    Py_RETURN_NONE;
  return Py_NewRef(r->result);
}

static PyObject *request_wait(pycr_request *self, PyObject *Py_UNUSED(arg)) {
  pycr_pending *p = self->pend;
  if (p != NULL) {
    if (p->waiting)
      return pycr_raise_invalid("wait: another thread waits for this %s "
                                "request already",
                                self->what);
    wait_all(&p, 1);
  }
  return outcome(self);
}

static PyObject *request_test(pycr_request *self, PyObject *Py_UNUSED(arg)) {
  pycr_pending *p = self->pend;
  if (p != NULL) {
    if (p->waiting)
      Py_RETURN_FALSE;
    int done = 0;
    int rc = crnet_test(&p->req, &done);
    if (!done) {
      if (rc != 0)
        return pycr_raise_comm(p->comm, rc);
      Py_RETURN_FALSE;
    }
    done_now(p, rc);
  }
  if (self->rc != 0)
    return pycr_raise(self->rc, self->errmsg, self->abort_code);
  Py_RETURN_TRUE;
}

static PyObject *request_cancel(pycr_request *self, PyObject *Py_UNUSED(arg)) {
  pycr_pending *p = self->pend;
  int rc;
  if (p == NULL)
    Py_RETURN_NONE; /* complete: nothing left to cancel */
  if (p->waiting)
    return pycr_raise_invalid("cancel: another thread waits for this %s "
                              "request",
                              self->what);
  rc = crnet_cancel(p->req);
  if (rc != 0)
    return pycr_raise_comm(p->comm, rc);
  Py_RETURN_NONE;
}

static PyObject *request_done(pycr_request *self, void *Py_UNUSED(closure)) {
  return PyBool_FromLong(self->pend == NULL);
}

static PyObject *request_comm(pycr_request *self, void *Py_UNUSED(closure)) {
  return Py_NewRef((PyObject *)self->comm);
}

static PyObject *request_repr(pycr_request *self) {
  return PyUnicode_FromFormat("<crnet.Request %s, %s>", self->what,
                              self->pend != NULL ? "in flight"
                              : self->rc == 0    ? "done"
                                                 : crnet_err_name(self->rc));
}

static void request_dealloc(pycr_request *self) {
  pycr_pending *p = self->pend;
  if (p != NULL) {
    /* Dropped in flight: the call goes on as an orphan (see above). */
    p->owner = NULL;
    self->comm->nrequests--;
    self->comm->norphans++;
    pycr_norphans++;
  }
  Py_XDECREF(self->result);
  PyMem_RawFree(self->errmsg);
  Py_DECREF(self->comm);
  PyObject_Free(self);
}

static PyMethodDef request_methods[] = {
    {"wait", (PyCFunction)request_wait, METH_NOARGS,
     "wait($self, /)\n--\n\n"
     "Waits for the call to complete (the GIL released meanwhile) and "
     "returns its result: the output buffer of a collective, a Status for "
     "irecv, None for isend and ibarrier. Raises the call's crnet.Error if "
     "it failed. Once complete, returns (or raises) the same again at "
     "once."},
    {"cancel", (PyCFunction)request_cancel, METH_NOARGS,
     "cancel($self, /)\n--\n\n"
     "Asks that an irecv no message has matched yet end without one: its "
     "wait() then raises crnet.Cancelled. A send, or a receive already "
     "matched, completes as it would have. Raises InvalidArgument for a "
     "collective, which cannot be cancelled, or while another thread "
     "waits for this request."},
    {"test", (PyCFunction)request_test, METH_NOARGS,
     "test($self, /)\n--\n\n"
     "Moves the comm's calls on without sleeping; True if this one is "
     "complete (wait() then returns at once). Raises the call's crnet.Error "
     "if it completed with one."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef request_getset[] = {
    {"done", (getter)request_done, NULL,
     "True once the call is complete (by wait, test, waitall, waitany).", NULL},
    {"comm", (getter)request_comm, NULL, "The Comm the call runs on.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pycr_RequestType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "crnet.Request",
    .tp_basicsize = sizeof(pycr_request),
    .tp_dealloc = (destructor)request_dealloc,
    .tp_repr = (reprfunc)request_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "A nonblocking call in flight, from comm.iallreduce(...), "
        "comm.isend(...) and the other i-calls.\n\n"
        "The call's buffers belong to crnet until it completes: do not "
        "write the input nor touch the output before wait() or a true "
        "test(). The Request holds the buffers' exports meanwhile, so their "
        "memory stays valid. A Request dropped while its call is in flight "
        "does not wait: the call goes on, its buffers held, and completes "
        "during later calls of the module, at close() of its comm, or at "
        "interpreter exit; its result is lost.",
    .tp_methods = request_methods,
    .tp_getset = request_getset,
};

/* --- waitall, waitany ---------------------------------------------------- */

/* The Request objects of a sequence, as a new list; NULL with TypeError. */
static PyObject *requests_of(PyObject *arg, const char *fname) {
  PyObject *seq = PySequence_List(arg);
  if (seq == NULL) {
    PyErr_Format(PyExc_TypeError, "%s: expects a sequence of Requests", fname);
    return NULL;
  }
  Py_ssize_t n = PyList_GET_SIZE(seq);
  if (n > INT_MAX / 2) {
    Py_DECREF(seq);
    PyErr_Format(PyExc_ValueError, "%s: too many requests", fname);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = PyList_GET_ITEM(seq, i);
    if (!PyObject_TypeCheck(o, &pycr_RequestType) && o != Py_None) {
      PyErr_Format(PyExc_TypeError,
                   "%s: item %zd is a %.100s, not a crnet.Request", fname, i,
                   Py_TYPE(o)->tp_name);
      Py_DECREF(seq);
      return NULL;
    }
    pycr_request *r = (pycr_request *)o;
    if (o != Py_None && r->pend != NULL && r->pend->waiting) {
      Py_DECREF(seq);
      return pycr_raise_invalid("%s: another thread waits for item %zd "
                                "(a %s request) already",
                                fname, i, r->what);
    }
  }
  return seq;
}

PyObject *pycr_waitall(PyObject *Py_UNUSED(module), PyObject *arg) {
  PyObject *seq = requests_of(arg, "waitall");
  if (seq == NULL)
    return NULL;
  Py_ssize_t n = PyList_GET_SIZE(seq);
  pycr_pending **ps = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *ps);
  if (ps == NULL) {
    Py_DECREF(seq);
    return PyErr_NoMemory();
  }
  int k = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = PyList_GET_ITEM(seq, i);
    pycr_pending *p = o != Py_None ? ((pycr_request *)o)->pend : NULL;
    if (p == NULL || p->waiting)
      continue; /* complete, or given twice */
    p->waiting = 1;
    ps[k++] = p;
  }
  for (int i = 0; i < k; i++)
    ps[i]->waiting = 0;
  if (k > 0)
    wait_all(ps, k);
  PyMem_Free(ps);
  PyObject *results = PyList_New(n);
  if (results == NULL) {
    Py_DECREF(seq);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = PyList_GET_ITEM(seq, i);
    PyObject *v =
        o != Py_None ? outcome((pycr_request *)o) : Py_NewRef(Py_None);
    if (v == NULL) {
      /* The first that failed, in list order; all are complete. */
      Py_DECREF(results);
      Py_DECREF(seq);
      return NULL;
    }
    PyList_SET_ITEM(results, i, v);
  }
  Py_DECREF(seq);
  return results;
}

PyObject *pycr_waitany(PyObject *Py_UNUSED(module), PyObject *arg) {
  PyObject *seq = requests_of(arg, "waitany");
  if (seq == NULL)
    return NULL;
  Py_ssize_t n = PyList_GET_SIZE(seq);
  crnet_request **reqs = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof *reqs);
  if (reqs == NULL) {
    Py_DECREF(seq);
    return PyErr_NoMemory();
  }
  int active = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = PyList_GET_ITEM(seq, i);
    pycr_pending *p = o != Py_None ? ((pycr_request *)o)->pend : NULL;
    if (p == NULL || p->waiting)
      continue; /* complete (as MPI's null requests), or given twice */
    p->waiting = 1;
    p->comm->busy++;
    reqs[i] = p->req;
    active++;
  }
  if (active == 0) {
    PyMem_Free(reqs);
    Py_DECREF(seq);
    return Py_BuildValue("(iO)", -1, Py_None);
  }
  int index = -1, rc, code = 0;
  char *msg = NULL;
  /* Any of the comms names the job's explanation for a failure of its
   * own; the one that completed is found after the wait. */
  Py_BEGIN_ALLOW_THREADS
  rc = crnet_waitany((int)n, reqs, &index);
  Py_END_ALLOW_THREADS
  pycr_pending *hit = NULL;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = PyList_GET_ITEM(seq, i);
    pycr_pending *p = o != Py_None ? ((pycr_request *)o)->pend : NULL;
    if (p == NULL || !p->waiting || (reqs[i] == NULL && i != index))
      continue;
    p->waiting = 0;
    p->comm->busy--;
    if (i == index)
      hit = p;
  }
  PyMem_Free(reqs);
  if (hit == NULL) {
    Py_DECREF(seq);
    if (rc != 0)
      return pycr_raise(rc, "waitany failed", 0);
    return Py_BuildValue("(iO)", -1, Py_None);
  }
  hit->req = NULL; /* crnet freed it */
  if (rc != 0) {
    msg = pycr_errmsg_copy(hit->comm->comm);
    if (rc == CRNET_EABORTED)
      code = crnet_comm_abort_code(hit->comm->comm);
  }
  pycr_comm *c = pycr_pending_done(hit, rc, msg, code);
  PyObject *v = outcome((pycr_request *)PyList_GET_ITEM(seq, index));
  Py_DECREF(c);
  PyObject *res = v != NULL ? Py_BuildValue("(iN)", index, v) : NULL;
  Py_DECREF(seq);
  return res;
}
