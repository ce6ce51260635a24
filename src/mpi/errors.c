/* Error codes, their messages, and the handlers that decide what an error
 * does.
 *
 * A code with a message is CODE_BASE + slot * CLASSES + class: the class
 * is its remainder, and the message sits in slot `slot` of a ring of the
 * last MESSAGES errors of the process (an old code whose slot was reused
 * still gives its class, and says its message is gone). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi-ext.h"
#include "mpi_internal.h"

#define CLASSES 64
#define MESSAGES 256
#define CODE_BASE 1024
#define MESSAGE_BYTES 400

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char messages[MESSAGES][MESSAGE_BYTES];
static int codes[MESSAGES];
static unsigned next_slot;

static const char *class_text(int cls) {
  switch (cls) {
  case MPI_SUCCESS:
    return "MPI_SUCCESS: no error";
  case MPI_ERR_BUFFER:
    return "MPI_ERR_BUFFER: invalid buffer pointer";
  case MPI_ERR_COUNT:
    return "MPI_ERR_COUNT: invalid count";
  case MPI_ERR_TYPE:
    return "MPI_ERR_TYPE: invalid or unsupported datatype";
  case MPI_ERR_TAG:
    return "MPI_ERR_TAG: invalid tag";
  case MPI_ERR_COMM:
    return "MPI_ERR_COMM: invalid communicator";
  case MPI_ERR_RANK:
    return "MPI_ERR_RANK: invalid rank";
  case MPI_ERR_REQUEST:
    return "MPI_ERR_REQUEST: invalid request";
  case MPI_ERR_ROOT:
    return "MPI_ERR_ROOT: invalid root";
  case MPI_ERR_OP:
    return "MPI_ERR_OP: invalid or unsupported operator";
  case MPI_ERR_ARG:
    return "MPI_ERR_ARG: invalid argument";
  case MPI_ERR_TRUNCATE:
    return "MPI_ERR_TRUNCATE: message truncated";
  case MPI_ERR_OTHER:
    return "MPI_ERR_OTHER: the job failed";
  case MPI_ERR_INTERN:
    return "MPI_ERR_INTERN: internal error";
  case MPI_ERR_IN_STATUS:
    return "MPI_ERR_IN_STATUS: error code in a status";
  case MPI_ERR_PENDING:
    return "MPI_ERR_PENDING: pending request";
  case MPI_ERR_NO_MEM:
    return "MPI_ERR_NO_MEM: out of memory";
  case MPI_ERR_UNSUPPORTED_OPERATION:
    return "MPI_ERR_UNSUPPORTED_OPERATION: not supported by crnet-mpi";
  case MPI_ERR_INFO:
    return "MPI_ERR_INFO: invalid info object";
  case MPI_ERR_GROUP:
    return "MPI_ERR_GROUP: invalid group";
  case MPI_ERR_KEYVAL:
    return "MPI_ERR_KEYVAL: invalid attribute key";
  case MPI_ERR_INFO_KEY:
    return "MPI_ERR_INFO_KEY: invalid info key";
  case MPI_ERR_INFO_VALUE:
    return "MPI_ERR_INFO_VALUE: invalid info value";
  case MPI_ERR_INFO_NOKEY:
    return "MPI_ERR_INFO_NOKEY: no such info key";
  case MPI_ERR_TOPOLOGY:
    return "MPI_ERR_TOPOLOGY: invalid topology";
  case MPI_ERR_DIMS:
    return "MPI_ERR_DIMS: invalid dimensions";
  case MPIX_ERR_PROC_FAILED:
    return "MPIX_ERR_PROC_FAILED: a rank of the communicator was lost";
  case MPIX_ERR_PROC_FAILED_PENDING:
    return "MPIX_ERR_PROC_FAILED_PENDING: a rank a pending receive could "
           "match was lost";
  case MPIX_ERR_REVOKED:
    return "MPIX_ERR_REVOKED: the communicator was revoked";
  default:
    return "MPI_ERR_UNKNOWN: unknown error";
  }
}

int crnet_mpi_class_of(int rc) {
  switch (rc) {
  case 0:
    return MPI_SUCCESS;
  case CRNET_EINVAL:
    return MPI_ERR_ARG;
  case CRNET_ENOMEM:
    return MPI_ERR_NO_MEM;
  case CRNET_ETRUNCATE:
    return MPI_ERR_TRUNCATE;
  case CRNET_EUNSUPPORTED:
    return MPI_ERR_UNSUPPORTED_OPERATION;
  case CRNET_EPEER: /* mpi-ext.h: ULFM's classes */
    return MPIX_ERR_PROC_FAILED;
  case CRNET_EREVOKED:
    return MPIX_ERR_REVOKED;
  default: /* a lost peer, a timeout, a mismatch, an abort, the network */
    return MPI_ERR_OTHER;
  }
}

