/* The CPython extension crnet._crnet: what its files share.
 *
 * The module is a program like any other user of libcrnet: it includes
 * crnet.h and links the shared library, nothing internal. Its files, by
 * responsibility:
 *
 *   module.c   the module itself: constants, crnet.IN_PLACE, the Status
 *              type, the module's functions
 *   errors.c   the exception classes and raising crnet's codes as them
 *   buffer.c   arguments: the buffer protocol and formats to datatypes,
 *              operators, datatype names, counts, the keyword parser
 *   comm.c     the Comm type: init, split, dup, close, garbage collection
 *              and interpreter exit, settings, counters
 *   calls.c    every collective and message call, blocking and not
 *   request.c  the Request type, the calls in flight, crnet.waitall and
 *              crnet.waitany
 *
 * Threads and the GIL. Everything runs with the GIL held except the crnet
 * calls that may wait (init, every blocking call, waits, split, dup,
 * destroy, abort), which run between Py_BEGIN_ALLOW_THREADS and
 * Py_END_ALLOW_THREADS and touch no Python object there. The GIL guards the
 * module's own state: the list of open comms, the list of calls in flight,
 * each comm's counters (busy, requests, orphans, derived).
 *
 * Lifetimes (the rules the files keep together):
 *   - a comm made by split or dup holds a strong reference to the world
 *     comm (the one of crnet.Comm()), so the world object outlives every
 *     comm made from it, and crnet's rule "the comm of crnet_comm_init is
 *     destroyed last" holds whatever order the garbage collector frees
 *     them in;
 *   - a call in flight (a pycr_pending) holds a strong reference to its
 *     comm and holds the Py_buffer exports of its buffers until crnet
 *     completes it, so the memory crnet writes into stays valid; its
 *     Request object points to it, and a Request dropped in flight leaves
 *     it behind as an orphan (see request.c), completed later without
 *     blocking the program;
 *   - the exit hook (comm.c, pycr_shutdown) completes what is in flight
 *     and destroys every comm still open, derived comms first, before the
 *     interpreter starts tearing objects down. */
#ifndef CRNET_PY_H
#define CRNET_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <crnet.h>

/* --- comms (comm.c) ------------------------------------------------------ */

typedef struct pycr_comm {
  PyObject_HEAD
  crnet_comm *comm;        /* NULL once closed */
  struct pycr_comm *world; /* a derived comm's world (strong); NULL for the
                              world and once closed */
  struct pycr_comm *prev, *next; /* in the list of open comms */
  int is_world;
  int rank, size;
  int nderived;  /* world: comms made from it still open */
  int busy;      /* threads in a crnet call on it with the GIL released */
  int nrequests; /* calls in flight with a live Request object */
  int norphans;  /* calls in flight whose Request was dropped */
  PyObject *weakreflist;
} pycr_comm;

extern PyTypeObject pycr_CommType;
/* Completes the type's method table (its own and calls.c's); before
 * PyType_Ready. */
int pycr_comm_type_init(void);

/* Destroys every open comm, derived comms first; completes or aborts what
 * is in flight first, waiting at most `grace` seconds. The exit hook. */
PyObject *pycr_shutdown(PyObject *module, PyObject *arg);

/* --- buffers and arguments (buffer.c) ------------------------------------ */

/* One buffer argument of a call, held for the call (or the request). */
typedef struct pycr_buf {
  Py_buffer view;
  void *ptr;         /* view.buf, never NULL (an empty buffer may have
                        none, and crnet refuses NULL) */
  int held;          /* view is an export to release */
  crnet_datatype dt; /* the element type crnet sees */
  int lanes;         /* crnet elements per item: 2 for complex, else 1 */
  int logical;       /* a bool buffer ('?'), moved as uint8 */
  size_t count;      /* crnet elements in the buffer */
} pycr_buf;

/* dtype= of a call: -1 for none (the buffer's format decides). */
#define PYCR_NO_DTYPE (-1)

/* Holds obj's buffer in *b: C-contiguous, a format crnet has a datatype
 * for (or reinterpreted as `dtype`), writable if asked. `what` names the
 * argument in messages ("allreduce: out ..."). TypeError for an object
 * without the buffer protocol, a read-only buffer where one is written or
 * an unsupported format; ValueError for a non-contiguous one. */
int pycr_buf_get(PyObject *obj, int writable, int dtype, const char *call,
                 const char *what, pycr_buf *b);
void pycr_buf_release(pycr_buf *b);

/* The two buffers of a call hold the same kind of element (TypeError). */
int pycr_buf_same_type(const pycr_buf *a, const pycr_buf *b, const char *call);

/* Whether two held buffers are the same memory (then the call is in
 * place). */
int pycr_buf_same_memory(const pycr_buf *a, const pycr_buf *b);

/* op: a name ('sum', ...) or a constant (crnet.SUM, ...); NULL: sum. */
int pycr_parse_op(PyObject *obj, const char *call, crnet_op *op);

/* The operator fits the buffer's elements (TypeError: sum of bools,
 * bitwise operators on floats, anything but sum on complex numbers). */
int pycr_check_op(const pycr_buf *b, crnet_op op, const char *call);

/* dtype=: a crnet datatype name ('float32', 'bfloat16', ...) or constant;
 * None or NULL: PYCR_NO_DTYPE. */
int pycr_parse_dtype(PyObject *obj, const char *call, int *dtype);

/* A collective's name ('allreduce', ...) or constant. */
int pycr_parse_collective(PyObject *obj, crnet_collective *coll);

