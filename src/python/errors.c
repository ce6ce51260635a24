/* crnet's error codes as Python exceptions.
 *
 * One class per code of CRNET_ERRNO_MAP, all under crnet.Error, and each
 * also under the built-in exception a Python program would catch for that
 * kind of failure (InvalidArgument is a ValueError, Timeout a TimeoutError,
 * PeerLost a ConnectionError, ...). An instance carries:
 *   code        the crnet code (negative, crnet.EPEER, ...)
 *   name        its name ("CRNET_EPEER")
 *   errmsg      the comm's explanation (crnet_comm_errmsg: which peer,
 *               which collective, which round), "" if it gave none
 *   abort_code  for Aborted: the code the aborting rank gave; else 0
 * and its str() is the explanation, or crnet_strerror's text without one.
 */
#include "crnet_py.h"

#include <stdarg.h>
#include <string.h>

/* The class of code c is classes[-c]; classes[0] is crnet.Error.
 * CRNET_EREVOKED is the lowest code (crnet.h). */
#define NCODES (1 - CRNET_EREVOKED)
static PyObject *classes[NCODES];

typedef struct class_def {
  int code;
  const char *name; /* "crnet.X" */
  const char *doc;
} class_def;

static const class_def defs[] = {
    {CRNET_EINVAL, "crnet.InvalidArgument",
     "A call was refused before anything was sent: a bad argument "
     "(CRNET_EINVAL). Also a ValueError. The comm stays usable."},
    {CRNET_ENOMEM, "crnet.OutOfMemory",
     "crnet ran out of memory (CRNET_ENOMEM). Also a MemoryError."},
    {CRNET_EPEER, "crnet.PeerLost",
     "A peer process is gone (CRNET_EPEER): it died, exited without "
     "closing its comm, or its connection broke. Also a ConnectionError. "
     "Sticky: every later call on the comm raises it."},
    {CRNET_ETIMEDOUT, "crnet.Timeout",
     "A call took longer than CRNET_TIMEOUT, or init longer than "
     "CRNET_INIT_TIMEOUT (CRNET_ETIMEDOUT). Also a TimeoutError."},
    {CRNET_EAUTH, "crnet.AuthError",
     "A connection failed mutual authentication with the job key "
     "(CRNET_EAUTH)."},
    {CRNET_EMISMATCH, "crnet.Mismatch",
     "Ranks made mismatched collective calls (CRNET_EMISMATCH): another "
     "collective, count, datatype, operator, root or schedule under the "
     "same call number. Sticky."},
    {CRNET_EUNSUPPORTED, "crnet.Unsupported",
     "The chosen schedule cannot do this call (CRNET_EUNSUPPORTED)."},
    {CRNET_EABORTED, "crnet.Aborted",
     "The job was aborted by a rank's Comm.abort() (CRNET_EABORTED); "
     "abort_code is the code it gave. Sticky."},
    {CRNET_EIO, "crnet.NetworkError",
     "A network or system error (CRNET_EIO). Also an OSError."},
    {CRNET_ETRUNCATE, "crnet.Truncated",
     "A message was larger than the receive buffer (CRNET_ETRUNCATE); "
     "the message is dropped whole, the next one is intact."},
    {CRNET_ECANCELED, "crnet.Cancelled",
     "The receive was cancelled (Request.cancel) before a message matched "
     "it (CRNET_ECANCELED); its buffer is untouched."},
    {CRNET_EREVOKED, "crnet.Revoked",
     "The communicator was revoked by Comm.revoke() on some rank "
     "(CRNET_EREVOKED); only agree, shrink and lost still work on it. "
     "Sticky."},
};
_Static_assert(sizeof defs / sizeof defs[0] == NCODES - 1,
               "one class for every code of CRNET_ERRNO_MAP");

