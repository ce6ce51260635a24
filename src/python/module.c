/* The module crnet._crnet: its types, constants and functions.
 *
 * crnet/__init__.py re-exports all of it as the package crnet, and
 * registers the exit hook (_shutdown) with atexit, so that it runs while
 * every object is still alive: it completes what is in flight and destroys
 * the comms still open in crnet's order (comm.c). */
#include "crnet_py.h"

#include <time.h>

PyObject *pycr_in_place;
PyTypeObject *pycr_StatusType;

double pycr_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- Status -------------------------------------------------------------- */

static PyStructSequence_Field status_fields[] = {
    {"source", "the rank (in the comm) the message came from"},
    {"tag", "the message's tag"},
    {"count", "the items received (bytes / the receive buffer's item size)"},
    {"bytes", "the bytes received"},
    {NULL, NULL},
};

static PyStructSequence_Desc status_desc = {
    "crnet.Status",
    "What a receive got: source, tag, count (items of the receive buffer) "
    "and bytes.",
    status_fields,
    4,
};

PyObject *pycr_status_new(const crnet_status *st, size_t itemsize) {
  PyObject *s = PyStructSequence_New(pycr_StatusType);
  if (s == NULL)
    return NULL;
  PyObject *v[4] = {
      PyLong_FromLong(st->source), PyLong_FromLong(st->tag),
      PyLong_FromSize_t(itemsize > 0 ? st->bytes / itemsize : st->bytes),
      PyLong_FromSize_t(st->bytes)};
  for (int i = 0; i < 4; i++) {
    if (v[i] == NULL) {
      for (int j = i + 1; j < 4; j++)
        Py_XDECREF(v[j]);
      Py_DECREF(s);
      return NULL;
    }
    PyStructSequence_SET_ITEM(s, i, v[i]);
  }
  return s;
}

/* --- IN_PLACE ------------------------------------------------------------ */

static PyObject *in_place_repr(PyObject *Py_UNUSED(self)) {
  return PyUnicode_FromString("crnet.IN_PLACE");
}

static PyObject *in_place_reduce(PyObject *Py_UNUSED(self),
                                 PyObject *Py_UNUSED(arg)) {
  return PyUnicode_FromString("IN_PLACE");
}