/* An int argument (None: `dflt`), in [lo, hi]. */
int pycr_parse_int(PyObject *obj, int dflt, long lo, long hi, const char *call,
                   const char *what, int *out);

/* A sequence of n counts (non-negative ints) into out[0..n), each times
 * `scale`; the sum in *total (may be NULL). ValueError for a wrong length
 * or a negative count. */
int pycr_parse_counts(PyObject *obj, int n, size_t scale, const char *call,
                      const char *what, size_t *out, size_t *total);

/* Fast-call argument parsing: positional args fill names[0..npos), keyword
 * arguments any name; out[i] is NULL for an argument not given. The first
 * nreq names are required. */
int pycr_parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames, const char *const *names, int nnames,
                    int npos, int nreq, PyObject **out);

/* --- errors (errors.c) --------------------------------------------------- */

int pycr_errors_init(PyObject *module);

/* Raises the crnet.Error subclass of `code` with `msg` (the comm's or
 * init's explanation; empty or NULL: crnet_strerror(code)). Returns NULL. */
PyObject *pycr_raise(int code, const char *msg, int abort_code);

/* The same as an exception object (new reference), not raised. */
PyObject *pycr_error_new(int code, const char *msg, int abort_code);

/* Raises crnet.InvalidArgument (a ValueError) with a formatted message. */
PyObject *pycr_raise_invalid(const char *fmt, ...);

/* Raises what `rc` from a call on `c` means, with its explanation (read on
 * this thread, right after the call). */
PyObject *pycr_raise_comm(pycr_comm *c, int rc);

/* A copy of comm's explanation (PyMem_Raw; callable without the GIL). */
char *pycr_errmsg_copy(crnet_comm *comm);

/* --- requests (request.c) ------------------------------------------------ */

/* A call in flight: what crnet may still write into or read from. Owned by
 * the module's list of calls in flight from its start to its completion
 * (pycr_pending_done). */
typedef struct pycr_pending {
  struct pycr_pending *prev, *next;
  crnet_request *req;         /* NULL once crnet freed it */
  pycr_comm *comm;            /* strong */
  struct pycr_request *owner; /* borrowed; NULL: an orphan */
  const char *what;           /* the call ("iallreduce") */
  int waiting;                /* a thread waits for it, without the GIL */
  int is_recv;                /* irecv: completes into a Status */
  size_t itemsize;            /* of the receive buffer, for Status.count */
  crnet_status status;        /* filled by crnet (irecv) */
  pycr_buf bufs[2];           /* the buffers, held until completion */
  size_t arrays[];            /* counts and displacements of the call */
} pycr_pending;

typedef struct pycr_request {
  PyObject_HEAD
  pycr_pending *pend; /* NULL once complete */
  pycr_comm *comm;    /* strong */
  const char *what;   /* the call ("iallreduce") */
  PyObject *result;   /* what wait() returns once complete (irecv: None
                         until then, the Status after) */
  int rc;             /* once complete: 0 or its crnet code */
  char *errmsg;       /* once failed: the comm's explanation (PyMem_Raw) */
  int abort_code;
} pycr_request;

extern PyTypeObject pycr_RequestType;

/* Calls in flight whose Request was dropped: reaped (tested) at the start
 * of the module's calls while there are any. */
extern int pycr_norphans;

/* A pending with room for `narrays` sizes; NULL with MemoryError. */
pycr_pending *pycr_pending_new(size_t narrays);
/* Frees a pending that never started (its buffers released). */
void pycr_pending_discard(pycr_pending *p);
/* A Request for a call about to start on c (new reference), made before
 * the start so that a started call always gets one. */
pycr_request *pycr_request_alloc(pycr_comm *c, const char *what);
/* The call of p started: p joins the calls in flight, r owns it, and
 * r.wait() will return `result` (None if NULL; a Status for irecv). */
void pycr_request_attach(pycr_request *r, pycr_pending *p, PyObject *result);
/* Completion, with the GIL: releases the buffers, gives the owner its
 * result or error (errmsg: a PyMem_Raw string or NULL, taken over),
 * unlinks and frees p. Returns the reference p held to its comm, for the
 * caller to release once it no longer walks the calls in flight (the last
 * reference's release may run code). */
pycr_comm *pycr_pending_done(pycr_pending *p, int rc, char *errmsg,
                             int abort_code);
/* Tests the orphans, completing those that are done. */
void pycr_reap(void);
/* Waits for the orphans of comm c (GIL released) and completes them. */
void pycr_wait_orphans(pycr_comm *c);
/* Completes every call in flight that no thread waits for: tests them
 * until `grace` seconds have passed, then aborts the job and waits. */
void pycr_drain(double grace);

PyObject *pycr_waitall(PyObject *module, PyObject *arg);
PyObject *pycr_waitany(PyObject *module, PyObject *arg);

/* --- calls (calls.c) ----------------------------------------------------- */

/* The Comm methods of the collectives and messages. */
extern PyMethodDef pycr_call_methods[];

/* --- module.c ------------------------------------------------------------ */

extern PyObject *pycr_in_place; /* crnet.IN_PLACE */
extern PyTypeObject *pycr_StatusType;
PyObject *pycr_status_new(const crnet_status *st, size_t itemsize);
double pycr_now(void);

/* Casts a METH_FASTCALL | METH_KEYWORDS function for a PyMethodDef. */
#define PYCR_FASTCALL(fn) ((PyCFunction)(void (*)(void))(fn))

#endif /* CRNET_PY_H */
