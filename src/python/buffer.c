/* Arguments of the module's calls: buffers and their element types,
 * operators, datatype and collective names, counts, and a small parser for
 * METH_FASTCALL | METH_KEYWORDS.
 *
 * Buffers. Any object with the buffer protocol: NumPy arrays, array.array,
 * bytearray, bytes (read only), memoryview, a CPU torch tensor's .numpy().
 * It must be C-contiguous (any shape: crnet sees its items in memory
 * order). Its element type comes from the buffer's format, by kind and
 * item size rather than by C type name, so that 'l' and 'q' of 8 bytes are
 * both int64 and a '<' or '=' format is read like a native one:
 *
 *   kind              formats              item size -> crnet datatype
 *   signed integer    b h i l q n          1, 2, 4, 8 -> INT8 .. INT64
 *   unsigned integer  B H I L Q N c        1, 2, 4, 8 -> UINT8 .. UINT64
 *   floating point    e f d                2, 4, 8    -> FLOAT16, FLOAT, DOUBLE
 *   bool              ?                    1          -> UINT8, values 0/1
 *   complex           Zf Zd                8, 16      -> pairs of FLOAT, DOUBLE
 *
 * A bool buffer is reduced only by operators that keep its values 0 or 1
 * (min, max, band, bor, bxor, land, lor): sum and prod would not (NumPy's
 * own add and multiply on bools are lor and land). A complex buffer is
 * moved as pairs of reals and reduced by sum only, the one operator that
 * works part by part. Not supported (TypeError): long double ('g'),
 * big-endian formats of items wider than a byte, pointers, structs and
 * sub-arrays. dtype= overrides the format: the bytes are read as that crnet
 * datatype (bfloat16 from a uint16 or int16 view, float16 from raw bytes,
 * 'byte' for opaque data), and every count is then in its elements. */
#include "crnet_py.h"

#include <stddef.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

static const crnet_datatype signed_by_size[9] = {
    [1] = CRNET_INT8, [2] = CRNET_INT16, [4] = CRNET_INT32, [8] = CRNET_INT64};
static const crnet_datatype unsigned_by_size[9] = {[1] = CRNET_UINT8,
                                                   [2] = CRNET_UINT16,
                                                   [4] = CRNET_UINT32,
                                                   [8] = CRNET_UINT64};

/* The item sizes crnet has integers of. */
static int integer_size(Py_ssize_t size) {
  return size == 1 || size == 2 || size == 4 || size == 8;
}

/* Maps a buffer format to b's dt, lanes and logical; -1 if none fits. */
static int map_format(const char *fmt, Py_ssize_t itemsize, pycr_buf *b) {
  char order = '@';
  int complex_ = 0;
  if (fmt == NULL)
    fmt = "B";
  if (fmt[0] != '\0' && strchr("@=<>!", fmt[0]) != NULL)
    order = *fmt++;
  if (fmt[0] == 'Z') {
    complex_ = 1;
    fmt++;
  }
  if (fmt[0] == '\0' || fmt[1] != '\0')
    return -1;
  Py_ssize_t lanes = complex_ ? 2 : 1;
  if (itemsize <= 0 || itemsize % lanes != 0)
    return -1;
  Py_ssize_t size = itemsize / lanes;
  int big = order == '>' || order == '!';
  int little = order == '<';
  if (size > 1 && ((big && !HOST_BIG_ENDIAN) || (little && HOST_BIG_ENDIAN)))
    return -1;
  b->lanes = (int)lanes;
  b->logical = 0;
  char k = fmt[0];
  if (complex_) {
    if (k != 'f' && k != 'd')
      return -1;
  }
  switch (k) {
  case 'b':
  case 'h':
  case 'i':
  case 'l':
  case 'q':
  case 'n':
    if (!integer_size(size))
      return -1;
    b->dt = signed_by_size[size];
    return 0;
  case 'B':
  case 'H':
  case 'I':
  case 'L':
  case 'Q':
  case 'N':
  case 'c':
    if (!integer_size(size))
      return -1;
    b->dt = unsigned_by_size[size];
    return 0;
  case '?':
    if (size != 1)
      return -1;
    b->dt = CRNET_UINT8;
    b->logical = 1;
    return 0;
  case 'e':
  case 'f':
  case 'd':
    if (size == 2 && !complex_)
      b->dt = CRNET_FLOAT16;
    else if (size == 4)
      b->dt = CRNET_FLOAT;
    else if (size == 8)
      b->dt = CRNET_DOUBLE;
    else
      return -1;
    return 0;
  default:
    return -1;
  }
}

/* Where an empty buffer without memory points. */
static max_align_t empty;