/* The built-in class a code's class also derives from, if any. */
static PyObject *builtin_base(int code) {
  switch (code) {
  case CRNET_EINVAL:
    return PyExc_ValueError;
  case CRNET_ENOMEM:
    return PyExc_MemoryError;
  case CRNET_EPEER:
    return PyExc_ConnectionError;
  case CRNET_ETIMEDOUT:
    return PyExc_TimeoutError;
  case CRNET_EIO:
    return PyExc_OSError;
  default:
    return NULL;
  }
}

int pycr_errors_init(PyObject *module) {
  classes[0] = PyErr_NewExceptionWithDoc(
      "crnet.Error",
      "Base class of crnet's errors. Attributes: code (crnet's error code, "
      "negative), name (\"CRNET_EPEER\", ...), errmsg (the comm's "
      "explanation: which peer, which collective, which round), abort_code "
      "(for Aborted).",
      NULL, NULL);
  if (classes[0] == NULL ||
      PyModule_AddObjectRef(module, "Error", classes[0]) < 0)
    return -1;
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
    PyObject *base = builtin_base(defs[i].code);
    PyObject *bases = base != NULL ? PyTuple_Pack(2, classes[0], base)
                                   : PyTuple_Pack(1, classes[0]);
    if (bases == NULL)
      return -1;
    PyObject *cls =
        PyErr_NewExceptionWithDoc(defs[i].name, defs[i].doc, bases, NULL);
    Py_DECREF(bases);
    if (cls == NULL)
      return -1;
    classes[-defs[i].code] = cls;
    if (PyModule_AddObjectRef(module, strchr(defs[i].name, '.') + 1, cls) < 0)
      return -1;
  }
  return 0;
}

PyObject *pycr_error_new(int code, const char *msg, int abort_code) {
  PyObject *cls = code < 0 && -code < NCODES ? classes[-code] : classes[0];
  const char *text = msg != NULL && msg[0] != '\0' ? msg : crnet_strerror(code);
  PyObject *exc = PyObject_CallFunction(cls, "s", text);
  if (exc == NULL)
    return NULL;
  PyObject *v;
  if ((v = PyLong_FromLong(code)) == NULL ||
      PyObject_SetAttrString(exc, "code", v) < 0)
    goto fail;
  Py_DECREF(v);
  if ((v = PyUnicode_FromString(crnet_err_name(code))) == NULL ||
      PyObject_SetAttrString(exc, "name", v) < 0)
    goto fail;
  Py_DECREF(v);
  if ((v = PyUnicode_FromString(msg != NULL ? msg : "")) == NULL ||
      PyObject_SetAttrString(exc, "errmsg", v) < 0)
    goto fail;
  Py_DECREF(v);
  if ((v = PyLong_FromLong(abort_code)) == NULL ||
      PyObject_SetAttrString(exc, "abort_code", v) < 0)
    goto fail;
  Py_DECREF(v);
  return exc;
fail:
  Py_XDECREF(v);
  Py_DECREF(exc);
  return NULL;
}

PyObject *pycr_raise(int code, const char *msg, int abort_code) {
  PyObject *exc = pycr_error_new(code, msg, abort_code);
  if (exc != NULL) {
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
  return NULL;
}

PyObject *pycr_raise_invalid(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *s = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (s == NULL)
    return NULL;
  const char *text = PyUnicode_AsUTF8(s);
  if (text != NULL)
    pycr_raise(CRNET_EINVAL, text, 0);
  Py_DECREF(s);
  return NULL;
}

PyObject *pycr_raise_comm(pycr_comm *c, int rc) {
  const char *msg = c->comm != NULL ? crnet_comm_errmsg(c->comm) : NULL;
  int abort_code = rc == CRNET_EABORTED && c->comm != NULL
                       ? crnet_comm_abort_code(c->comm)
                       : 0;
  return pycr_raise(rc, msg, abort_code);
}

char *pycr_errmsg_copy(crnet_comm *comm) {
  const char *msg = comm != NULL ? crnet_comm_errmsg(comm) : "";
  size_t n = strlen(msg);
  char *copy = PyMem_RawMalloc(n + 1);
  if (copy != NULL)
    memcpy(copy, msg, n + 1);
  return copy;
}