/* Keeps the message and returns its code. */
static int record(int cls, const char *text) {
  int code;
  pthread_mutex_lock(&lock);
  unsigned slot = next_slot++ % MESSAGES;
  code = CODE_BASE + (int)slot * CLASSES + cls;
  snprintf(messages[slot], sizeof messages[slot], "%s", text);
  codes[slot] = code;
  pthread_mutex_unlock(&lock);
  return code;
}

static MPI_Errhandler handler_of(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL)
    comm = MPI_COMM_WORLD;
  return crnet_mpi_comm_of(comm)->errhandler;
}

int crnet_mpi_fail(MPI_Comm comm, const char *fn, int cls, const char *fmt,
                   ...) {
  char text[MESSAGE_BYTES - 64], line[MESSAGE_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  snprintf(line, sizeof line, "%s: %s", fn, text);
  int code = record(cls, line);
  if (handler_of(comm) == MPI_ERRORS_RETURN)
    return code;
  /* MPI_ERRORS_ARE_FATAL: say it, end the job. */
  fprintf(stderr, "crnet-mpi: %s (%s)\n", line, class_text(cls));
  fflush(stderr);
  if (crnet_mpi_world() != NULL)
    crnet_comm_abort(crnet_mpi_world(), 1);
  exit(1);
}

int crnet_mpi_from_crnet(MPI_Comm comm, const char *fn, int rc) {
  const char *why;
  if (rc == 0)
    return MPI_SUCCESS;
  comm = crnet_mpi_comm_of(comm);
  why = comm != MPI_COMM_NULL && comm->c != NULL ? crnet_comm_errmsg(comm->c)
                                                 : "";
  return crnet_mpi_fail(comm, fn, crnet_mpi_class_of(rc), "%s%s%s",
                        crnet_strerror(rc), why[0] != '\0' ? ": " : "", why);
}

int crnet_mpi_check_comm(MPI_Comm *comm, const char *fn) {
  if (!crnet_mpi_ready())
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_OTHER,
                          "called before MPI_Init or after MPI_Finalize");
  *comm = crnet_mpi_comm_of(*comm);
  if (*comm == MPI_COMM_NULL || (*comm)->c == NULL)
    return crnet_mpi_fail(MPI_COMM_NULL, fn, MPI_ERR_COMM,
                          *comm == MPI_COMM_NULL ? "MPI_COMM_NULL"
                                                 : "a freed communicator");
  return MPI_SUCCESS;
}

int MPI_Error_class(int errorcode, int *errorclass) {
  if (errorclass == NULL)
    return MPI_ERR_ARG;
  if (errorcode < 0)
    return MPI_ERR_ARG;
  *errorclass =
      errorcode >= CODE_BASE ? (errorcode - CODE_BASE) % CLASSES : errorcode;
  return MPI_SUCCESS;
}

int MPI_Error_string(int errorcode, char *string, int *resultlen) {
  int cls, n;
  if (string == NULL || resultlen == NULL ||
      MPI_Error_class(errorcode, &cls) != MPI_SUCCESS)
    return MPI_ERR_ARG;
  if (errorcode < CODE_BASE) {
    n = snprintf(string, MPI_MAX_ERROR_STRING, "%s", class_text(cls));
  } else {
    unsigned slot = (unsigned)((errorcode - CODE_BASE) / CLASSES) % MESSAGES;
    pthread_mutex_lock(&lock);
    if (codes[slot] == errorcode)
      n = snprintf(string, MPI_MAX_ERROR_STRING, "%s: %s", class_text(cls),
                   messages[slot]);
    else
      n = snprintf(string, MPI_MAX_ERROR_STRING,
                   "%s (its message is gone: %d errors came after it)",
                   class_text(cls), MESSAGES);
    pthread_mutex_unlock(&lock);
  }
  *resultlen = n < MPI_MAX_ERROR_STRING ? n : MPI_MAX_ERROR_STRING - 1;
  return MPI_SUCCESS;
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_set_errhandler");
  if (rc != MPI_SUCCESS)
    return rc;
  if (errhandler != MPI_ERRORS_ARE_FATAL && errhandler != MPI_ERRORS_RETURN)
    return crnet_mpi_fail(comm, "MPI_Comm_set_errhandler", MPI_ERR_ARG,
                          "only MPI_ERRORS_ARE_FATAL and MPI_ERRORS_RETURN "
                          "are supported");
  comm->errhandler = errhandler;
  return MPI_SUCCESS;
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler) {
  int rc = crnet_mpi_check_comm(&comm, "MPI_Comm_get_errhandler");
  if (rc != MPI_SUCCESS)
    return rc;
  if (errhandler == NULL)
    return crnet_mpi_fail(comm, "MPI_Comm_get_errhandler", MPI_ERR_ARG,
                          "errhandler is NULL");
  *errhandler = comm->errhandler;
  return MPI_SUCCESS;
}