int pycr_buf_get(PyObject *obj, int writable, int dtype, const char *call,
                 const char *what, pycr_buf *b) {
  b->held = 0;
  if (obj == NULL || !PyObject_CheckBuffer(obj)) {
    PyErr_Format(PyExc_TypeError,
                 "%s: %s must be a buffer (a NumPy array, bytearray, "
                 "array.array, memoryview, ...), not %.100s",
                 call, what, obj != NULL ? Py_TYPE(obj)->tp_name : "nothing");
    return -1;
  }
  int flags = writable ? PyBUF_RECORDS : PyBUF_RECORDS_RO;
  if (PyObject_GetBuffer(obj, &b->view, flags) < 0) {
    if (!writable)
      return -1;
    /* The exporter's own words (BufferError, TypeError) say why; the
     * caller needs to know which argument and that it is written to. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyErr_Format(PyExc_TypeError,
                 "%s: %s must be a writable buffer (%S), not a read-only "
                 "%.100s",
                 call, what, value != NULL ? value : Py_None,
                 Py_TYPE(obj)->tp_name);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -1;
  }
  b->held = 1;
  b->ptr = b->view.buf != NULL ? b->view.buf : (void *)&empty;
  if (writable && b->view.readonly) {
    PyErr_Format(PyExc_TypeError, "%s: %s is read-only", call, what);
    goto fail;
  }
  if (!PyBuffer_IsContiguous(&b->view, 'C')) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %s is not C-contiguous (pass a contiguous copy, e.g. "
                 "numpy.ascontiguousarray)",
                 call, what);
    goto fail;
  }
  size_t len = (size_t)b->view.len;
  if (dtype != PYCR_NO_DTYPE) {
    size_t size = crnet_datatype_size((crnet_datatype)dtype);
    if (len % size != 0) {
      PyErr_Format(PyExc_ValueError,
                   "%s: %s has %zu bytes, not a whole number of %s (%zu "
                   "bytes each)",
                   call, what, len, crnet_datatype_name((crnet_datatype)dtype),
                   size);
      goto fail;
    }
    b->dt = (crnet_datatype)dtype;
    b->lanes = 1;
    b->logical = 0;
    b->count = len / size;
    return 0;
  }
  if (map_format(b->view.format, b->view.itemsize, b) < 0) {
    PyErr_Format(PyExc_TypeError,
                 "%s: crnet has no datatype for the elements of %s (buffer "
                 "format '%s', %zd bytes each); dtype= can name one",
                 call, what, b->view.format != NULL ? b->view.format : "B",
                 b->view.itemsize);
    goto fail;
  }
  b->count = len / crnet_datatype_size(b->dt);
  return 0;
fail:
  pycr_buf_release(b);
  return -1;
}

void pycr_buf_release(pycr_buf *b) {
  if (b->held) {
    PyBuffer_Release(&b->view);
    b->held = 0;
  }
}

static const char *kind_name(const pycr_buf *b) {
  if (b->logical)
    return "bool";
  if (b->lanes == 2)
    return b->dt == CRNET_FLOAT ? "complex64" : "complex128";
  return crnet_datatype_name(b->dt);
}

int pycr_buf_same_type(const pycr_buf *a, const pycr_buf *b, const char *call) {
  if (a->dt == b->dt && a->lanes == b->lanes && a->logical == b->logical)
    return 0;
  PyErr_Format(PyExc_TypeError,
               "%s: the buffers hold different element types (%s and %s)", call,
               kind_name(a), kind_name(b));
  return -1;
}

int pycr_buf_same_memory(const pycr_buf *a, const pycr_buf *b) {
  return a->ptr == b->ptr && a->view.len == b->view.len;
}

static const char *const op_names[CRNET_OP_BUILTIN_COUNT] = {
    [CRNET_SUM] = "sum",   [CRNET_PROD] = "prod", [CRNET_MIN] = "min",
    [CRNET_MAX] = "max",   [CRNET_BAND] = "band", [CRNET_BOR] = "bor",
    [CRNET_BXOR] = "bxor", [CRNET_LAND] = "land", [CRNET_LOR] = "lor"};

int pycr_parse_op(PyObject *obj, const char *call, crnet_op *op) {
  if (obj == NULL) {
    *op = CRNET_SUM;
    return 0;
  }
  if (PyUnicode_Check(obj)) {
    for (int i = 0; i < CRNET_OP_BUILTIN_COUNT; i++)
      if (PyUnicode_CompareWithASCIIString(obj, op_names[i]) == 0) {
        *op = i;
        return 0;
      }
    PyErr_Format(PyExc_ValueError,
                 "%s: unknown op %R (sum, prod, min, max, band, bor, bxor, "
                 "land, lor)",
                 call, obj);
    return -1;
  }
  if (PyLong_Check(obj)) {
    long v = PyLong_AsLong(obj);
    if (v >= 0 && v < CRNET_OP_BUILTIN_COUNT) {
      *op = (crnet_op)v;
      return 0;
    }
    if (!(v == -1 && PyErr_Occurred()))
      PyErr_Format(PyExc_ValueError, "%s: unknown op %ld", call, v);
    return -1;
  }
  PyErr_Format(PyExc_TypeError,
               "%s: op must be a name ('sum', ...) or a constant (crnet.SUM, "
               "...), not %.100s",
               call, Py_TYPE(obj)->tp_name);
  return -1;
}

int pycr_check_op(const pycr_buf *b, crnet_op op, const char *call) {
  if (b->logical && (op == CRNET_SUM || op == CRNET_PROD)) {
    PyErr_Format(PyExc_TypeError,
                 "%s: op '%s' on bool would give values other than 0 and 1; "
                 "use '%s'",
                 call, op_names[op], op == CRNET_SUM ? "lor" : "land");
    return -1;
  }
  if (b->lanes == 2 && op != CRNET_SUM) {
    PyErr_Format(PyExc_TypeError,
                 "%s: op '%s' is not defined on complex numbers part by "
                 "part; only 'sum' is",
                 call, op_names[op]);
    return -1;
  }
  int floating = b->dt == CRNET_FLOAT16 || b->dt == CRNET_BFLOAT16 ||
                 b->dt == CRNET_FLOAT || b->dt == CRNET_DOUBLE;
  if (floating && (op == CRNET_BAND || op == CRNET_BOR || op == CRNET_BXOR)) {
    PyErr_Format(PyExc_TypeError, "%s: bitwise op '%s' on %s", call,
                 op_names[op], kind_name(b));
    return -1;
  }
  if (b->dt == CRNET_BYTE) {
    PyErr_Format(PyExc_TypeError,
                 "%s: dtype 'byte' is moved, never reduced by op '%s'", call,
                 op_names[op]);
    return -1;
  }
  return 0;
}

typedef struct named {
  const char *name;
  int value;
} named;

static const named dtype_names[] = {
    {"int8", CRNET_INT8},         {"int16", CRNET_INT16},
    {"int32", CRNET_INT32},       {"int64", CRNET_INT64},
    {"uint8", CRNET_UINT8},       {"uint16", CRNET_UINT16},
    {"uint32", CRNET_UINT32},     {"uint64", CRNET_UINT64},
    {"float16", CRNET_FLOAT16},   {"half", CRNET_FLOAT16},
    {"bfloat16", CRNET_BFLOAT16}, {"float32", CRNET_FLOAT},
    {"float", CRNET_FLOAT},       {"float64", CRNET_DOUBLE},
    {"double", CRNET_DOUBLE},     {"byte", CRNET_BYTE},
};

int pycr_parse_dtype(PyObject *obj, const char *call, int *dtype) {
  *dtype = PYCR_NO_DTYPE;
  if (obj == NULL || obj == Py_None)
    return 0;
  if (PyUnicode_Check(obj)) {
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
      if (PyUnicode_CompareWithASCIIString(obj, dtype_names[i].name) == 0) {
        *dtype = dtype_names[i].value;
        return 0;
      }
    PyErr_Format(PyExc_ValueError,
                 "%s: unknown dtype %R (int8 .. int64, uint8 .. uint64, "
                 "float16, bfloat16, float32, float64, byte)",
                 call, obj);
    return -1;
  }
  if (PyLong_Check(obj)) {
    long v = PyLong_AsLong(obj);
    if (v >= 0 && v < CRNET_DATATYPE_COUNT) {
      *dtype = (int)v;
      return 0;
    }
    if (!(v == -1 && PyErr_Occurred()))
      PyErr_Format(PyExc_ValueError, "%s: unknown dtype %ld", call, v);
    return -1;
  }
  PyErr_Format(PyExc_TypeError,
               "%s: dtype must be a name ('bfloat16', ...) or a constant "
               "(crnet.BFLOAT16, ...), not %.100s",
               call, Py_TYPE(obj)->tp_name);
  return -1;
}

int pycr_parse_collective(PyObject *obj, crnet_collective *coll) {
  if (PyUnicode_Check(obj)) {
    for (int i = 0; i < CRNET_COLL_COUNT; i++)
      if (PyUnicode_CompareWithASCIIString(
              obj, crnet_collective_name((crnet_collective)i)) == 0) {
        *coll = (crnet_collective)i;
        return 0;
      }
    /* The calls that share another's schedule choice (crnet.h). */
    static const named aliases[] = {
        {"exscan", CRNET_COLL_SCAN},
        {"allgatherv", CRNET_COLL_ALLGATHER},
        {"reduce_scatter_block", CRNET_COLL_REDUCE_SCATTER}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
      if (PyUnicode_CompareWithASCIIString(obj, aliases[i].name) == 0) {
        *coll = (crnet_collective)aliases[i].value;
        return 0;
      }
    PyErr_Format(PyExc_ValueError, "unknown collective %R", obj);
    return -1;
  }
  if (PyLong_Check(obj)) {
    long v = PyLong_AsLong(obj);
    if (v >= 0 && v < CRNET_COLL_COUNT) {
      *coll = (crnet_collective)v;
      return 0;
    }
    if (!(v == -1 && PyErr_Occurred()))
      PyErr_Format(PyExc_ValueError, "unknown collective %ld", v);
    return -1;
  }
  PyErr_Format(PyExc_TypeError,
               "a collective is a name ('allreduce', ...) or a constant "
               "(crnet.COLL_ALLREDUCE, ...), not %.100s",
               Py_TYPE(obj)->tp_name);
  return -1;
}

int pycr_parse_int(PyObject *obj, int dflt, long lo, long hi, const char *call,
                   const char *what, int *out) {
  if (obj == NULL || obj == Py_None) {
    *out = dflt;
    return 0;
  }
  if (!PyIndex_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be an int, not %.100s", call,
                 what, Py_TYPE(obj)->tp_name);
    return -1;
  }
  PyObject *idx = PyNumber_Index(obj);
  if (idx == NULL)
    return -1;
  int overflow;
  long v = PyLong_AsLongAndOverflow(idx, &overflow);
  Py_DECREF(idx);
  if (v == -1 && PyErr_Occurred())
    return -1;
  if (overflow != 0 || v < lo || v > hi) {
    PyErr_Format(PyExc_ValueError, "%s: %s %R is out of range (%ld to %ld)",
                 call, what, obj, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

int pycr_parse_counts(PyObject *obj, int n, size_t scale, const char *call,
                      const char *what, size_t *out, size_t *total) {
  size_t sum = 0;
  if (obj == NULL || obj == Py_None) {
    PyErr_Format(PyExc_TypeError, "%s: %s is required", call, what);
    return -1;
  }
  PyObject *seq = PySequence_Fast(obj, "counts must be a sequence");
  if (seq == NULL) {
    PyErr_Format(PyExc_TypeError,
                 "%s: %s must be a sequence of %d ints, not %.100s", call, what,
                 n, Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (PySequence_Fast_GET_SIZE(seq) != n) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %s has %zd entries, not %d (one per rank)", call, what,
                 PySequence_Fast_GET_SIZE(seq), n);
    Py_DECREF(seq);
    return -1;
  }
  PyObject **items = PySequence_Fast_ITEMS(seq);
  for (int i = 0; i < n; i++) {
    Py_ssize_t v = PyNumber_AsSsize_t(items[i], PyExc_OverflowError);
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return -1;
    }
    if (v < 0 || (size_t)v > SIZE_MAX / 2 / scale) {
      PyErr_Format(PyExc_ValueError, "%s: %s[%d] = %zd is not a count", call,
                   what, i, v);
      Py_DECREF(seq);
      return -1;
    }
    out[i] = (size_t)v * scale;
    sum += out[i];
    if (sum > SIZE_MAX / 2) {
      PyErr_Format(PyExc_ValueError, "%s: %s add up to too much", call, what);
      Py_DECREF(seq);
      return -1;
    }
  }
  Py_DECREF(seq);
  if (total != NULL)
    *total = sum;
  return 0;
}

int pycr_parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames, const char *const *names, int nnames,
                    int npos, int nreq, PyObject **out) {
  for (int i = 0; i < nnames; i++)
    out[i] = NULL;
  if (nargs > npos) {
    PyErr_Format(PyExc_TypeError,
                 "%s() takes at most %d positional arguments (%zd given)",
                 fname, npos, nargs);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; i++)
    out[i] = args[i];
  Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; k++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, k);
    int i;
    for (i = 0; i < nnames; i++)
      if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0)
        break;
    if (i == nnames) {
      PyErr_Format(PyExc_TypeError,
                   "%s() got an unexpected keyword argument %R", fname, key);
      return -1;
    }
    if (out[i] != NULL) {
      PyErr_Format(PyExc_TypeError,
                   "%s() got multiple values for argument '%s'", fname,
                   names[i]);
      return -1;
    }
    out[i] = args[nargs + k];
  }
  for (int i = 0; i < nreq; i++)
    if (out[i] == NULL) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'",
                   fname, names[i]);
      return -1;
    }
  return 0;
}