static PyMethodDef in_place_methods[] = {
    {"__reduce__", in_place_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject InPlaceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "crnet._InPlace",
    .tp_basicsize = sizeof(PyObject),
    .tp_repr = in_place_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The type of crnet.IN_PLACE.",
    .tp_methods = in_place_methods,
};

/* --- the module ---------------------------------------------------------- */

static PyObject *mod_strerror(PyObject *Py_UNUSED(module), PyObject *arg) {
  int code;
  if (pycr_parse_int(arg, 0, INT_MIN, INT_MAX, "strerror", "code", &code) < 0)
    return NULL;
  return PyUnicode_FromString(crnet_strerror(code));
}

static PyMethodDef module_methods[] = {
    {"waitall", pycr_waitall, METH_O,
     "waitall(requests, /)\n--\n\n"
     "Waits for every Request of the sequence (None entries and complete "
     "ones are skipped), the GIL released, and returns the list of their "
     "results (as Request.wait). All complete, also when some fail; then "
     "raises the error of the first (in sequence order) that failed."},
    {"waitany", pycr_waitany, METH_O,
     "waitany(requests, /)\n--\n\n"
     "Waits until one Request of the sequence completes (the GIL released) "
     "and returns (index, result). Complete ones and None entries are "
     "skipped, as MPI's null requests; with none in flight returns "
     "(-1, None). Raises the call's error if the one that completed "
     "failed."},
    {"strerror", mod_strerror, METH_O,
     "strerror(code, /)\n--\n\ncrnet's text for an error code."},
    {"_shutdown", pycr_shutdown, METH_O,
     "_shutdown(grace, /)\n--\n\n"
     "The exit hook (crnet/__init__.py registers it with atexit): completes "
     "the calls in flight (waiting at most `grace` seconds, then aborting "
     "the job) and closes every comm still open, derived comms first."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "crnet._crnet",
    .m_doc = "The C extension under the package crnet (see help(crnet)).",
    .m_size = -1,
    .m_methods = module_methods,
};

typedef struct int_const {
  const char *name;
  long value;
} int_const;

static const int_const constants[] = {
    {"SUM", CRNET_SUM},
    {"PROD", CRNET_PROD},
    {"MIN", CRNET_MIN},
    {"MAX", CRNET_MAX},
    {"BAND", CRNET_BAND},
    {"BOR", CRNET_BOR},
    {"BXOR", CRNET_BXOR},
    {"LAND", CRNET_LAND},
    {"LOR", CRNET_LOR},
    {"INT8", CRNET_INT8},
    {"INT16", CRNET_INT16},
    {"INT32", CRNET_INT32},
    {"INT64", CRNET_INT64},
    {"UINT8", CRNET_UINT8},
    {"UINT16", CRNET_UINT16},
    {"UINT32", CRNET_UINT32},
    {"UINT64", CRNET_UINT64},
    {"FLOAT16", CRNET_FLOAT16},
    {"BFLOAT16", CRNET_BFLOAT16},
    {"FLOAT32", CRNET_FLOAT},
    {"FLOAT64", CRNET_DOUBLE},
    {"BYTE", CRNET_BYTE},
    {"COLL_ALLREDUCE", CRNET_COLL_ALLREDUCE},
    {"COLL_REDUCE_SCATTER", CRNET_COLL_REDUCE_SCATTER},
    {"COLL_SCAN", CRNET_COLL_SCAN},
    {"COLL_ALLTOALL", CRNET_COLL_ALLTOALL},
    {"COLL_ALLGATHER", CRNET_COLL_ALLGATHER},
    {"COLL_BCAST", CRNET_COLL_BCAST},
    {"COLL_REDUCE", CRNET_COLL_REDUCE},
    {"COLL_BARRIER", CRNET_COLL_BARRIER},
    {"COLL_GATHER", CRNET_COLL_GATHER},
    {"COLL_SCATTER", CRNET_COLL_SCATTER},
    {"COLL_ALLTOALLV", CRNET_COLL_ALLTOALLV},
    {"UNDEFINED", CRNET_UNDEFINED},
    {"ANY_SOURCE", CRNET_ANY_SOURCE},
    {"ANY_TAG", CRNET_ANY_TAG},
    {"TAG_MAX", CRNET_TAG_MAX},
    {"EAGER_BYTES", CRNET_EAGER_BYTES},
#define ERR_CONST_(name, value, msg) {#name, value},
    CRNET_ERRNO_MAP(ERR_CONST_)
#undef ERR_CONST_
};

PyMODINIT_FUNC PyInit__crnet(void) {
  if (pycr_comm_type_init() < 0 || PyType_Ready(&pycr_CommType) < 0 ||
      PyType_Ready(&pycr_RequestType) < 0 || PyType_Ready(&InPlaceType) < 0)
    return NULL;
  if (pycr_StatusType == NULL) {
    pycr_StatusType = PyStructSequence_NewType(&status_desc);
    if (pycr_StatusType == NULL)
      return NULL;
  }
  PyObject *m = PyModule_Create(&module_def);
  if (m == NULL)
    return NULL;
  if (pycr_in_place == NULL) {
    pycr_in_place = PyObject_New(PyObject, &InPlaceType);
    if (pycr_in_place == NULL)
      goto fail;
  }
  if (PyModule_AddObjectRef(m, "Comm", (PyObject *)&pycr_CommType) < 0 ||
      PyModule_AddObjectRef(m, "Request", (PyObject *)&pycr_RequestType) < 0 ||
      PyModule_AddObjectRef(m, "Status", (PyObject *)pycr_StatusType) < 0 ||
      PyModule_AddObjectRef(m, "IN_PLACE", pycr_in_place) < 0 ||
      PyModule_AddStringConstant(m, "CRNET_VERSION", CRNET_VERSION_STRING) <
          0 ||
      pycr_errors_init(m) < 0)
    goto fail;
  for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
    if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0)
      goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
